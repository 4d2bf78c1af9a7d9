/**
 * The bookkeeping both actor-critic trainers (CoLLM-DC, CoLLM-CC) hold, as one object they own
 * and call: the replay buffer, the actors' policy versions, episode and training-item counters,
 * the per-epoch turn sums and the latest update's record, their resume data; plus the functions
 * of step 2 (advantages from values and targets) and of evaluation. No trainer logic lives here:
 * the order of the paper's Algorithm 1 is in each trainer's file.
 */
import { ReplayBuffer, type JointTransition } from '../../src/buffer/replay.js';
import { normalizeAdvantages, segmentTargets, type CriticTarget } from '../../src/buffer/targets.js';
import { meanOrZero as mean } from '../../src/util/stats.js';
import { runEvalCallbacks, summarizeEval, type EvalCallback, type EvalEpisode } from '../core/eval.js';
import { evalKey, turnKey, type MetricRecord } from '../core/metrics.js';
import type { TrainerInputs } from '../core/trainer.js';
import type { TrainerState } from '../core/state.js';

/** Constructor arguments both actor-critic trainers take (besides their critics). */
export interface ActorCriticInputs<T, S> extends TrainerInputs<T, S> {
  /**
   * User metrics over the transitions of each update (CoMLRL's `metrics_callback`), merged into
   * that update's record under `rollout/<key>`.
   */
  rolloutMetrics?: (transitions: readonly JointTransition[]) => Record<string, number>;
}

/** Options of the actor-critic trainers' `train()`. */
export type { TrainOptions as ActorCriticTrainOptions } from '../core/trainer.js';

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

/**
 * Version of the buffered-transition layout in a snapshot: 2 added the next-step critic inputs
 * (`nextCriticIds`) that targets from the current critic need.
 */
export const AC_TRANSITION_FORMAT = 2;

/** Trainer-specific resume data of the actor-critic trainers. */
export interface ActorCriticStateExtra {
  /** Transitions waiting in the replay buffer. */
  readonly buffer: JointTransition[];
  /** Layout of `buffer` ({@link AC_TRANSITION_FORMAT}); absent in snapshots written before it existed. */
  readonly transitionFormat?: number;
  /** Optimizer-step count of each actor (behaviour log-probs stay exact while unchanged). */
  readonly policyVersions: number[];
  /** Episodes rolled out so far. */
  readonly episodes: number;
  /** Per-turn sums for the epoch-end metrics. */
  readonly epochTurnStats: { turn: number; transitions: number; rewardSum: number; returnSum: number }[];
  /**
   * Training items started so far, across epochs (what `critic_warmup_items` counts). Absent in
   * snapshots written before the option existed: the dataset cursor's position is used then.
   */
  readonly trainItems?: number;
}

/**
 * Advantages of one agent's samples from their raw values (δ, or Q for a Q critic against the
 * baseline), within each turn group: z-scored when `normalize` (config `advantage_normalization`,
 * CoMLRL's default; groups of one stay raw, as CoMLRL); otherwise raw (the paper's Eqs. 2 and 4),
 * or minus the group mean when `centre` (the baseline of a Q critic; the mean includes the sample
 * itself, so its advantage is (1 − 1/n)·(Q − the mean of the n − 1 others)).
 */
export function turnGroupAdvantages(items: readonly { turn: number; delta: number }[], normalize: boolean, centre = false): number[] {
  const out = new Array<number>(items.length);
  const byTurn = new Map<number, number[]>();
  items.forEach((it, j) => {
    const g = byTurn.get(it.turn);
    if (g) g.push(j);
    else byTurn.set(it.turn, [j]);
  });
  for (const idx of byTurn.values()) {
    const raw = idx.map((j) => items[j].delta);
    let adv = raw;
    if (normalize) adv = normalizeAdvantages(raw);
    else if (centre) {
      const m = mean(raw);
      adv = raw.map((x) => x - m);
    }
    idx.forEach((j, q) => (out[j] = adv[q]));
  }
  return out;
}

/** One critic's view of a flush at one update epoch: V (or Q) of every transition, its target y, and the advantage. */
export interface CriticEstimates {
  /** V(h_t) (or Q(h_t, a_t)) per transition. */
  readonly values: number[];
  /** y_t under the config's `critic_target` (td: r_t + γ·V(h_{t+1}), y = r at an episode's last step). */
  readonly targets: number[];
  /** Advantage per transition before the turn groups' normalization: δ = y − V (a Q critic against its baseline: Q). */
  readonly advantagesRaw: number[];
  /** Advantage per transition (z-scored per turn group unless `advantage_normalization` is false). */
  readonly advantages: number[];
}

