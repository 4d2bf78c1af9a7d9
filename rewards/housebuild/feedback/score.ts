/** `score_feedback` (the configs' default mode): the previous joint reward as a number. */
import { pyFormatFixed } from '../../tldr/python-text.js';
import { hasKill } from '../commands.js';
import type { HouseBuildFeedbackContext } from '../prompts.js';
import { spiderPenaltyAmount } from '../rpg.js';
import { scoreWorld } from '../world.js';
import { baseUserPrompt, checkAgents, finish, pushPrevious, replayPreviousTurn, type HouseBuildFeedbackOptions } from './common.js';

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
  const n = checkAgents(completions);
  let rewardText: string;
  try {
    rewardText = pyFormatFixed(feedbackReward(ctx, completions), 4);
  } catch {
    rewardText = 'unavailable';
  }
  return completions.map((completion, i) => {
    const parts: string[] = [];
    if (ctx.systemPrompt) parts.push(ctx.systemPrompt, '');
    parts.push('Score feedback:', `- Turn: ${opts.turn ?? 1}`, `- Previous reward: ${rewardText}`);
    parts.push('- Do not output any text other than commands.');
    const base = baseUserPrompt(ctx, i, n);
    if ((opts.originalPrompt ?? true) && base) parts.push('', base);
    if (opts.previousResponse ?? true) pushPrevious(parts, completion, 'Your previous commands:');
    return finish(parts);
  });
}
