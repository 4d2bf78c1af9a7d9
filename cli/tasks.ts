/**
 * The run's task, from the task registry: a run config's `dataset`, `external`, `reward_processor`
 * and `task` sections handed to the task's spec (`envs/<task>/spec.ts`), which builds the
 * environment, the train and eval items and the task's metrics. Nothing here names a task.
 */
import '../envs/tasks.js';
import { getTask } from '../src/tasks/registry.js';
import type { AnyTaskSpec, PlayedEpisode } from '../src/tasks/spec.js';
import type { CentralizedAdapter } from '../src/decpomdp/centralized.js';
import type { LLMDecPOMDP } from '../src/decpomdp/types.js';
import type { EvalCallback, EvalEpisode } from '../trainers/core/eval.js';
import type { RunConfig } from './schemas.js';

export { episodeReward, passAtKMetrics } from '../src/tasks/metrics.js';

/** An episode of any task (the CLI is generic over item and state types). */
export type AnyEpisode = EvalEpisode<unknown, unknown>;

/** Everything a run needs from its task. */
export interface TaskSetup {
  /** The task's name (`dataset.task`). */
  readonly task: string;
  /** The task's spec (registry entry). */
  readonly spec: AnyTaskSpec;
  readonly env: LLMDecPOMDP<unknown, unknown>;
  readonly trainTasks: readonly unknown[];
  readonly evalTasks: readonly unknown[];
  /** Task metrics the trainers log at every evaluation (`eval/<key>`). */
  readonly evalCallbacks: readonly EvalCallback<unknown, unknown>[];
  /** The paper metrics: `samples[j]` holds the episodes sampled for eval item j (n each). */
  paperMetrics(samples: readonly (readonly PlayedEpisode[])[], ks: readonly number[]): Record<string, number>;
  /** Frees task resources (sandboxes). */
  close(): Promise<void>;
  /** The task's centralized adapter (CentralizedMAGRPO), when it has one. */
  readonly centralized?: CentralizedAdapter<unknown>;
  /** The expected reward of each turn under uniform random play, where the task states it (the plots' random-play line). */
  readonly randomPlayReward?: readonly number[];
}

/** Processor of the config: r·scale + shift when enabled, else identity. */
export function rewardScaleShift(config: RunConfig): { scale: number; shift: number } {
  const rp = config.rewardProcessor;
  return rp.enabled ? { scale: rp.scale, shift: rp.shift } : { scale: 1, shift: 0 };
}

/**
 * The split spec a run uses for its train or eval items (the config's, else the task's default) and
 * where the rows come from, for messages such as "dataset.train_split '[:0]' selects no rows from X".
 */
export function splitOf(config: RunConfig, which: 'train' | 'eval'): { key: string; spec: string; from: string } {
  const key = `dataset.${which}_split`;
  const given = which === 'train' ? config.dataset.train_split : config.dataset.eval_split;
  const file = which === 'train' ? config.dataset.path : (config.dataset.eval_path ?? config.dataset.path);
  const spec = getTask(config.dataset.task);
  const fallback = spec.defaultSplits?.(config.trainer)?.[which] ?? '(all rows)';
  const from = spec.data === 'builtin' ? `the built-in ${which} items of task ${spec.name}` : (file ?? `the shipped ${spec.name} data`);
  return { key, spec: given ?? fallback, from };
}

/**
 * A warning when eval items are also training items (same content: the same rows selected twice,
 * or the same data under two paths), or undefined. Tasks whose eval items repeat training items by
 * design (the toy task's cues) are not checked.
 */
export function splitOverlapWarning(config: RunConfig, task: TaskSetup): string | undefined {
  if (task.spec.evalRepeatsTrain === true || task.evalTasks.length === 0) return undefined;
  const train = new Set(task.trainTasks.map((t) => JSON.stringify(t)));
  const shared = task.evalTasks.filter((t) => train.has(JSON.stringify(t))).length;
  if (shared === 0) return undefined;
  const tr = splitOf(config, 'train');
  const ev = splitOf(config, 'eval');
  return `warning: ${shared} of the ${task.evalTasks.length} eval items (${ev.key} '${ev.spec}' of ${ev.from}) are also training items (${tr.key} '${tr.spec}' of ${tr.from}); the evaluation measures rows the agents train on`;
}

/** Builds the task of a run config through its registered spec. */
export async function setupTask(config: RunConfig): Promise<TaskSetup> {
  const spec = getTask(config.dataset.task);
  const setup = await spec.setup({
    trainer: config.trainer,
    dataset: config.dataset,
    external: config.external,
    options: config.task,
    reward: rewardScaleShift(config),
    seed: config.seed,
    numTurns: config.trainerConfig.num_turns,
  });
  return { task: spec.name, spec, ...setup, paperMetrics: setup.paperMetrics, close: setup.close };
}
