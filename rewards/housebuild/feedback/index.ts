/**
 * HouseBuild multi-turn external feedback (tasks-reference §2.4): the six follow-up modes and the
 * dispatcher. The returned texts are the next turn's prompts as the model sees them: the HouseBuild
 * formatter passes multi-line prompts through verbatim, so no chat template is applied to them.
 */
import type { HouseBuildFeedbackContext } from '../prompts.js';
import type { HouseBuildFeedbackOptions } from './common.js';
import { perfectFeedbackPrompts } from './perfect.js';
import { positionFeedbackPrompts, positionModificationPrompts } from './position.js';
import { rectModificationPrompts, resourceSchedulePrompts } from './rects.js';
import { scoreFeedbackPrompts } from './score.js';

export type { HouseBuildFeedbackOptions, WrongCell } from './common.js';
export { perfectFeedbackPrompts } from './perfect.js';
export { positionFeedbackPrompts, positionModificationPrompts } from './position.js';
export { bestSubrect, rectModificationPrompts, resourceSchedulePrompts, type SuggestedRect } from './rects.js';
export { feedbackReward, scoreFeedbackPrompts } from './score.js';

/** The follow-up modes (`external.mode`); the configs use `score_feedback`. */
export const HOUSEBUILD_FEEDBACK_MODES = [
  'score_feedback',
  'perfect_feedback',
  'position_feedback',
  'position_modification',
  'rect_modification',
  'resource_schedule',
] as const;
export type HouseBuildFeedbackMode = (typeof HOUSEBUILD_FEEDBACK_MODES)[number];

const ALIASES: Readonly<Record<string, HouseBuildFeedbackMode>> = {
  score: 'score_feedback',
  feedback: 'perfect_feedback',
};

/**
 * Reads a mode name as the reference does: trimmed, lower-cased, `-` accepted for `_`, and the
 * aliases `score` and `feedback`. Unknown names are an error naming the allowed values.
 */
export function parseHouseBuildFeedbackMode(mode: string): HouseBuildFeedbackMode {
  const key = mode.trim().toLowerCase().replace(/-/g, '_');
  const found = ALIASES[key] ?? HOUSEBUILD_FEEDBACK_MODES.find((m) => m === key);
  if (!found) {
    throw new Error(`external.mode: '${mode}' is not implemented; use one of ${HOUSEBUILD_FEEDBACK_MODES.join(', ')}`);
  }
  return found;
}

const BUILDERS: Readonly<
  Record<HouseBuildFeedbackMode, (ctx: HouseBuildFeedbackContext, completions: readonly string[], opts: HouseBuildFeedbackOptions) => string[]>
> = {
  score_feedback: scoreFeedbackPrompts,
  perfect_feedback: perfectFeedbackPrompts,
  position_feedback: positionFeedbackPrompts,
  position_modification: positionModificationPrompts,
  rect_modification: rectModificationPrompts,
  resource_schedule: resourceSchedulePrompts,
};

/**
 * The next turn's prompt for every agent after a joint action (`get_external_transition`).
 * `completions` holds each agent's previous raw completion, in agent order.
 */
export function houseBuildFollowUpPrompts(
  mode: HouseBuildFeedbackMode | string,
  ctx: HouseBuildFeedbackContext,
  completions: readonly string[],
  opts: HouseBuildFeedbackOptions = {},
): string[] {
  return BUILDERS[parseHouseBuildFeedbackMode(mode)](ctx, completions, opts);
}
