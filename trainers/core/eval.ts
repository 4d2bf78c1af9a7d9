/**
 * Evaluation skeleton shared by the trainers: every eval task is played along one path (one
 * completion per agent per turn), batching the prompts of `batchSize` tasks into one generate call
 * per agent. Per-turn rewards and discounted returns are summarised by turn.
 */
import { discountedReturns } from '../../src/buffer/targets.js';
import type { Agent } from '../../src/decpomdp/agent.js';
import type { LLMDecPOMDP } from '../../src/decpomdp/types.js';
import type { Rng } from '../../src/util/rng.js';
import { meanOrZero as mean } from '../../src/util/stats.js';
import { encodePrompt, generateRoundOf, type CompletionGroup, type GenerationSettings, type JointPasses } from './generation.js';
import { evalKey, turnKey, type MetricRecord } from './metrics.js';

/** One eval task played to the end (or to early termination). */
export interface EvalEpisode<T, S> {
  readonly task: T;
  /** The state each turn started from. */
  readonly states: S[];
  /** observations[turn][agent]: the prompt text. */
  readonly observations: string[][];
  /** completions[turn][agent]: the decoded completion. */
  readonly completions: string[][];
  /** completionIds[turn][agent]. */
  readonly completionIds: number[][][];
  /** The joint reward of each turn played. */
  readonly rewards: number[];
  /** Discounted return from each turn: G_t = r_t + γ·G_{t+1}. */
  readonly returns: number[];
  /** The env's `info` of each step. */
  readonly infos: Record<string, unknown>[];
}

/** Options of {@link runEvalEpisodes}. */
export interface EvalRunOptions<T, S> {
  agents: readonly Agent[];
  env: LLMDecPOMDP<T, S>;
  tasks: readonly T[];
  /** Turns to play at most (the env's `done` can end earlier). */
  numTurns: number;
  /** Tasks generated together. */
  batchSize: number;
  settings: GenerationSettings;
  rng: Rng;
  /** Joint passes over the agents (LoRA agents on one base) and their eligibility; absent: each agent generates alone from `rng`. */
  joint?: JointPasses;
  discount: number;
  /**
   * Stop an episode after a turn whose reward is greater than this (null: never). CoMLRL's MAGRPO
   * eval does not terminate early; pass null for it.
   */
  earlyTerminationThreshold?: number | null;
}

/** Discounted returns of a reward sequence: G_t = r_t + γ·G_{t+1}, G_{T} = 0 (the actor-critic targets' function). */
export { discountedReturns };

/** Plays every task once; returns one episode per task, in order. */
export async function runEvalEpisodes<T, S>(opts: EvalRunOptions<T, S>): Promise<EvalEpisode<T, S>[]> {
  const { agents, env, tasks } = opts;
  const batchSize = Math.max(1, opts.batchSize);
  const episodes: EvalEpisode<T, S>[] = [];
  for (let b = 0; b < tasks.length; b += batchSize) {
    const batch = tasks.slice(b, b + batchSize);
    const eps = batch.map((task) => ({
      task,
      states: [] as S[],
      observations: [] as string[][],
      completions: [] as string[][],
      completionIds: [] as number[][][],
      rewards: [] as number[],
      returns: [] as number[],
      infos: [] as Record<string, unknown>[],
    }));
    let states: (S | null)[] = batch.map((task) => env.initialState(task));
    for (let turn = 0; turn < opts.numTurns; turn++) {
      const live = states.map((s, i) => (s === null ? -1 : i)).filter((i) => i >= 0);
      if (live.length === 0) break;
      const obs = live.map((i) => agents.map((_, a) => env.observe(states[i] as S, a)));
      // One generate call per agent over all live episodes of the batch (LoRA agents on one base: one joint call).
      const prompts = agents.map((agent, a) => obs.map((o, j) => encodePrompt(agent, o[a], env.rendering?.(states[live[j]] as S, a))));
      const perAgent: CompletionGroup[][] = await generateRoundOf(agents, prompts, 1, opts.settings, opts.rng, opts.joint ?? { eligible: false, passes: null });
      const next: (S | null)[] = states.map(() => null);
      for (let j = 0; j < live.length; j++) {
        const i = live[j];
        const state = states[i] as S;
        const texts = agents.map((_, a) => perAgent[a][j].texts[0]);
        const result = await env.step(state, texts);
        const ep = eps[i];
        ep.states.push(state);
        ep.observations.push(obs[j]);
        ep.completions.push(texts);
        ep.completionIds.push(agents.map((_, a) => perAgent[a][j].ids[0]));
        ep.rewards.push(result.reward);
        ep.infos.push(result.info);
        const stop =
          result.done ||
          (opts.earlyTerminationThreshold !== null &&
            opts.earlyTerminationThreshold !== undefined &&
            result.reward > opts.earlyTerminationThreshold);
        next[i] = stop ? null : result.next;
      }
      states = next;
    }
    for (const ep of eps) {
      ep.returns.push(...discountedReturns(ep.rewards, opts.discount));
      episodes.push(ep);
    }
  }
  return episodes;
}

/** Per-turn means over the episodes that reached each turn. */
export interface EvalTurnSummary {
  /** 0-based turn. */
  turn: number;
  episodes: number;
  rewardMean: number;
  returnMean: number;
}

/** Per-turn reward and return means of a set of episodes. */
export function summarizeEval<T, S>(episodes: readonly EvalEpisode<T, S>[]): EvalTurnSummary[] {
  const maxTurns = Math.max(0, ...episodes.map((e) => e.rewards.length));
  const out: EvalTurnSummary[] = [];
  for (let t = 0; t < maxTurns; t++) {
    const reached = episodes.filter((e) => e.rewards.length > t);
    out.push({
      turn: t,
      episodes: reached.length,
      rewardMean: mean(reached.map((e) => e.rewards[t])),
      returnMean: mean(reached.map((e) => e.returns[t])),
    });
  }
  return out;
}

/**
 * A user metric over the eval episodes (CoMLRL's eval_logger + eval_aggregator in one); each key
 * is logged as `eval/<key>`.
 */
export type EvalCallback<T, S> = (
  episodes: readonly EvalEpisode<T, S>[],
) => Record<string, number> | Promise<Record<string, number>>;

/**
 * Runs the callbacks and merges their metrics under `eval/`. A value that is not a number, or a
 * key two callbacks return, is an error naming the key. NaN/Infinity pass through (a mean over no
 * episodes is NaN) and the JSONL logger writes them as null.
 */
export async function runEvalCallbacks<T, S>(
  callbacks: readonly EvalCallback<T, S>[],
  episodes: readonly EvalEpisode<T, S>[],
): Promise<MetricRecord> {
  const out: MetricRecord = {};
  for (const cb of callbacks) {
    const metrics = await cb(episodes);
    for (const [k, v] of Object.entries(metrics)) {
      if (typeof v !== 'number') throw new Error(`eval callback metric '${k}' must be a number, got ${typeof v}`);
      const key = evalKey(k);
      if (key in out) throw new Error(`eval callbacks both return '${k}'`);
      out[key] = v;
    }
  }
  return out;
}

/** CoMLRL's MAGRPO eval names: `eval/turn_k/mean_reward`, `eval/turn_k/mean_return`. */
export function evalTurnMetrics(summary: readonly EvalTurnSummary[]): MetricRecord {
  const out: MetricRecord = {};
  for (const s of summary) {
    out[evalKey(turnKey(s.turn, 'mean_reward'))] = s.rewardMean;
    out[evalKey(turnKey(s.turn, 'mean_return'))] = s.returnMean;
  }
  return out;
}
