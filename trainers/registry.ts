/**
 * The trainer registry: every trainer a run config may select, with what the CLI and `comlrl eval`
 * need to run it — its config section and schema, how many critic LMs it takes, how it is built
 * from loaded models, where its models are in a directory it saved, how its evaluation episodes
 * end. The built-in trainers (./builtin.ts: magrpo, collm-dc, collm-cc) register as
 * `comlrl/trainers` or the CLI loads; `registerTrainer` adds one from user code, and a run config
 * then selects it by its section.
 *
 * A trainer's section is parsed once, by its schema, when the run config is read; the registry
 * hands that parsed config to the trainer's functions typed by the schema.
 */
import type { z } from 'zod';
import { registerTrainerSection, wasParsedBy, type TrainerSectionFields, type TrainerSectionSpec } from '../src/config/trainers.js';
import type { CriticHead } from '../src/critic/heads.js';
import type { CriticLM } from '../src/critic/value-model.js';
import type { CentralizedAdapter } from '../src/decpomdp/centralized.js';
import type { Agent } from '../src/decpomdp/agent.js';
import type { LLMDecPOMDP } from '../src/decpomdp/types.js';
import type { PlayedEpisode } from '../src/tasks/spec.js';
import type { CheckpointableTrainer, ResumableTrainer } from './core/checkpoint.js';
import { parseConfig } from './core/config.js';
import type { EvalCallback, EvalEpisode } from './core/eval.js';
import type { MetricRecord, MetricsSink } from './core/metrics.js';
import { agentDirs, type ModelLayout } from './core/save.js';
import type { TrainOptions } from './core/trainer.js';

/** What a registered trainer is built from: its parsed config, the loaded models and the task. */
export interface TrainerBuildInputs<C> {
  /** The trainer's section as its schema parsed it. */
  readonly config: C;
  readonly agents: readonly Agent[];
  /** Its critic LMs: `criticCount` of them, from the config's model paths or a checkpoint's layout. */
  readonly critics: readonly CriticLM[];
  /** Value heads read from a checkpoint (its layout's `heads`); empty: the trainer makes fresh ones. The trainer owns them. */
  readonly heads: readonly CriticHead[];
  readonly env: LLMDecPOMDP<unknown, unknown>;
  readonly trainTasks: readonly unknown[];
  readonly evalTasks: readonly unknown[];
  readonly evalCallbacks: readonly EvalCallback<unknown, unknown>[];
  readonly logger?: MetricsSink;
  /** The task's centralized adapter, when it has one (CentralizedMAGRPO needs it). */
  readonly centralized?: CentralizedAdapter<unknown>;
}

/** What `comlrl eval` plays of a task: its environment and metrics (see {@link TrainerSpec.playTask}). */
export interface PlayedTask {
  readonly env: LLMDecPOMDP<unknown, unknown>;
  readonly evalCallbacks: readonly EvalCallback<unknown, unknown>[];
  paperMetrics(samples: readonly (readonly PlayedEpisode[])[], ks: readonly number[]): Record<string, number>;
  readonly centralized?: CentralizedAdapter<unknown>;
}

/** What a registered trainer builds: what the CLI's run, its checkpoints and its resume drive. */
export interface RunnableTrainer extends CheckpointableTrainer, ResumableTrainer {
  readonly agents: readonly Agent[];
  /** Joint actions scored so far (`env_step`). */
  readonly envSteps: number;
  train(options?: TrainOptions): Promise<void>;
  evaluate(): Promise<{ readonly metrics: MetricRecord; readonly episodes: readonly EvalEpisode<unknown, unknown>[] }>;
  /** Frees what the trainer holds (optimizer moments, the heads it was given); the agents' and critics' models stay with the caller. */
  dispose(): void;
}

/** The run config's model paths a trainer's {@link TrainerSpec.criticModels} may fall back to. */
export interface CriticModelDefaults {
  /** Each agent's model directory. */
  readonly agents: readonly string[];
  /** `model.critic_model`. */
  readonly criticModel?: string;
  /** `model.critics`. */
  readonly critics?: readonly string[];
}

/**
 * A trainer to register: its config side (name, label, section, aliases, schema, whether it has
 * critics) and how to run it. Functions left out have the defaults named on them.
 */