/** y_t = r_t + γ·next_t for every transition of a flush, y_t = r_t where `next` is null (the episode's last step). */
export function bootstrapTargets(transitions: readonly JointTransition[], next: readonly (number | null)[], discount: number): number[] {
  return transitions.map((tr, j) => {
    const n = next[j];
    return n === null ? tr.reward : tr.reward + discount * n;
  });
}

/**
 * The flush's stored steps of each episode (each joint sample k of a single-turn episode its own),
 * as index lists into `transitions` in turn order. A flush holds consecutive turns of an episode:
 * all of them, or the part before or after a cut where the buffer filled.
 */
export function episodeSegments(transitions: readonly JointTransition[]): number[][] {
  const byEpisode = new Map<string, number[]>();
  transitions.forEach((tr, j) => {
    const key = `${tr.episode}/${tr.generation}`;
    const list = byEpisode.get(key);
    if (list) list.push(j);
    else byEpisode.set(key, [j]);
  });
  const out: number[][] = [];
  for (const [key, idx] of byEpisode) {
    idx.sort((a, b) => transitions[a].turn - transitions[b].turn);
    idx.forEach((j, q) => {
      if (q > 0 && transitions[j].turn !== transitions[idx[q - 1]].turn + 1) {
        throw new Error(`critic targets: episode ${key} (episode/sample) holds turns ${idx.map((i) => transitions[i].turn + 1).join(', ')} in one flush; its steps must be consecutive`);
      }
    });
    out.push(idx);
  }
  return out;
}

/**
 * The targets y of every transition of a flush under `target` (config `critic_target`), from the
 * critic's values V(h_t) and `next` (V(h_{t+1}) per transition, null after an episode's last
 * step). `td` is per transition (y = r + γ·next, y = r at the end: {@link bootstrapTargets});
 * the longer returns run over each episode's stored steps ({@link episodeSegments}) and bootstrap
 * from `next` of the last stored step — the critic's value at a cut, nothing after the episode's end.
 */
export function flushTargets(
  transitions: readonly JointTransition[],
  values: readonly number[],
  next: readonly (number | null)[],
  target: CriticTarget,
  discount: number,
): number[] {
  if (target.kind === 'td') return bootstrapTargets(transitions, next, discount);
  const out = new Array<number>(transitions.length);
  for (const idx of episodeSegments(transitions)) {
    const ys = segmentTargets(
      {
        rewards: idx.map((j) => transitions[j].reward),
        values: idx.map((j) => values[j]),
        bootstrap: next[idx[idx.length - 1]],
      },
      target,
      discount,
    );
    idx.forEach((j, q) => (out[j] = ys[q]));
  }
  return out;
}

/**
 * Step 2 for one critic over a flush, from its values and targets: the advantage — δ = y − V, or
 * for a Q critic with `qBaseline` Q minus the turn group's mean — per turn group (see
 * {@link turnGroupAdvantages}).
 */
