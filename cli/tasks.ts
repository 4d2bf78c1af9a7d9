/**
 * Task wiring for the CLI: from a run config's `dataset`, `external`, `reward_processor` and `task`
 * sections to an environment, the train and eval items, eval callbacks, and each task's paper
 * metric (TLDR score, CoopHE pass rate and pass@k, HouseBuild IoU and HP).
 */
import { HouseBuildEnv } from '../envs/housebuild/index.js';
import { TLDREnv } from '../envs/tldr/index.js';
import { ToyCoordEnv, toyTasks, toyTrainTasks } from '../envs/toy/index.js';
import type { RpgConfig } from '../rewards/housebuild/rpg.js';
import type { HouseBuildRewardBreakdown } from '../rewards/housebuild/reward.js';
import { tldrAggregateMetrics, tldrLoggerMetrics } from '../rewards/tldr/logger.js';
import type { TaskName } from '../src/config/schema.js';
import type { TypedRunConfig as RunConfig } from './schemas.js';
import { loadHouseBuildTasks, loadTLDRRows, paperSplits } from '../src/data/tasks.js';
import { parseSplitSpec, sliceWithIndex } from '../src/data/split.js';
import type { LLMDecPOMDP } from '../src/decpomdp/types.js';
import { meanPassAtK } from '../src/eval/passk.js';
import type { EvalCallback, EvalEpisode } from '../trainers/common/eval.js';
import { setupCoopHE } from './coophe.js';

/** An episode of any task (the CLI is generic over item and state types). */
export type AnyEpisode = EvalEpisode<unknown, unknown>;

/** Everything a run needs from its task. */
export interface TaskSetup {
  readonly task: TaskName;
  readonly env: LLMDecPOMDP<unknown, unknown>;
  readonly trainTasks: readonly unknown[];
  readonly evalTasks: readonly unknown[];
  /** Task metrics the trainers log at every evaluation (`eval/<key>`). */
  readonly evalCallbacks: readonly EvalCallback<unknown, unknown>[];
  /** The paper metrics: `samples[j]` holds the episodes sampled for eval item j (n each). */
  paperMetrics(samples: readonly (readonly AnyEpisode[])[], ks: readonly number[]): Record<string, number>;
  /** Frees task resources (sandboxes). */
  close(): Promise<void>;
}

/** Sum of an episode's rewards (the demo and summaries report its mean). */
export function episodeReward(ep: AnyEpisode): number {
  return ep.rewards.reduce((a, b) => a + b, 0);
}

function mean(xs: readonly number[]): number {
  return xs.length === 0 ? Number.NaN : xs.reduce((a, b) => a + b, 0) / xs.length;
}

/** The info of an episode's last played turn. */
function lastInfo(ep: AnyEpisode): Record<string, unknown> {
  return ep.infos[ep.infos.length - 1] ?? {};
}

/** The raw (unprocessed) reward of the last turn, from the env's info. */
function lastRawReward(ep: AnyEpisode): number {
  const raw = lastInfo(ep).rawReward;
  return typeof raw === 'number' ? raw : (ep.rewards[ep.rewards.length - 1] ?? Number.NaN);
}

/** Processor of the config: r·scale + shift when enabled, else identity. */
export function rewardScaleShift(config: RunConfig): { scale: number; shift: number } {
  const rp = config.rewardProcessor;
  return rp.enabled ? { scale: rp.scale, shift: rp.shift } : { scale: 1, shift: 0 };
}

/** Applies an HF-style slice spec (empty split name, e.g. `[:8]`) to an in-memory list. */
function sliceList<T>(items: readonly T[], spec: string | undefined, key: string): T[] {
  if (spec === undefined) return [...items];
  let slices;
  try {
    slices = parseSplitSpec(spec);
  } catch (err) {
    throw new Error(`${key}: ${(err as Error).message}`);
  }
  return slices.flatMap((s) => sliceWithIndex(items, s).map(([, row]) => row));
}

function numTurnsOf(config: RunConfig): number {
  return config.trainerConfig.num_turns;
}

function requirePath(config: RunConfig, task: string): string {
  if (config.dataset.path === undefined) {
    throw new Error(`dataset.path is required for task '${task}': point it at a local JSON, JSONL or Parquet file (or a hub-layout directory)`);
  }
  return config.dataset.path;
}

/**
 * The split spec a run uses for its train or eval items (the config's, else the task's default) and
 * where the rows come from, for messages such as "dataset.train_split '[:0]' selects no rows from X".
 */
