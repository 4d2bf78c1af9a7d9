import type { TLDRRow } from '../../src/data/schemas.js';
import { CoMLRLTaskEnv } from '../../src/decpomdp/comlrl-adapter.js';
import { scaleShift, type RewardProcessor } from '../../src/decpomdp/reward-processor.js';
import { tldrFormatters } from '../../rewards/tldr/prompts.js';
import { tldrRewardBreakdown } from '../../rewards/tldr/reward.js';

/** Largest TLDR reward: 0.5 + 1.0 + 0.5 + (0.4 · 0.95 + 0.6) (tasks-reference §1.1). */
export const TLDR_MAX_REWARD = 2.98;

/** Options of {@link TLDREnv}. */
export interface TLDREnvOptions {
  /** Multiplies the raw reward (paper configs: 1). */
  rewardScale?: number;
  /** Added after scaling (paper configs: 0). */
  rewardShift?: number;
  /** A custom processor instead of scale/shift. */
  rewardProcessor?: RewardProcessor;
}

/**
 * TLDR (LLM_Collab_Writing): agent 0 writes a concise summary, agent 1 a detailed one, of a
 * `trl-lib/tldr` post; one turn; the joint reward is the four-level TLDR reward of the pair, with
 * its per-level breakdown in `info.breakdown`.
 */
export class TLDREnv extends CoMLRLTaskEnv<TLDRRow> {
  constructor(options: TLDREnvOptions = {}) {
    const processor = options.rewardProcessor ?? scaleShift({ scale: options.rewardScale, shift: options.rewardShift });
    super({
      name: 'tldr',
      numAgents: 2,
      numTurns: 1,
      formatters: [...tldrFormatters],
      rewardFunc: ([summary, elaboration]) => {
        const breakdown = tldrRewardBreakdown(summary[0], elaboration[0]);
        return { reward: breakdown.reward, info: { breakdown } };
      },
      rewardProcessor: processor,
      maxReward: processor(TLDR_MAX_REWARD),
    });
  }
}
