/**
 * TLDR and HouseBuild reward throughput (issue 3's benchmark): rewards per second on realistic
 * single pairs, one call at a time, as a trainer computes them. Figures only, no assertions.
 */
import { readFileSync } from 'node:fs';
import { houseBuildDataPath } from '../src/data/index.js';
import {
  HOUSEBUILD_PAPER_RPG_CONFIG,
  houseBuildFeedbackContext,
  houseBuildFollowUpPrompts,
  houseBuildReward,
  parseHouseBuildTask,
  prepareRpgState,
} from '../rewards/housebuild/index.js';
import { tldrLoggerMetrics, tldrReward } from '../rewards/tldr/index.js';

/** Calls `fn` for about `ms` milliseconds (after a short warm-up) and returns calls per second. */
function rate(fn: (i: number) => unknown, ms = 1000): number {
  for (let i = 0; i < 200; i++) fn(i);
  let n = 0;
  const start = performance.now();
  let elapsed = 0;
  while (elapsed < ms) {
    for (let k = 0; k < 50; k++) fn(n++);
    elapsed = performance.now() - start;
  }
  return (n / elapsed) * 1000;
}

const SUMMARY = 'The poster got a well-paid job offer across the country but fears loneliness and high housing costs, and asks whether relocating is worth it.';
const ELABORATION =
  'The poster received a job offer requiring relocation across the country. Furthermore, the salary is considerably ' +
  'higher; however, leaving friends and family feels daunting. Specifically, they worry about loneliness and the cost ' +
  'of housing in the new city. Consequently, they are torn between career growth and stability, while ultimately ' +
  'wanting advice on whether the move is worth it if the social costs prove high.';

// A two-agent split of task 0002 that respects the per-agent budgets (the perfect build).
const AGENT1 = [
  '/fill 0 0 1 5 0 5 white_concrete', '/fill 0 1 1 0 1 1 obsidian', '/fill 2 1 1 2 1 1 planks',
  '/fill 0 1 5 0 1 5 obsidian', '/fill 0 2 1 0 2 1 obsidian', '/fill 0 2 5 0 2 5 obsidian',
  '/fill 0 3 1 0 3 1 obsidian', '/fill 5 3 2 5 3 4 white_concrete', '/fill 0 3 5 0 3 5 obsidian',
  '/fill 0 4 0 5 4 0 stone_stairs', '/fill 0 4 1 5 4 5 stone_bricks', '/fill 0 5 1 5 5 1 stone_stairs',
  '/fill 0 6 2 5 6 2 stone_stairs',
].join('\n');
const AGENT2 = [
  '/fill 1 1 1 1 1 1 white_concrete', '/fill 3 1 1 3 1 1 planks', '/fill 4 1 1 4 1 1 white_concrete',
  '/fill 5 1 1 5 1 1 obsidian', '/fill 0 1 2 0 1 4 white_concrete', '/fill 5 1 2 5 1 4 white_concrete',
  '/fill 1 1 5 4 1 5 white_concrete', '/fill 5 1 5 5 1 5 obsidian', '/fill 1 2 1 1 2 1 white_concrete',
  '/fill 4 2 1 4 2 1 white_concrete', '/fill 5 2 1 5 2 1 obsidian', '/fill 0 2 2 0 2 4 white_concrete',
  '/fill 5 2 2 5 2 4 white_concrete', '/fill 1 2 5 4 2 5 white_concrete', '/fill 5 2 5 5 2 5 obsidian',
  '/fill 1 3 1 4 3 1 white_concrete', '/fill 5 3 1 5 3 1 obsidian', '/fill 0 3 2 0 3 4 white_concrete',
  '/fill 1 3 5 4 3 5 white_concrete', '/fill 5 3 5 5 3 5 obsidian', '/fill 0 4 6 5 4 6 stone_stairs',
  '/fill 0 5 2 5 5 4 stone_bricks', '/fill 0 5 5 5 5 5 stone_stairs', '/fill 0 6 3 5 6 3 stone_bricks',
  '/fill 0 6 4 5 6 4 stone_stairs', '/kill',
].join('\n');

/** Rewards per second for TLDR (reward, logger) and HouseBuild (reward, score feedback). */
export async function benchTldrHouseBuild(): Promise<Record<string, number>> {
  const rows = JSON.parse(readFileSync(houseBuildDataPath(), 'utf8')) as unknown[];
  const task = parseHouseBuildTask(rows[0]);
  const state = prepareRpgState(HOUSEBUILD_PAPER_RPG_CONFIG, 42);
  const ctx = houseBuildFeedbackContext(task, { rpgState: state });
  // Vary the text slightly per call so no layer of caching could answer for us.
  const tldrPairs = [0, 1, 2, 3].map((k) => [SUMMARY + ' '.repeat(k), ELABORATION + ' x'.repeat(k)] as const);
  const hbPairs = [0, 1, 2, 3].map((k) => [AGENT1 + '\n'.repeat(k), AGENT2] as const);
  return {
    tldr_rewards_per_s: rate((i) => tldrReward(...tldrPairs[i & 3])),
    tldr_logger_metrics_per_s: rate((i) => tldrLoggerMetrics(...tldrPairs[i & 3])),
    housebuild_rewards_per_s: rate((i) => houseBuildReward(task, hbPairs[i & 3], state)),
    housebuild_score_feedback_prompts_per_s: rate((i) => houseBuildFollowUpPrompts('score_feedback', ctx, hbPairs[i & 3], { turn: 2 })),
  };
}