export function splitOf(config: RunConfig, which: 'train' | 'eval'): { key: string; spec: string; from: string } {
  const key = `dataset.${which}_split`;
  const given = which === 'train' ? config.dataset.train_split : config.dataset.eval_split;
  const file = which === 'train' ? config.dataset.path : (config.dataset.eval_path ?? config.dataset.path);
  const task = config.dataset.task;
  let fallback: string;
  switch (task) {
    case 'tldr':
      fallback = (config.trainer === 'collm-dc' ? paperSplits.tldr.iac : paperSplits.tldr.magrpo)[which];
      break;
    case 'coophe':
      fallback = paperSplits.coophe[which];
      break;
    case 'housebuild':
      fallback = paperSplits.housebuild[which];
      break;
    default:
      fallback = '(all rows)';
  }
  const from = task === 'toy-coord' ? `the built-in ${which} items of task toy-coord` : (file ?? `the shipped ${task} data`);
  return { key, spec: given ?? fallback, from };
}

/**
 * A warning when eval items are also training items (same content: the same rows selected twice,
 * or the same data under two paths), or undefined. The toy task's eval cues repeat its training
 * cues by design and are not checked.
 */
export function splitOverlapWarning(config: RunConfig, task: TaskSetup): string | undefined {
  if (task.task === 'toy-coord' || task.evalTasks.length === 0) return undefined;
  const train = new Set(task.trainTasks.map((t) => JSON.stringify(t)));
  const shared = task.evalTasks.filter((t) => train.has(JSON.stringify(t))).length;
  if (shared === 0) return undefined;
  const tr = splitOf(config, 'train');
  const ev = splitOf(config, 'eval');
  return `warning: ${shared} of the ${task.evalTasks.length} eval items (${ev.key} '${ev.spec}' of ${ev.from}) are also training items (${tr.key} '${tr.spec}' of ${tr.from}); the evaluation measures rows the agents train on`;
}

/** Builds the task of a run config. */
export async function setupTask(config: RunConfig): Promise<TaskSetup> {
  switch (config.dataset.task) {
    case 'toy-coord':
      return setupToy(config);
    case 'tldr':
      return setupTLDR(config);
    case 'housebuild':
      return setupHouseBuild(config);
    case 'coophe':
      return setupCoopHE(config);
  }
}

function setupToy(config: RunConfig): TaskSetup {
  const { scale, shift } = rewardScaleShift(config);
  const env = new ToyCoordEnv({
    numTurns: numTurnsOf(config),
    ...(scale !== 1 || shift !== 0 ? { rewardProcessor: (r: number) => r * scale + shift } : {}),
  });
  return {
    task: 'toy-coord',
    env: env as LLMDecPOMDP<unknown, unknown>,
    trainTasks: sliceList(toyTrainTasks, config.dataset.train_split, 'dataset.train_split'),
    // Four episodes per cue keep a sampled evaluation's noise small.
    evalTasks: sliceList(toyTasks(16, 'toy-eval'), config.dataset.eval_split, 'dataset.eval_split'),
    evalCallbacks: [],
    paperMetrics: (samples) => {
      const eps = samples.flat();
      return {
        'toy/reward_mean': mean(eps.map(episodeReward)),
        // An episode succeeds when its last turn scores 1: both agents said the same answer.
        'toy/success_rate': mean(eps.map((e) => (lastRawReward(e) >= 1 ? 1 : 0))),
      };
    },
    close: async () => {},
  };
}

async function setupTLDR(config: RunConfig): Promise<TaskSetup> {
  const path = requirePath(config, 'tldr');
  const splits = config.trainer === 'collm-dc' ? paperSplits.tldr.iac : paperSplits.tldr.magrpo;
  const trainTasks = await loadTLDRRows(path, config.dataset.train_split ?? splits.train);
  const evalTasks = await loadTLDRRows(config.dataset.eval_path ?? path, config.dataset.eval_split ?? splits.eval);
  const { scale, shift } = rewardScaleShift(config);
  const env = new TLDREnv({ rewardScale: scale, rewardShift: shift });
  const score = (eps: readonly AnyEpisode[]): Record<string, number> => {
    // The TLDR score is the raw four-level reward of the pair (range [0, 2.98]); the logger's
    // ungated/gated level means come with it, as the Writing repo's eval logger reports them.
    const completions = eps.map((e) => e.completions[e.completions.length - 1]);
    const logger = tldrAggregateMetrics(completions.map(([c1, c2]) => tldrLoggerMetrics(c1 ?? '', c2 ?? '')));
    const out: Record<string, number> = { 'tldr/score': mean(eps.map(lastRawReward)) };
    for (const [k, v] of Object.entries(logger)) if (Number.isFinite(v)) out[`tldr/${k}`] = v;
    return out;
  };
  return {
    task: 'tldr',
    env: env as unknown as LLMDecPOMDP<unknown, unknown>,
    trainTasks,
    evalTasks,
    evalCallbacks: [(eps) => ({ 'tldr/score': mean(eps.map(lastRawReward)) })],
    paperMetrics: (samples) => score(samples.flat()),
    close: async () => {},
  };
}

