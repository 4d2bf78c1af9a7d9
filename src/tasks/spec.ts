/**
 * What a task is, as the run config and the CLI see it: a {@link TaskSpec}. Each task lives in one
 * folder `envs/<task>/` whose `spec.ts` exports `taskSpec`; the task registry (./registry.ts) holds
 * the specs, the config parser reads task names, feedback modes and options from it, and the CLI
 * builds runs from it. Rewards stay in `rewards/<task>/`.
 *
 * Types here are structural and src-only (src imports nothing above it), so an env folder, a
 * trainer's eval episodes and the config sections all fit them without casts.
 */
import type { z } from 'zod';
import type { CentralizedAdapter } from '../decpomdp/centralized.js';
import type { LLMDecPOMDP } from '../decpomdp/types.js';

/** The `dataset` section of a run config, as a task reads it. */
export interface TaskDatasetSection {
  readonly task: string;
  readonly path?: string | undefined;
  readonly eval_path?: string | undefined;
  readonly train_split?: string | undefined;
  readonly eval_split?: string | undefined;
}

/** The `external` section (multi-turn feedback), as a task reads it. */
export interface TaskExternalSection {
  readonly mode?: string | undefined;
  readonly original_prompt?: boolean | undefined;
  readonly previous_response?: boolean | undefined;
  readonly lim?: number | undefined;
  readonly sandbox_slice?: number | 'all' | null | undefined;
  readonly external_prompt_passthrough?: boolean | undefined;
}

/** The keys of the `external` section. */
export type ExternalOptionKey = keyof TaskExternalSection;

/** What a task's setup gets from the run config. */
export interface TaskContext<Options> {
  /** The trainer's CLI name ('magrpo', 'collm-dc', 'collm-cc'): some tasks' paper splits depend on it. */
  readonly trainer: string;
  readonly dataset: TaskDatasetSection;
  readonly external: TaskExternalSection;
  /** The `task:` section parsed by the spec's `options` schema (`{}` when the spec has none). */
  readonly options: Options;
  /** The reward processor: r' = r·scale + shift (scale 1, shift 0 when disabled). */
  readonly reward: { readonly scale: number; readonly shift: number };
  /** The run seed. */
  readonly seed: number;
  /** Turns per episode (the trainer section's `num_turns`). */
  readonly numTurns: number;
}

/** One played episode, as task metrics read it (a trainer's eval episode has these fields). */
export interface PlayedEpisode {
  /** completions[turn][agent]: the decoded completion. */
  readonly completions: readonly (readonly string[])[];
  /** The joint reward of each turn played. */
  readonly rewards: readonly number[];
  /** The env's `info` of each step. */
  readonly infos: readonly Readonly<Record<string, unknown>>[];
}

/** Metrics over episodes (`eval/<key>` in training logs, printed by `comlrl eval`). */
export type EpisodeMetrics = (episodes: readonly PlayedEpisode[]) => Record<string, number>;

/** A task made ready for one run: its environment, items and metrics. */
export interface TaskSetup<T, S> {
  readonly env: LLMDecPOMDP<T, S>;
  readonly trainTasks: readonly T[];
  readonly evalTasks: readonly T[];
  /** Task metrics the trainers log at every evaluation (`eval/<key>`). */
  readonly evalCallbacks: readonly EpisodeMetrics[];
  /** The paper metrics: `samples[j]` holds the episodes sampled for eval item j (n each); `ks` the pass@k values. */
  paperMetrics(samples: readonly (readonly PlayedEpisode[])[], ks: readonly number[]): Record<string, number>;
  /** Frees task resources (sandboxes). */
  close(): Promise<void>;
  /**
   * How one joint policy plays the task's roles (CoMLRL's centralized adapter: `build_prompt`,
   * `parse_completion`), for CentralizedMAGRPO; absent: the task cannot be trained centralized.
   */
  readonly centralized?: CentralizedAdapter<S>;
  /**
   * The expected reward of each turn when every agent answers uniformly at random, as the trainers
   * log it (after the reward processor; entry k − 1: turn k), where the task can state it exactly:
   * the plots draw it as the random-play line.
   */
  readonly randomPlayReward?: readonly number[];
}

/** A task: everything the config parser and the CLI need to know about it. */
export interface TaskSpec<T, S, Options> {
  /** The `dataset.task` value, e.g. 'housebuild'. */
  readonly name: string;
  /** Its name in messages, e.g. 'HouseBuild' ("a HouseBuild option"). */
  readonly label: string;
  /** One line for `comlrl eval --help`: the metrics it prints. */
  readonly metricsSummary: string;
  /** The `external.mode` values it accepts (empty: no multi-turn feedback modes). */
  readonly externalModes: readonly string[];
  /** The `external` keys besides `mode` that only this task reads. */
  readonly externalOptions: readonly ExternalOptionKey[];
  /** The strict zod schema of its `task:` section; absent: the task takes no options. */
  readonly options?: z.ZodType<Options>;
  /**
   * The default train and eval split specs (the paper's), for a trainer; undefined: every row.
   */
  defaultSplits?(trainer: string): { readonly train: string; readonly eval: string } | undefined;
  /**
   * Where rows come from when `dataset.path` is unset, for messages: 'builtin' (items in code,
   * e.g. the toy task), 'packaged' (data shipped with comlrl) or 'required' (the path must be given).
   */
  readonly data: 'builtin' | 'packaged' | 'required';
  /** Whether eval items may repeat train items by design (no overlap warning). Default false. */
  readonly evalRepeatsTrain?: boolean;
  /** Episodes `comlrl eval` samples per item when `--samples` is not given (default 1). */
  defaultEvalSamples?(ks: readonly number[]): number;
  /** Builds the environment and loads the items of one run. */
  setup(context: TaskContext<Options>): Promise<TaskSetup<T, S>>;
}

/**
 * A spec with its item, state and option types erased, as the registry holds it. A spec's
 * environment only ever receives items and states that came from the same spec's setup, so the
 * erasure loses nothing the CLI could get wrong.
 */
export type AnyTaskSpec = TaskSpec<unknown, unknown, unknown>;

/**
 * Declares a task spec: checks the spec's types (items T, states S, options) where it is written
 * and returns it as the registry holds it ({@link AnyTaskSpec}). No cast: the spec's methods take
 * T, S and Options as parameters, which TypeScript compares bivariantly; that is sound here because
 * the CLI passes a setup's items and states only back to that setup's env, and the options only
 * come from parsing with the spec's own schema.
 */
export function defineTask<T, S, Options = Record<string, never>>(spec: TaskSpec<T, S, Options>): AnyTaskSpec {
  return spec;
}
