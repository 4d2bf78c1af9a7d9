import type { CoopHERow } from '../../src/data/schemas.js';
import { CoMLRLTaskEnv } from '../../src/decpomdp/comlrl-adapter.js';
import { scaleShift, type RewardProcessor } from '../../src/decpomdp/reward-processor.js';
import type { ExpertModel } from '../../rewards/coophe/expert.js';
import { CoopHEFeedback, type CoopHEFeedbackMode, type SandboxSlice } from '../../rewards/coophe/feedback.js';
import { coopHEAuxPrompt, coopHEMainPrompt } from '../../rewards/coophe/prompts.js';
import { CoopHERewardRunner, type CoopHERewardOptions } from '../../rewards/coophe/reward.js';

/** The paper configs' reward shift: raw [0, 4] becomes [−4, 0]. */
export const COOPHE_PAPER_REWARD_SHIFT = -4;

/** Largest raw CoopHE reward: 0.4 + 0.6 + 0.5 + 1.0 + 0.5 + 1.0. */
export const COOPHE_MAX_REWARD = 4;

/** Options of {@link CoopHEEnv}. */
export interface CoopHEEnvOptions {
  /** Horizon (paper: 2). */
  numTurns?: number;
  /**
   * The reward runner (Python sandbox), shared by the reward and `level_feedback`. Default: one
   * built from `rewardOptions` (construction fails clearly when python3 is missing).
   */
  runner?: CoopHERewardRunner;
  /** Options of the default runner (variant, sandbox limits, pool size). */
  rewardOptions?: CoopHERewardOptions;
  /** Follow-up mode (`external.mode`). Default `level_feedback`. */
  feedbackMode?: CoopHEFeedbackMode;
  /** Asserts `level_feedback` shows (`external.sandbox_slice`). Default 1. */
  sandboxSlice?: SandboxSlice;
  /** The expert model `expert_edits` calls (required by that mode). */
  expert?: ExpertModel;
  /** Expert attempts before empty edits. Default 3. */
  expertRetries?: number;
  /**
   * true (default, the fork scripts the vectors come from): follow-ups are the prompts verbatim.
   * false (newest upstream configs): each follow-up is wrapped in the turn-1 aux/main template,
   * standing in for the problem text.
   */
  externalPromptPassthrough?: boolean;
  /** Multiplies the raw reward (paper: 1). */
  rewardScale?: number;
  /** Added after scaling; the paper uses {@link COOPHE_PAPER_REWARD_SHIFT}. Default 0. */
  rewardShift?: number;
  /** A custom processor instead of scale/shift. */
  rewardProcessor?: RewardProcessor;
  /** Ends an episode early when the processed reward is strictly greater than this (leave unset for MAGRPO). */
  earlyTerminationThreshold?: number | null;
  /** Reports expert failures. */
  log?: (message: string) => void;
}

/**
 * CoopHumanEval (LLM_Collab_Code_Generation) as a 2-agent LLM Dec-POMDP: agent 0 writes a helper
 * `aux`, agent 1 the problem's entry point, which may call it. Each turn's joint reward runs the
 * problem's tests on the combined code in a Python sandbox (`info.breakdown` holds every level);
 * follow-ups carry each agent's own history and the chosen feedback. Steps of many states can be
 * issued together (`stepMany`): sandbox runs overlap up to the runner's pool size.
 */
export class CoopHEEnv extends CoMLRLTaskEnv<CoopHERow> {
  /** The runner behind rewards and diagnostics. */
  readonly runner: CoopHERewardRunner;
  /** The follow-up builder. */
  readonly feedback: CoopHEFeedback;

  constructor(options: CoopHEEnvOptions = {}) {
    const runner = options.runner ?? new CoopHERewardRunner(options.rewardOptions);
    // Built here so a bad mode (or expert_edits without an expert) fails before any episode.
    const feedback = new CoopHEFeedback({
      mode: options.feedbackMode,
      sandboxSlice: options.sandboxSlice,
      runner,
      expert: options.expert,
      expertRetries: options.expertRetries,
      log: options.log,
    });
    const processor = options.rewardProcessor ?? scaleShift({ scale: options.rewardScale, shift: options.rewardShift });
    super({
      name: 'coophe',
      numAgents: 2,
      numTurns: options.numTurns ?? 2,
      formatters: [(row: CoopHERow) => coopHEAuxPrompt(row), (row: CoopHERow) => coopHEMainPrompt(row)],
      rewardFunc: async ([aux, main], { item }) => {
        const breakdown = await runner.breakdown(aux[0], main[0], item);
        return { reward: breakdown.reward, info: { breakdown } };
      },
      externalTransition: async ({ item, promptHistoryPerAgent, responseHistoryPerAgent }) => {
        const next = await feedback.followUps({
          problem: item,
          promptHistory: [promptHistoryPerAgent[0], promptHistoryPerAgent[1]],
          responseHistory: [responseHistoryPerAgent[0], responseHistoryPerAgent[1]],
        });
        return [next.aux, next.main];
      },
      externalPromptPassthrough: options.externalPromptPassthrough ?? true,
      rewardProcessor: processor,
      earlyTerminationThreshold: options.earlyTerminationThreshold,
      maxReward: processor(COOPHE_MAX_REWARD),
    });
    this.runner = runner;
    this.feedback = feedback;
  }
}