function rpgConfigOf(config: RunConfig): RpgConfig | undefined {
  const t = config.task;
  if (t.player === undefined && t.spider === undefined) return undefined;
  return {
    playerHp: t.player?.hp ?? 5,
    spiderNum: t.spider?.num ?? 3,
    atkLow: t.spider?.atk_low ?? 1,
    atkHigh: t.spider?.atk_high ?? 3,
  };
}

async function setupHouseBuild(config: RunConfig): Promise<TaskSetup> {
  const splits = paperSplits.housebuild;
  const trainTasks = await loadHouseBuildTasks(config.dataset.path, config.dataset.train_split ?? splits.train);
  const evalTasks = await loadHouseBuildTasks(config.dataset.eval_path ?? config.dataset.path, config.dataset.eval_split ?? splits.eval);
  const { scale, shift } = rewardScaleShift(config);
  const t = config.task;
  const rpgConfig = rpgConfigOf(config);
  const env = new HouseBuildEnv({
    numTurns: numTurnsOf(config),
    seed: t.rpg_seed ?? config.seed,
    ...(rpgConfig ? { rpgConfig } : {}),
    ...(t.block_agent1 ? { blockAgent1: t.block_agent1 } : {}),
    ...(t.block_agent2 ? { blockAgent2: t.block_agent2 } : {}),
    ...(t.max_commands !== undefined ? { maxCommands: t.max_commands } : {}),
    ...(t.limited_resource !== undefined ? { limitedResource: t.limited_resource } : {}),
    ...(config.external.mode ? { feedbackMode: config.external.mode as never } : {}),
    ...(config.external.original_prompt !== undefined ? { originalPrompt: config.external.original_prompt } : {}),
    ...(config.external.previous_response !== undefined ? { previousResponse: config.external.previous_response } : {}),
    ...(config.external.lim !== undefined ? { limit: config.external.lim } : {}),
    rewardScale: scale,
    rewardShift: shift,
  });
  const hp0 = env.rpgState?.playerHp ?? 0;
  const dmg = env.rpgState?.spiderTotalDmg ?? 0;
  const metrics = (eps: readonly AnyEpisode[]): Record<string, number> => {
    const final = eps.map((e) => lastInfo(e).breakdown as HouseBuildRewardBreakdown | undefined);
    const ok = final.filter((b): b is HouseBuildRewardBreakdown => b !== undefined);
    // HP after the spiders attack: intact when either agent issued /kill, else hp − total damage.
    const hp = ok.map((b) => (b.has_kill || dmg <= 0 ? hp0 : Math.max(0, hp0 - dmg)));
    return {
      'housebuild/iou': mean(ok.map((b) => b.metrics.iou)),
      'housebuild/score_match': mean(ok.map((b) => b.metrics.score_match)),
      'housebuild/hp': mean(hp),
      'housebuild/hp_frac': hp0 > 0 ? mean(hp) / hp0 : Number.NaN,
      'housebuild/kill_rate': mean(ok.map((b) => (b.has_kill ? 1 : 0))),
      'housebuild/raw_reward': mean(eps.map(lastRawReward)),
    };
  };
  return {
    task: 'housebuild',
    env: env as unknown as LLMDecPOMDP<unknown, unknown>,
    trainTasks,
    evalTasks,
    evalCallbacks: [(eps) => metrics(eps)],
    paperMetrics: (samples) => metrics(samples.flat()),
    close: async () => {},
  };
}

/**
 * pass@k for every k ≤ n, from per-item counts of passing samples (`passed[j][s]` is whether sample s
 * of eval item j passed).
 */
export function passAtKMetrics(passed: readonly (readonly boolean[])[], ks: readonly number[], prefix: string): Record<string, number> {
  const out: Record<string, number> = {};
  if (passed.length === 0) return out;
  const counts = passed.map((p) => ({ n: p.length, c: p.filter(Boolean).length }));
  const n = Math.min(...counts.map((c) => c.n));
  for (const k of ks) if (k <= n) out[`${prefix}/pass@${k}`] = meanPassAtK(counts, k);
  return out;
}
