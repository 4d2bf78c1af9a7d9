import type { CoopHERow } from '../../src/data/schemas.js';
import { CoMLRLTaskEnv, type CoMLRLFeatureContext } from '../../src/decpomdp/comlrl-adapter.js';
import { scaleShift, type RewardProcessor } from '../../src/decpomdp/reward-processor.js';
import type { ExpertModel } from '../../rewards/coophe/expert.js';
import { CoopHEFeedback, type CoopHEFeedbackMode, type SandboxSlice } from '../../rewards/coophe/feedback.js';
import { coopHEAuxPrompt, coopHEMainPrompt } from '../../rewards/coophe/prompts.js';
import { CoopHERewardRunner, type CoopHERewardOptions } from '../../rewards/coophe/reward.js';

/** The paper configs' reward shift: raw [0, 4] becomes [−4, 0]. */
export const COOPHE_PAPER_REWARD_SHIFT = -4;

/** Largest raw CoopHE reward: 0.4 + 0.6 + 0.5 + 1.0 + 0.5 + 1.0. */
export const COOPHE_MAX_REWARD = 4;

/** Names of CoopHE's numeric m_t entries, in order (see {@link coopHEFeatures}). */
export const COOPHE_FEATURE_NAMES: readonly string[] = ['turn/H', 'tests passed/total (last turn)', 'raw reward/4 (last turn)'];

/**
 * CoopHE's numeric m_t (config `critic_global_features`): turns played over H, the fraction of
 * the problem's tests the last turn's combined code passed (0 at turn 0 and when no test ran:
 * a syntax or check failure stops the reward before the tests), and the last turn's raw reward
 * over its maximum 4 (0 at turn 0). What the level feedback tells the agents, as numbers.
 */
export function coopHEFeatures(context: CoMLRLFeatureContext<CoopHERow>): number[] {
  const b = context.lastInfo?.breakdown;
  const read = (key: string): number | null => {
    if (b === null || typeof b !== 'object') return null;
    const v: unknown = (b as Record<string, unknown>)[key];
    return typeof v === 'number' ? v : null;
  };
  const total = read('total_tests');
  const passed = read('passed_tests');
  const fraction = total !== null && total > 0 && passed !== null ? passed / total : 0;
  return [context.turn / context.numTurns, fraction, (context.lastRawReward ?? 0) / COOPHE_MAX_REWARD];
}

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
 * issued together (`stepMany`): sandbox runs overlap up to the runner's pool size. Numeric m_t
 * for critics: {@link coopHEFeatures}.
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
      globalFeatures: { size: COOPHE_FEATURE_NAMES.length, names: COOPHE_FEATURE_NAMES, of: coopHEFeatures },
    });
    this.runner = runner;
    this.feedback = feedback;
  }
}