export interface TrainerSpec<C extends TrainerSectionFields> extends TrainerSectionSpec {
  readonly schema: z.ZodType<C>;
  /** Critic LMs it needs with `numAgents` agents (default 0). */
  criticCount?(config: C, numAgents: number): number;
  /** See {@link TrainerSectionSpec.criticModelsOff}: called with the section its schema parsed. */
  criticModelsOff?(config: C): { readonly field: string; readonly means: string } | undefined;
  /** Agent models it trains on a task whose env has `envAgents` agents (default: the config's `num_agents`, else `envAgents`). */
  agentCount?(config: C, envAgents: number): number;
  /** The task as its agents play it in `comlrl eval` (default: as it is; CentralizedMAGRPO: one joint agent through the task's adapter). */
  playTask?(config: C, task: PlayedTask): PlayedTask;
  /** What its critic LMs are, for messages (e.g. 'one per agent'). */
  readonly criticsHint?: string;
  /**
   * Critic LM directories its own section names (MARLHF's `reward_model_name`, `critic_model_name`),
   * used before `model.critics` / `model.critic_model`; null or absent: none. `models` are the
   * run config's (to fill what the section leaves to them).
   */
  criticModels?(config: C, models: CriticModelDefaults): readonly string[] | null;
  /** Where its models are in a directory its `save` wrote (default: the agents only, `dir/agent_i/`). */
  layout?(config: C, dir: string, numAgents: number): ModelLayout;
  /** The early-termination threshold its evaluation episodes use, which `comlrl eval` follows (default null: every turn is played). */
  evalEarlyTermination?(config: C): number | null;
  build(inputs: TrainerBuildInputs<C>): RunnableTrainer;
}

/**
 * A registered trainer as the CLI uses it: the spec's functions over a run config's parsed section
 * (see the module comment), with the defaults filled in.
 */
export interface RegisteredTrainer {
  readonly name: string;
  readonly label: string;
  /** Its section in a run config (the canonical one, not an alias). */
  readonly section: string;
  readonly criticsHint: string | undefined;
  criticCount(config: TrainerSectionFields, numAgents: number): number;
  /** See {@link TrainerSpec.criticModels} (default null). */
  criticModels(config: TrainerSectionFields, models: CriticModelDefaults): readonly string[] | null;
  agentCount(config: TrainerSectionFields, envAgents: number): number;
  playTask(config: TrainerSectionFields, task: PlayedTask): PlayedTask;
  layout(config: TrainerSectionFields, dir: string, numAgents: number): ModelLayout;
  evalEarlyTermination(config: TrainerSectionFields): number | null;
  build(inputs: TrainerBuildInputs<TrainerSectionFields>): RunnableTrainer;
}

const trainers = new Map<string, { readonly spec: TrainerSectionSpec; readonly entry: RegisteredTrainer }>();

/**
 * Registers a trainer: a run config with its section selects it in `comlrl train` and `comlrl eval`.
 * Registering the same spec again is a no-op.
 * @throws Error when its name or a section is taken by another trainer, or malformed.
 */
export function registerTrainer<C extends TrainerSectionFields>(spec: TrainerSpec<C>): void {
  if (trainers.get(spec.name)?.spec === spec) return;
  registerTrainerSection(spec);
  // The run config parsed the section with this schema; anything else (a config built by hand) is parsed here.
  const typed = (config: TrainerSectionFields): C => (wasParsedBy(spec.schema, config) ? config : parseConfig(spec.label, spec.schema, config, []));
  const entry: RegisteredTrainer = {
    name: spec.name,
    label: spec.label,
    section: spec.section,
    criticsHint: spec.criticsHint,
    criticCount: (config, n) => spec.criticCount?.(typed(config), n) ?? 0,
    criticModels: (config, models) => spec.criticModels?.(typed(config), models) ?? null,
    agentCount: (config, envAgents) => spec.agentCount?.(typed(config), envAgents) ?? config.num_agents ?? envAgents,
    playTask: (config, task) => spec.playTask?.(typed(config), task) ?? task,
    layout: (config, dir, n) => spec.layout?.(typed(config), dir, n) ?? { agents: agentDirs(dir, n), critics: [], heads: [] },
    evalEarlyTermination: (config) => spec.evalEarlyTermination?.(typed(config)) ?? null,
    build: (inputs) => spec.build({ ...inputs, config: typed(inputs.config) }),
  };
  trainers.set(spec.name, { spec, entry });
}

/** The registered trainer of a name, or undefined. */
export function findTrainer(name: string): RegisteredTrainer | undefined {
  return trainers.get(name)?.entry;
}

/**
 * The registered trainer of a name.
 * @throws Error listing the registered trainers.
 */
export function getTrainer(name: string): RegisteredTrainer {
  const t = findTrainer(name);
  if (t === undefined) throw new Error(`unknown trainer '${name}' (registered: ${trainerNames().join(', ') || "none; import 'comlrl/trainers'"})`);
  return t;
}

/** Names of the registered trainers, in registration order. */
export function trainerNames(): string[] {
  return [...trainers.keys()];
}
