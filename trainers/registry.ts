/**
 * The trainer registry: every trainer a run config may select, with what the CLI and `comlrl eval`
 * need to run it — its config section and schema, its model roles (agents, critics, reward model,
 * references: how many, from which folders, where a saved run keeps them), how it is built from
 * loaded models and how its evaluation episodes end. Each built-in trainer's folder exports its
 * spec (e.g. ./magrpo/spec.ts) and ./builtin.ts registers them, one line each, as
 * `comlrl/trainers` or the CLI loads; `registerTrainer` adds one from user code, and a run config
 * then selects it by its section (docs/trainers/adding-a-trainer.md).
 *
 * A trainer's section is parsed once, by its schema, when the run config is read; the registry
 * hands that parsed config to the trainer's functions typed by the schema.
 */
import type { z } from 'zod';
import { valueModelsHint, type CriticModelsOff, type TrainerRoles } from '../src/config/roles.js';
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
  /** Its value models: the reward model (if its roles have one), then its critic LMs, from the config's model paths or a checkpoint's layout. */
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

/** The constructor inputs every trainer takes, from the registry's build inputs (what a spec's `build` hands on). */
export function trainerInputsOf<C>(inputs: TrainerBuildInputs<C>) {
  const { agents, env, trainTasks, evalTasks, evalCallbacks, logger } = inputs;
  return { agents, env, trainTasks, evalTasks, evalCallbacks, logger };
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

/** The run config's model paths a trainer's {@link TrainerModelRoles.models} may fall back to. */
export interface CriticModelDefaults {
  /** Each agent's model directory. */
  readonly agents: readonly string[];
  /** `model.critic_model`. */
  readonly criticModel?: string;
  /** `model.critics`. */
  readonly critics?: readonly string[];
}

/**
 * A trainer's model roles as the registry uses them: the declaration config parsing reads (see
 * src/config/roles.ts) plus where its value models' folders come from and where a saved run keeps
 * every role.
 */
export interface TrainerModelRoles<C> extends TrainerRoles<C> {
  /**
   * The value models' folders (reward model first, then critics) when its section decides them
   * (MARLHF's `reward_model_name`, `critic_model_name`, with `models` filling what it leaves);
   * null or absent: the CLI's default — `model.critics`, else `model.critic_model`, else each
   * critic's agent's model.
   */
  models?(config: C, models: CriticModelDefaults): readonly string[] | null;
  /** Where every role is in a directory its `save` wrote (default: the agents only, `dir/agent_i/`). */
  layout?(config: C, dir: string, numAgents: number): ModelLayout;
}

/**
 * A trainer to register: its config side (name, label, section, aliases, schema), its model roles
 * and how to run it. Functions left out have the defaults named on them.
 */
export interface TrainerSpec<C extends TrainerSectionFields> extends Omit<TrainerSectionSpec, 'roles' | 'criticModelsOff'> {
  readonly schema: z.ZodType<C>;
  /** Its model roles (required of new specs; the deprecated fields below are read only without it). */
  readonly roles?: TrainerModelRoles<C>;
  /** The task as its agents play it in `comlrl eval` (default: as it is; CentralizedMAGRPO: one joint agent through the task's adapter). */
  playTask?(config: C, task: PlayedTask): PlayedTask;
  /** The early-termination threshold its evaluation episodes use, which `comlrl eval` follows (default null: every turn is played). */
  evalEarlyTermination?(config: C): number | null;
  build(inputs: TrainerBuildInputs<C>): RunnableTrainer;
  /** @deprecated Declare `roles.critics.count` (and `roles.rewardModel`) instead. */
  criticCount?(config: C, numAgents: number): number;
  /** @deprecated Declare `roles.critics.off` instead. */
  criticModelsOff?(config: C): CriticModelsOff | undefined;
  /** @deprecated Declare `roles.agents.count` instead. */
  agentCount?(config: C, envAgents: number): number;
  /** @deprecated Declare `roles.critics.hint` instead. */
  readonly criticsHint?: string;
  /** @deprecated Declare `roles.models` instead. */
  criticModels?(config: C, models: CriticModelDefaults): readonly string[] | null;
  /** @deprecated Declare `roles.layout` instead. */
  layout?(config: C, dir: string, numAgents: number): ModelLayout;
}

/** The roles a spec written with the deprecated fields declares: its critic count covers all its value models. */
function rolesFromDeprecatedFields<C extends TrainerSectionFields>(spec: TrainerSpec<C>): TrainerModelRoles<C> {
  const { criticCount, criticModelsOff, agentCount, criticModels, layout } = spec;
  return {
    reference: spec.usesReference === true ? 'always' : 'kl',
    ...(agentCount ? { agents: { count: (c: C, n: number) => agentCount.call(spec, c, n) } } : {}),
    ...(spec.usesCritics === true
      ? {
          critics: {
            count: (c: C, n: number) => criticCount?.call(spec, c, n) ?? 0,
            hint: spec.criticsHint ?? '',
            ...(criticModelsOff ? { off: (c: C) => criticModelsOff.call(spec, c) } : {}),
          },
        }
      : {}),
    ...(criticModels ? { models: (c: C, m: CriticModelDefaults) => criticModels.call(spec, c, m) } : {}),
    ...(layout ? { layout: (c: C, dir: string, n: number) => layout.call(spec, c, dir, n) } : {}),
  };
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
  /** Its model roles over any parsed section (see {@link TrainerModelRoles}). */
  readonly roles: TrainerRoles<TrainerSectionFields>;
  /** What its value models are, for messages (its roles' hints: e.g. 'one per agent'). */
  readonly criticsHint: string | undefined;
  /** Value models (reward model, then critic LMs) it loads with `numAgents` agents: from its roles. */
  criticCount(config: TrainerSectionFields, numAgents: number): number;
  /** The value models' folders its section decides (its roles' `models`, default null). */
  criticModels(config: TrainerSectionFields, models: CriticModelDefaults): readonly string[] | null;
  /** Agent models it trains (its roles' `agents.count`, default `num_agents`, else the env's). */
  agentCount(config: TrainerSectionFields, envAgents: number): number;
  playTask(config: TrainerSectionFields, task: PlayedTask): PlayedTask;
  /** Where its roles are in a saved run (its roles' `layout`, default the agents only). */
  layout(config: TrainerSectionFields, dir: string, numAgents: number): ModelLayout;
  evalEarlyTermination(config: TrainerSectionFields): number | null;
  build(inputs: TrainerBuildInputs<TrainerSectionFields>): RunnableTrainer;
}

const trainers = new Map<string, { readonly spec: object; readonly entry: RegisteredTrainer }>();

/**
 * Registers a trainer: a run config with its section selects it in `comlrl train` and `comlrl eval`.
 * Registering the same spec again is a no-op.
 * @throws Error when its name or a section is taken by another trainer, or malformed.
 */
export function registerTrainer<C extends TrainerSectionFields>(spec: TrainerSpec<C>): void {
  if (trainers.get(spec.name)?.spec === spec) return;
  const roles = spec.roles ?? rolesFromDeprecatedFields(spec);
  // The run config parsed the section with this schema; anything else (a config built by hand) is parsed here.
  const typed = (config: TrainerSectionFields): C => (wasParsedBy(spec.schema, config) ? config : parseConfig(spec.label, spec.schema, config, []));
  const { agents, rewardModel, critics } = roles;
  const sectionRoles: TrainerRoles<TrainerSectionFields> = {
    reference: roles.reference,
    ...(agents
      ? { agents: { ...(agents.count ? { count: (config: TrainerSectionFields, n: number) => agents.count!(typed(config), n) } : {}), ...(agents.hint !== undefined ? { hint: agents.hint } : {}) } }
      : {}),
    ...(rewardModel ? { rewardModel } : {}),
    ...(critics
      ? {
          critics: {
            count: (config, n) => critics.count(typed(config), n),
            hint: critics.hint,
            ...(critics.modelField !== undefined ? { modelField: critics.modelField } : {}),
            ...(critics.placedByCriticDevices !== undefined ? { placedByCriticDevices: critics.placedByCriticDevices } : {}),
            ...(critics.off ? { off: (config: TrainerSectionFields) => critics.off!(typed(config)) } : {}),
          },
        }
      : {}),
  };
  const { criticCount: _c, criticModelsOff: _o, agentCount: _a, criticsHint: _h, criticModels: _m, layout: _l, ...sectionSpec } = spec;
  registerTrainerSection({ ...sectionSpec, roles: sectionRoles });
  const entry: RegisteredTrainer = {
    name: spec.name,
    label: spec.label,
    section: spec.section,
    roles: sectionRoles,
    criticsHint: valueModelsHint(roles) || undefined,
    criticCount: (config, n) => (rewardModel ? 1 : 0) + (sectionRoles.critics?.count(config, n) ?? 0),
    criticModels: (config, models) => roles.models?.(typed(config), models) ?? null,
    agentCount: (config, envAgents) => sectionRoles.agents?.count?.(config, envAgents) ?? config.num_agents ?? envAgents,
    playTask: (config, task) => spec.playTask?.(typed(config), task) ?? task,
    layout: (config, dir, n) => roles.layout?.(typed(config), dir, n) ?? { agents: agentDirs(dir, n), critics: [], heads: [] },
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
