/**
 * Types and small helpers the two actor-critic trainers (CoLLM-DC, CoLLM-CC) share: train/eval
 * result shapes, resume data, per-turn advantage normalization, epoch statistics.
 */
import type { JointTransition } from '../../src/buffer/replay.js';
import { normalizeAdvantages } from '../../src/buffer/targets.js';
import { isStaged } from '../../src/decpomdp/staged.js';
import type { LLMDecPOMDP } from '../../src/decpomdp/types.js';
import { mean } from './advantage.js';
import type { EvalEpisode } from './eval.js';
import { turnKey, type MetricRecord } from './metrics.js';

/** Options of the actor-critic trainers' `train()`. */
export interface ActorCriticTrainOptions {
  /** Stop after this many training items in this call (the cursor lets a later call continue). */
  maxItems?: number;
  /** Called after each training item (e.g. to checkpoint with exportState()). */
  onItemEnd?: (progress: { epoch: number; index: number; envStep: number }) => void | Promise<void>;
}

/** One evaluation's results. */
export interface ActorCriticEvalResult<T, S> {
  readonly envStep: number;
  /**
   * `eval/turn_k/{reward_mean, expected_return, value_pred_mean, value_target_mean}`, plus
   * `eval/return_mean` (mean G_0), `eval/final_reward_mean` (reward of each episode's last turn),
   * `eval/episode_reward_mean` (sum of an episode's rewards), callback metrics and timing.
   */
  readonly metrics: MetricRecord;
  readonly episodes: EvalEpisode<T, S>[];
}

/** Trainer-specific resume data of the actor-critic trainers. */
export interface ActorCriticStateExtra {
  /** Transitions waiting in the replay buffer. */
  readonly buffer: JointTransition[];
  /** Optimizer-step count of each actor (behaviour log-probs stay exact while unchanged). */
  readonly policyVersions: number[];
  /** Episodes rolled out so far. */
  readonly episodes: number;
  /** Per-turn sums for the epoch-end metrics. */
  readonly epochTurnStats: { turn: number; transitions: number; rewardSum: number; returnSum: number }[];
}

/**
 * Advantages of one agent's samples: z-score of δ within each turn group when `normalize` (groups
 * of one stay raw, as CoMLRL), else δ itself. Same order as `items`.
 */
export function turnGroupAdvantages(items: readonly { turn: number; delta: number }[], normalize: boolean): number[] {
  const out = new Array<number>(items.length);
  const byTurn = new Map<number, number[]>();
  items.forEach((it, j) => {
    const g = byTurn.get(it.turn);
    if (g) g.push(j);
    else byTurn.set(it.turn, [j]);
  });
  for (const idx of byTurn.values()) {
    const raw = idx.map((j) => items[j].delta);
    const adv = normalize ? normalizeAdvantages(raw) : raw;
    idx.forEach((j, q) => (out[j] = adv[q]));
  }
  return out;
}

/** Per-turn reward/return sums over an epoch, for `turn_k/epoch_reward_mean` and `turn_k/epoch_avg_return`. */
export class EpochTurnStats {
  private stats = new Map<number, { transitions: number; rewardSum: number; returnSum: number }>();

  /** Adds the transitions of one episode. */
  add(transitions: readonly JointTransition[]): void {
    for (const tr of transitions) {
      const s = this.stats.get(tr.turn) ?? { transitions: 0, rewardSum: 0, returnSum: 0 };
      s.transitions++;
      s.rewardSum += tr.reward;
      s.returnSum += tr.agents[0]?.return ?? 0;
      this.stats.set(tr.turn, s);
    }
  }

  /** The epoch-end record; clears the sums. */
  drain(): MetricRecord {
    const m: MetricRecord = {};
    for (const [turn, s] of [...this.stats.entries()].sort((x, y) => x[0] - y[0])) {
      m[turnKey(turn, 'epoch_reward_mean')] = s.rewardSum / s.transitions;
      m[turnKey(turn, 'epoch_avg_return')] = s.returnSum / s.transitions;
    }
    this.stats = new Map();
    return m;
  }

  /** JSON-able snapshot. */
  snapshot(): ActorCriticStateExtra['epochTurnStats'] {
    return [...this.stats.entries()].map(([turn, s]) => ({ turn, ...s }));
  }

  /** Restores a snapshot. */
  restore(snapshot: ActorCriticStateExtra['epochTurnStats']): void {
    this.stats = new Map(snapshot.map(({ turn, ...s }) => [turn, { ...s }]));
  }
}

/**
 * Episode-level eval means: `eval/return_mean` (G_0), `eval/episode_reward_mean` (Σ_t r_t) and
 * `eval/final_reward_mean` (the last turn's reward, what a sparse task pays).
 */
export function episodeSummary<T, S>(episodes: readonly EvalEpisode<T, S>[]): MetricRecord {
  if (episodes.length === 0) return {};
  return {
    'eval/return_mean': mean(episodes.map((e) => e.returns[0] ?? 0)),
    'eval/episode_reward_mean': mean(episodes.map((e) => e.rewards.reduce((a, b) => a + b, 0))),
    'eval/final_reward_mean': mean(episodes.map((e) => e.rewards[e.rewards.length - 1] ?? 0)),
  };
}

/** Values of a critic for some rows, predicting each distinct row once (V rows repeat over K). */
export async function predictDistinct(predict: (rows: number[][]) => Promise<number[]>, rows: readonly number[][]): Promise<number[]> {
  const keys = rows.map((r) => r.join(','));
  const firstOf = new Map<string, number>();
  keys.forEach((key, j) => {
    if (!firstOf.has(key)) firstOf.set(key, j);
  });
  const unique = [...firstOf.keys()];
  const preds = await predict(unique.map((key) => [...rows[firstOf.get(key) as number]]));
  const byKey = new Map(unique.map((key, q) => [key, preds[q]]));
  return keys.map((key) => byKey.get(key) as number);
}

/** One joint step as the actor-critic rollouts use it; `next` is null when the transition was skipped. */
export interface RolloutStep<S> {
  readonly reward: number;
  readonly next: S | null;
  readonly done: boolean;
  readonly info: Record<string, unknown>;
}

/**
 * Applies a joint action. With a staged environment the reward comes first, and the (possibly
 * costly: sandbox runs, expert feedback) transition is skipped when `continues(reward)` says the
 * episode ends here anyway; `next` is then null and `done` true. Throws on a non-finite reward.
 */
export async function rolloutStep<T, S>(
  env: LLMDecPOMDP<T, S>,
  state: S,
  actions: readonly string[],
  continues: (reward: number) => boolean,
  label: string,
  turn: number,
): Promise<RolloutStep<S>> {
  const check = (r: number) => {
    if (!Number.isFinite(r)) throw new Error(`${label}: env '${env.name}' returned a non-finite reward (${r}) at turn ${turn + 1}`);
  };
  if (isStaged(env)) {
    const jr = await env.rewardOf(state, actions);
    check(jr.reward);
    if (!continues(jr.reward)) return { reward: jr.reward, next: null, done: true, info: { ...(jr.info ?? {}) } };
    return env.transition(state, actions, jr);
  }
  const step = await env.step(state, actions);
  check(step.reward);
  return step;
}