export function estimates(
  transitions: readonly JointTransition[],
  values: readonly number[],
  targets: readonly number[],
  options: { normalize: boolean; qBaseline: boolean },
): CriticEstimates {
  const raw = transitions.map((tr, j) => ({ turn: tr.turn, delta: options.qBaseline ? values[j] : targets[j] - values[j] }));
  return { values: [...values], targets: [...targets], advantagesRaw: raw.map((r) => r.delta), advantages: turnGroupAdvantages(raw, options.normalize, options.qBaseline) };
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

/** The run bookkeeping of one actor-critic trainer (see the module comment). */
export class ActorCriticRun {
  buffer: ReplayBuffer;
  /** Optimizer steps of each actor so far: a stored behaviour log-prob is exact while its actor's count is unchanged. */
  policyVersions: number[];
  /** Episodes rolled out so far. */
  episodes = 0;
  /** Training items started so far (the current one included), across epochs. */
  trainItems = 0;
  readonly epochStats = new EpochTurnStats();
  /** The latest update's record. */
  lastUpdate: MetricRecord = {};

  constructor(
    private readonly bufferSize: number,
    numAgents: number,
    private readonly rolloutMetrics?: (transitions: readonly JointTransition[]) => Record<string, number>,
  ) {
    this.buffer = new ReplayBuffer(bufferSize);
    this.policyVersions = Array.from({ length: numAgents }, () => 0);
  }

  /** Buffers one episode's transitions (counting them in the epoch statistics), running `update` whenever the buffer fills. */
  async absorb(transitions: readonly JointTransition[], update: () => Promise<unknown>): Promise<void> {
    this.epochStats.add(transitions);
    for (const tr of transitions) {
      if (this.buffer.push(tr)) await update();
    }
  }

  /** Whether an update now is a critic warm-up update: the item being played is one of the first `warmupItems`. */
  inWarmup(warmupItems: number): boolean {
    return warmupItems > 0 && this.trainItems <= warmupItems;
  }

  /** `rollout/<key>` of the user's rollout metrics over a flush. */
  userRolloutMetrics(transitions: readonly JointTransition[]): MetricRecord {
    const out: MetricRecord = {};
    for (const [k, v] of Object.entries(this.rolloutMetrics?.(transitions) ?? {})) {
      if (typeof v !== 'number') throw new Error(`rolloutMetrics: metric '${k}' must be a number, got ${typeof v}`);
      out[`rollout/${k}`] = v;
    }
    return out;
  }

  /** The resume data. */
  exportExtra(): ActorCriticStateExtra {
    return {
      buffer: this.buffer.contents().map((t) => structuredClone(t)),
      transitionFormat: AC_TRANSITION_FORMAT,
      policyVersions: [...this.policyVersions],
      episodes: this.episodes,
      epochTurnStats: this.epochStats.snapshot(),
      trainItems: this.trainItems,
    };
  }

  /** Checks resume data before anything is restored; throws saying what is wrong. */
  static checkExtra(extra: ActorCriticStateExtra, numAgents: number): void {
    if (extra.policyVersions.length !== numAgents) {
      throw new Error(`importState: ${extra.policyVersions.length} policy versions for ${numAgents} agents`);
    }
    if (extra.trainItems !== undefined && !(Number.isInteger(extra.trainItems) && extra.trainItems >= 0)) {
      throw new Error(`importState: bad training item count ${String(extra.trainItems)}`);
    }
    if (extra.buffer.length > 0 && extra.transitionFormat !== AC_TRANSITION_FORMAT) {
      throw new Error(
        `importState: the snapshot's replay buffer holds ${extra.buffer.length} transitions in an older layout (format ${String(extra.transitionFormat ?? 1)}, this version needs ${AC_TRANSITION_FORMAT}: next-step critic inputs for targets from the current critic); resume from a checkpoint taken at a buffer flush, or start the run again`,
      );
    }
  }

  /** Restores resume data checked by {@link ActorCriticRun.checkExtra}; `cursorItems` is the fallback training-item count. */
  importExtra(extra: ActorCriticStateExtra, cursorItems: number): void {
    this.buffer = new ReplayBuffer(this.bufferSize);
    for (const t of extra.buffer) this.buffer.push(structuredClone(t));
    this.policyVersions = [...extra.policyVersions];
    this.episodes = extra.episodes;
    this.epochStats.restore(extra.epochTurnStats);
    this.trainItems = extra.trainItems ?? cursorItems;
  }
}

/** A CoLLM trainer snapshot. */
export type ActorCriticState = TrainerState<ActorCriticStateExtra>;

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

/**
 * The eval record of played episodes with the critic's values along each (`values(ep)`: one list
 * per critic, per agent for CoLLM-DC): per-turn rewards, returns, value predictions and the targets
 * y_t (of the config's `critic_target`) from them, episode means and the user's callbacks.
 */
export async function evalRecord<T, S>(
  episodes: readonly EvalEpisode<T, S>[],
  values: (ep: EvalEpisode<T, S>) => Promise<number[][]>,
  discount: number,
  callbacks: readonly EvalCallback<T, S>[],
  target: CriticTarget,
): Promise<MetricRecord> {
  const valueByTurn = new Map<number, { pred: number[]; target: number[] }>();
  for (const ep of episodes) {
    for (const vs of await values(ep)) {
      const targets = segmentTargets({ rewards: ep.rewards, values: vs, bootstrap: null }, target, discount);
      vs.forEach((v, t) => {
        const acc = valueByTurn.get(t) ?? { pred: [], target: [] };
        acc.pred.push(v);
        acc.target.push(targets[t]);
        valueByTurn.set(t, acc);
      });
    }
  }
  const metrics: MetricRecord = {};
  for (const s of summarizeEval(episodes)) {
    metrics[evalKey(turnKey(s.turn, 'reward_mean'))] = s.rewardMean;
    metrics[evalKey(turnKey(s.turn, 'expected_return'))] = s.returnMean;
    const v = valueByTurn.get(s.turn);
    if (v) {
      metrics[evalKey(turnKey(s.turn, 'value_pred_mean'))] = mean(v.pred);
      metrics[evalKey(turnKey(s.turn, 'value_target_mean'))] = mean(v.target);
    }
  }
  Object.assign(metrics, episodeSummary(episodes), await runEvalCallbacks(callbacks, [...episodes]));
  return metrics;
}
