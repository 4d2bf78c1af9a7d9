import type { HouseBuildTask } from '../../src/data/schemas.js';
import { CoMLRLTaskEnv, type CoMLRLFeatureContext } from '../../src/decpomdp/comlrl-adapter.js';
import { scaleShift, type RewardProcessor } from '../../src/decpomdp/reward-processor.js';
import type { ObservationRendering } from '../../src/decpomdp/types.js';
import {
  houseBuildFollowUpPrompts,
  parseHouseBuildFeedbackMode,
  type HouseBuildFeedbackMode,
} from '../../rewards/housebuild/feedback/index.js';
import {
  HOUSEBUILD_SYSTEM_PROMPT,
  houseBuildFeedbackContext,
  houseBuildFirstTurnPrompt,
  houseBuildUserPrompt,
  type HouseBuildFeedbackContext,
  type HouseBuildPromptOptions,
} from '../../rewards/housebuild/prompts.js';
import { houseBuildRewardBreakdown, type HouseBuildTaskOptions } from '../../rewards/housebuild/reward.js';
import { HOUSEBUILD_PAPER_RPG_CONFIG, prepareRpgState, type RpgConfig, type RpgState } from '../../rewards/housebuild/rpg.js';
import { houseBuildTaskSpec, type HouseBuildTaskSpec } from '../../rewards/housebuild/task.js';
import { pyRStrip } from '../../src/util/python-text.js';

/** The paper configs' reward shift: raw [−0.1, 1] becomes [−1.1, 0]. */
export const HOUSEBUILD_PAPER_REWARD_SHIFT = -1;

/** Options of {@link HouseBuildEnv}; task options default to the shipped configs. */
export interface HouseBuildEnvOptions extends HouseBuildTaskOptions {
  /** Horizon (paper: 4). */
  numTurns?: number;
  /**
   * The run's spider/HP state. Default: drawn once from `seed` with `rpgConfig`, as the training
   * scripts do at start-up; `null` means no spiders.
   */
  rpgState?: RpgState | null;
  /** Seed of the spider attacks when `rpgState` is not given. Default 0 (attacks [2, 2, 1]). */
  seed?: number;
  /** Spider/HP config when drawing the state. Default: the paper's (5 HP, 3 spiders, attacks 1..3). */
  rpgConfig?: RpgConfig;
  /** `external.mode` of the follow-ups. Default `score_feedback`. */
  feedbackMode?: HouseBuildFeedbackMode;
  /** `external.original_prompt`. Default true. */
  originalPrompt?: boolean;
  /** `external.previous_response`. Default true. */
  previousResponse?: boolean;
  /** `external.lim`. Default 20. */
  limit?: number | null;
  /** `prompt.include_air_rects`. Default false. */
  includeAirRects?: boolean;
  /** Multiplies the raw reward (paper: 1). */
  rewardScale?: number;
  /** Added after scaling; the paper uses {@link HOUSEBUILD_PAPER_REWARD_SHIFT}. Default 0. */
  rewardShift?: number;
  /** A custom processor instead of scale/shift. */
  rewardProcessor?: RewardProcessor;
  /** Ends an episode early when the processed reward is strictly greater than this (leave unset for MAGRPO). */
  earlyTerminationThreshold?: number | null;
}

const ROLES = ['agent1', 'agent2'] as const;

/** Names of HouseBuild's numeric m_t entries, in order (see {@link houseBuildFeatures}). */
export const HOUSEBUILD_FEATURE_NAMES: readonly string[] = ['turn/H', 'cells right (last build)', 'iou (last build)', 'spiders killed (last build)'];

/**
 * HouseBuild's numeric m_t (config `critic_global_features`): turns played over H, and of the last
 * turn's build (each turn builds from an empty world, so the last build is the progress) the
 * fraction of target cells right (`score_match`, the reward's base), the non-air IoU, and 1 when
 * an agent's `/kill` spared the team the spider penalty; 0 each at turn 0.
 */
export function houseBuildFeatures(context: CoMLRLFeatureContext<HouseBuildTask>): number[] {
  const b = context.lastInfo?.breakdown;
  const breakdown: Record<string, unknown> = b !== null && typeof b === 'object' ? (b as Record<string, unknown>) : {};
  const metrics = breakdown.metrics;
  const read = (key: string): number => {
    if (metrics === null || typeof metrics !== 'object') return 0;
    const v: unknown = (metrics as Record<string, unknown>)[key];
    return typeof v === 'number' ? v : 0;
  };
  return [context.turn / context.numTurns, read('score_match'), read('iou'), breakdown.has_kill === true ? 1 : 0];
}

