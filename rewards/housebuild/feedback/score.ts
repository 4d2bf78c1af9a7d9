/** `score_feedback` (the configs' default mode): the previous joint reward as a number. */
import { pyFormatFixed } from '../../../src/util/python-text.js';
import { hasKill } from '../commands.js';
import type { HouseBuildFeedbackContext } from '../prompts.js';
import { spiderPenaltyAmount } from '../rpg.js';
import { scoreWorld } from '../world.js';
import { checkAgents, followUpPrompts, replayPreviousTurn, turnLine, type HouseBuildFeedbackOptions } from './common.js';

/**
 * The reward the feedback reports: match score minus the spider penalty. Deliberately applied for
 * a single agent too (the reward function itself skips the penalty there).
 */
export function feedbackReward(ctx: HouseBuildFeedbackContext, completions: readonly string[]): number {
  const prev = replayPreviousTurn(ctx, completions);
  const metrics = scoreWorld(ctx.task, prev.world);
  const killed = prev.acceptedByAgent.some((cmds) => hasKill(cmds));
  return metrics.score_mean - (killed ? 0.0 : spiderPenaltyAmount(ctx.rpgState));
}

/**
 * System prompt; `Score feedback:` with the turn, `Previous reward: %.4f` (`unavailable` if it
 * cannot be computed) and the no-text rule; the base prompt; the agent's previous commands.
 */
export function scoreFeedbackPrompts(
  ctx: HouseBuildFeedbackContext,
  completions: readonly string[],
  opts: HouseBuildFeedbackOptions = {},
): string[] {
  checkAgents(completions);
  let rewardText: string;
  try {
    rewardText = pyFormatFixed(feedbackReward(ctx, completions), 4);
  } catch {
    rewardText = 'unavailable';
  }
  const frame = { resourceText: false, previousHeader: 'Your previous commands:' };
  return followUpPrompts(ctx, completions, opts, frame, (_i, base) => [
    'Score feedback:',
    turnLine(opts),
    `- Previous reward: ${rewardText}`,
    '- Do not output any text other than commands.',
    ...(base ? ['', base] : []),
  ]);
}