/**
 * HouseBuild (LLM_Collab_Minecraft `house_build`) as a 2-agent LLM Dec-POMDP: both agents see the
 * task's layers and build it together with `/fill` commands; the joint reward each turn is the
 * match score of the combined build minus the spider penalty. Each turn starts from an empty
 * world; follow-up prompts carry the chosen feedback (`score_feedback` by default).
 *
 * Rendering follows the configs: turn 1 is `[system, user]` through a chat template (or
 * `system + "\n\n" + user` as plain text); follow-ups are plain text with the system prompt inline.
 * Numeric m_t for critics: {@link houseBuildFeatures}.
 */
export class HouseBuildEnv extends CoMLRLTaskEnv<HouseBuildTask> {
  /** The run's spider/HP state, fixed for the lifetime of the env. */
  readonly rpgState: RpgState | null;
  private readonly promptOptions: HouseBuildPromptOptions;
  private readonly resolve: (task: HouseBuildTask) => ResolvedTask;

  constructor(options: HouseBuildEnvOptions = {}) {
    const rpgState = options.rpgState !== undefined ? options.rpgState : prepareRpgState(options.rpgConfig ?? HOUSEBUILD_PAPER_RPG_CONFIG, options.seed ?? 0);
    const taskOptions: HouseBuildTaskOptions = {
      limitedResource: options.limitedResource,
      maxCommands: options.maxCommands,
      blockAgent1: options.blockAgent1,
      blockAgent2: options.blockAgent2,
    };
    const promptOptions: HouseBuildPromptOptions = { ...taskOptions, rpgState, numAgents: 2, includeAirRects: options.includeAirRects };
    const mode = parseHouseBuildFeedbackMode(options.feedbackMode ?? 'score_feedback');
    const processor = options.rewardProcessor ?? scaleShift({ scale: options.rewardScale, shift: options.rewardShift });
    const resolve = taskResolver(promptOptions);
    super({
      name: 'housebuild',
      numAgents: 2,
      numTurns: options.numTurns ?? 4,
      formatters: ROLES.map((role) => (task: HouseBuildTask) => houseBuildFirstTurnPrompt(resolve(task).spec, role, promptOptions)),
      rewardFunc: ([c1, c2], { item }) => {
        const breakdown = houseBuildRewardBreakdown(resolve(item).spec, [c1[0], c2[0]], rpgState, taskOptions);
        return { reward: breakdown.reward, info: { breakdown } };
      },
      externalTransition: ({ agentCompletions, promptHistoryPerAgent, item }) =>
        houseBuildFollowUpPrompts(mode, resolve(item).ctx, agentCompletions, {
          // The reference counts prompts so far + 1: 2 on the first follow-up.
          turn: promptHistoryPerAgent[0].length + 1,
          originalPrompt: options.originalPrompt,
          previousResponse: options.previousResponse,
          limit: options.limit,
        }),
      // The HouseBuild formatter returns multi-line prompts verbatim (stripped): net passthrough.
      externalPromptPassthrough: true,
      rewardProcessor: processor,
      earlyTerminationThreshold: options.earlyTerminationThreshold,
      maxReward: processor(1),
      globalFeatures: { size: HOUSEBUILD_FEATURE_NAMES.length, names: HOUSEBUILD_FEATURE_NAMES, of: houseBuildFeatures },
    });
    this.resolve = resolve;
    this.rpgState = rpgState;
    this.promptOptions = promptOptions;
  }

  /** Turn 1 goes through the chat template as `[system, user]`; follow-ups are raw text. */
  rendering(state: { item: HouseBuildTask; turn: number }, agent: number): ObservationRendering {
    if (state.turn > 0) return { kind: 'raw' };
    return {
      kind: 'chat',
      system: pyRStrip(HOUSEBUILD_SYSTEM_PROMPT),
      user: houseBuildUserPrompt(this.resolve(state.item).spec, ROLES[agent], this.promptOptions),
    };
  }
}

interface ResolvedTask {
  spec: HouseBuildTaskSpec;
  ctx: HouseBuildFeedbackContext;
}

/** Task row → normalised spec and feedback context, computed once per row object. */
function taskResolver(promptOptions: HouseBuildPromptOptions): (task: HouseBuildTask) => ResolvedTask {
  const cache = new WeakMap<HouseBuildTask, ResolvedTask>();
  return (task) => {
    let hit = cache.get(task);
    if (hit === undefined) {
      const spec = houseBuildTaskSpec(task);
      hit = { spec, ctx: houseBuildFeedbackContext(spec, promptOptions) };
      cache.set(task, hit);
    }
    return hit;
  };
}
