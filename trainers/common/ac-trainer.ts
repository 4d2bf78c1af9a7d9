/**
 * What the two actor-critic trainers (CoLLM-DC, CoLLM-CC) share: the rollout of step 1 (both
 * papers' actors act alike; only what the critic stores differs), the assembly of transitions and
 * TD targets of step 2, the plumbing of the step-3 update (buffer, minibatch plan, actor rows,
 * metrics), evaluation with critic values, and resume data. Each trainer's file holds its critic:
 * what it stores at rollout, its targets, its update and its eval values.
 */
import { planMinibatches, ReplayBuffer, type AgentTransition, type JointTransition, type PlannedMinibatch } from '../../src/buffer/replay.js';
import { discountedReturns, normalizeAdvantages, tdTargets } from '../../src/buffer/targets.js';
import { isStaged } from '../../src/decpomdp/staged.js';
import type { GlobalInfo, LLMDecPOMDP } from '../../src/decpomdp/types.js';
import type { AdamW } from '../../src/optim/adamw.js';
import type { ActorCriticConfig } from '../actor-critic-config.js';
import { FlushMetrics } from './ac-metrics.js';
import { behaviourLogProbs, type ActorRow, type RatioSettings, type UpdateStepOptions } from './actor-critic.js';
import { meanOrZero as mean } from '../../src/util/stats.js';
import { runEvalCallbacks, summarizeEval, type EvalEpisode } from './eval.js';
import { encodePrompt, generateGroup, type CompletionGroup } from './generation.js';
import { evalKey, turnKey, type MetricRecord } from './metrics.js';
import type { TrainerState } from './state.js';
import { assertFiniteReward, TrainerBase, type TrainerInputs, type TrainerNames, type TrainOptions } from './trainer.js';

/** Options of the actor-critic trainers' `train()`. */
export type ActorCriticTrainOptions = TrainOptions;

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
  /**
   * Training items started so far, across epochs (what `critic_warmup_items` counts). Absent in
   * snapshots written before the option existed: the dataset cursor's position is used then.
   */
  readonly trainItems?: number;
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
  const check = (r: number) => assertFiniteReward(label, env.name, r, turn);
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

// ---------------------------------------------------------------------------------------------
// The trainer skeleton both actor-critic trainers fill in.
// ---------------------------------------------------------------------------------------------

/** Constructor arguments both actor-critic trainers take (besides their critics). */
export interface ActorCriticInputs<T, S> extends TrainerInputs<T, S> {
  /**
   * User metrics over the transitions of each update (CoMLRL's `metrics_callback`), merged into
   * that update's record under `rollout/<key>`.
   */
  rolloutMetrics?: (transitions: readonly JointTransition[]) => Record<string, number>;
}

/** What the agents saw and sampled at one turn of a rollout. */
export interface TurnSamples {
  /** m_t. */
  readonly globalInfo: GlobalInfo;
  /** observations[i]: o_{i,t}. */
  readonly observations: string[];
  /** promptIds[i]: o_{i,t} encoded for agent i (the env's rendering applied). */
  readonly promptIds: number[][];
  /** groups[i]: agent i's K completions. */
  readonly groups: CompletionGroup[];
  /** behaviour[i][k]: Σ log π_old of agent i's k-th completion. */
  readonly behaviour: number[][];
}

/** One turn of a rollout: the samples, what the critic stored (`V`, trainer-specific), and the K joint steps. */
export interface TurnRecord<S, V> extends TurnSamples {
  readonly critic: V;
  /** steps[k]: the outcome of joint action k (the k-th completion of every agent). */
  readonly steps: RolloutStep<S>[];
}

/** The critic part of one joint transition: per agent, and the centralized critic's (CoLLM-CC only). */
export interface TransitionCritic {
  readonly agents: readonly Pick<AgentTransition, 'criticIds' | 'value' | 'target'>[];
  readonly joint: JointTransition['joint'];
}

/**
 * Steps 1–3 of the actor-critic trainers (see collm-dc.ts / collm-cc.ts) around the critic, which
 * each trainer supplies: what it stores at a rollout turn ({@link ActorCriticTrainer.storeCritic}),
 * the TD targets from those values ({@link ActorCriticTrainer.criticTargets}), the update
 * ({@link ActorCriticTrainer.updateFrom}) and the values along eval episodes.
 */
export abstract class ActorCriticTrainer<T, S, C extends ActorCriticConfig, V> extends TrainerBase<T, S, C> {
  private readonly rolloutMetrics: ((transitions: readonly JointTransition[]) => Record<string, number>) | undefined;
  private readonly epochStats = new EpochTurnStats();
  private buffer: ReplayBuffer;
  /** Optimizer steps of each actor so far: a stored behaviour log-prob is exact while its actor's count is unchanged. */
  protected policyVersions: number[];
  private episodes = 0;
  /** Training items started so far (the current one included), across epochs. */
  private trainItems = 0;
  private lastUpdate: MetricRecord = {};

  protected constructor(names: TrainerNames, config: C, inputs: ActorCriticInputs<T, S>) {
    super(names, config, inputs);
    this.rolloutMetrics = inputs.rolloutMetrics;
    this.buffer = new ReplayBuffer(config.rollout_buffer_size);
    this.policyVersions = inputs.agents.map(() => 0);
  }

  /** The metrics of the latest buffer flush (also sent to the logger when due). */
  get lastUpdateMetrics(): MetricRecord {
    return { ...this.lastUpdate };
  }

  /** Transitions waiting in the replay buffer. */
  get bufferedTransitions(): number {
    return this.buffer.size;
  }

  /**
   * Whether an update now is a critic warm-up update (config `critic_warmup_items`): only the
   * critics' parameters step (for a shared head only the head), the actors stay frozen and their
   * policy versions unchanged. True while the item being played (or, at epoch end, the last one
   * played) is one of the first `critic_warmup_items`; an `updateFrom` before any item counts too.
   */
  get inCriticWarmup(): boolean {
    const n = this.config.critic_warmup_items;
    return n > 0 && this.trainItems <= n;
  }

  /** One episode into the buffer; every time the buffer fills, an update. */
  protected async trainOn(task: T): Promise<void> {
    this.trainItems++;
    const transitions = await this.rollout(task);
    this.envStep += transitions.length;
    this.epochStats.add(transitions);
    for (const tr of transitions) {
      if (this.buffer.push(tr)) await this.update();
    }
  }

  /** Epoch end: the leftovers are trained on too (CoMLRL flushes every non-empty buffer). */
  protected async endEpoch(): Promise<void> {
    if (this.buffer.size > 0) await this.update();
    await this.logger?.log(this.envStep, this.epochStats.drain());
  }

  // -------------------------------------------------------------------------------------------
  // 1. Rollout.
  // -------------------------------------------------------------------------------------------

  /**
   * Plays one episode of `task` with the current actors and returns its joint transitions with the
   * critic's stored values, behaviour log-probs and TD targets (K joint samples when single-turn).
   */
  async rollout(task: T): Promise<JointTransition[]> {
    const { env, config } = this;
    const k = config.num_generations;
    const episode = this.episodes++;
    const turns: TurnRecord<S, V>[] = [];
    let state = env.initialState(task);
    for (let t = 0; t < config.num_turns; t++) {
      const samples = await this.sampleTurn(state, k);
      const critic = await this.storeCritic(samples);

      // Joint action k = the k-th completion of every agent; one joint reward each. The episode
      // goes on after this turn unless it is the last, or the reward is above the threshold.
      const threshold = config.early_termination_threshold;
      const continues = (r: number) => t < config.num_turns - 1 && !(threshold !== null && r > threshold);
      const steps: RolloutStep<S>[] = [];
      for (let j = 0; j < k; j++) {
        const actions = samples.groups.map((g) => g.texts[j]);
        steps.push(await this.timer.time('reward', () => rolloutStep(env, state, actions, continues, this.names.label, t)));
      }
      turns.push({ ...samples, critic, steps });

      // Multi-turn plays K = 1: its single joint step decides whether the episode goes on.
      const last = steps[0];
      if (!continues(last.reward) || last.done || last.next === null) break;
      state = last.next;
    }
    return this.episodeTransitions(episode, turns);
  }

  /** Every agent observes the state and samples K completions; their behaviour log-probs are kept. */
  private async sampleTurn(state: S, k: number): Promise<TurnSamples> {
    const { agents, env } = this;
    const globalInfo = env.globalInfo(state);
    const observations = agents.map((_, i) => env.observe(state, i));
    const promptIds = agents.map((a, i) => encodePrompt(a, observations[i], env.rendering?.(state, i)));
    const groups: CompletionGroup[] = [];
    const behaviour: number[][] = [];
    for (let i = 0; i < agents.length; i++) {
      const group = await this.timer.time('generation', () => generateGroup(agents[i], promptIds[i], k, this.settings, this.samplingRng));
      groups.push(group);
      behaviour.push(await this.timer.time('scoring', () => behaviourLogProbs(agents[i].model, group.ids.map(() => promptIds[i]), group.ids)));
    }
    return { globalInfo, observations, promptIds, groups, behaviour };
  }

  /** What the critic stores at a turn: its input ids and values for the K samples. */
  protected abstract storeCritic(samples: TurnSamples): Promise<V>;

  // -------------------------------------------------------------------------------------------
  // 2. Transitions and one-step TD targets.
  // -------------------------------------------------------------------------------------------

  /** The episode's joint transitions, per joint sample k in turn order. */
  private episodeTransitions(episode: number, turns: readonly TurnRecord<S, V>[]): JointTransition[] {
    const out: JointTransition[] = [];
    const k = turns[0].steps.length;
    for (let j = 0; j < k; j++) {
      const rewards = turns.map((tr) => tr.steps[j].reward);
      const returns = discountedReturns(rewards, this.config.discount);
      const critic = this.criticTargets(turns, j, rewards);
      turns.forEach((tr, t) => {
        const last = t === turns.length - 1;
        const step = tr.steps[j];
        out.push({
          episode,
          turn: t,
          generation: j,
          globalInfo: tr.globalInfo,
          nextGlobalInfo: last ? (step.next === null ? null : this.env.globalInfo(step.next)) : turns[t + 1].globalInfo,
          reward: step.reward,
          done: last,
          nextObservations: last ? null : turns[t + 1].observations,
          agents: this.agents.map((agent, i) => ({
            prompt: agent.tokenizer.decode(tr.promptIds[i]),
            observation: tr.observations[i],
            promptIds: tr.promptIds[i],
            completionIds: tr.groups[i].ids[j],
            action: tr.groups[i].texts[j],
            behaviourLogProb: tr.behaviour[i][j],
            policyVersion: this.policyVersions[i],
            ...critic[t].agents[i],
            return: returns[t],
          })),
          joint: critic[t].joint,
        });
      });
    }
    return out;
  }

  /**
   * The critic part of joint sample k's transitions, one per turn: stored inputs and values, and
   * y_t = r_t + γ·V(h_{t+1}) with y = r at the last step (no bootstrap). `rewards[t]` is r_t.
   */
  protected abstract criticTargets(turns: readonly TurnRecord<S, V>[], k: number, rewards: readonly number[]): TransitionCritic[];

  // -------------------------------------------------------------------------------------------
  // 3. Update from the replay buffer.
  // -------------------------------------------------------------------------------------------

  /** Drains the buffer and updates on it (see the trainer's module comment). */
  async update(): Promise<MetricRecord> {
    return this.updateFrom(this.buffer.drain());
  }

  /**
   * One update (step 3) on the given transitions instead of the buffer's, e.g. transitions from
   * `rollout`. Their behaviour log-probs must come from these actors.
   */
  abstract updateFrom(transitions: readonly JointTransition[]): Promise<MetricRecord>;

  /** For `update_epochs` passes, per turn group in ascending order, shuffled minibatches of transition indices. */
  protected minibatchPlan(transitions: readonly JointTransition[]): PlannedMinibatch[] {
    return planMinibatches(
      transitions.map((t) => t.turn),
      { batchSize: this.trainBatchSize, epochs: this.config.update_epochs, rng: this.minibatchRng },
    );
  }

  /** Agent i's actor sample from its part of a transition, weighted 1/|minibatch| (CoMLRL's mean). */
  protected actorRow(i: number, step: AgentTransition, advantage: number, minibatchSize: number): ActorRow {
    return {
      promptIds: step.promptIds,
      completionIds: step.completionIds,
      advantage,
      // Unchanged actor: π_old is π_θ, so ρ is exactly 1 (see common/actor-critic.ts).
      oldLogProb: step.policyVersion === this.policyVersions[i] ? null : step.behaviourLogProb,
      weight: 1 / minibatchSize,
    };
  }

  /** How the actor objective uses the importance ratio (config `use_importance_ratio`, `ratio_clip_range`). */
  protected get ratioSettings(): RatioSettings {
    return { useRatio: this.config.use_importance_ratio, clipRange: this.config.ratio_clip_range };
  }

  /** Gradient clipping and chunking of every update step; `label` prefixes its errors. */
  protected stepOptions(label: string): UpdateStepOptions {
    return { maxGradNorm: this.config.max_grad_norm, chunkSize: this.config.scoring_batch_size, label };
  }

  /** A fresh collector of one update's losses and ratios. */
  protected flushMetrics(): FlushMetrics {
    return new FlushMetrics(this.config.use_importance_ratio ? this.config.ratio_clip_range : null);
  }

  /** Ends an update: its record (plus user rollout metrics, and `critic_warmup: 1` in warm-up) is kept and logged when due. */
  protected async finishUpdate(metrics: FlushMetrics, transitions: readonly JointTransition[]): Promise<MetricRecord> {
    const warmup: MetricRecord = this.inCriticWarmup ? { critic_warmup: 1 } : {};
    this.lastUpdate = { ...metrics.record(transitions), ...this.userRolloutMetrics(transitions), ...warmup, optimizer_steps: this.optimizerSteps };
    if (this.trainLogDue()) {
      await this.logger?.log(this.envStep, { ...this.lastUpdate, epoch: this.cursor.epoch, ...this.timer.drain('time/') });
    }
    return this.lastUpdate;
  }

  private userRolloutMetrics(transitions: readonly JointTransition[]): MetricRecord {
    const out: MetricRecord = {};
    for (const [k, v] of Object.entries(this.rolloutMetrics?.(transitions) ?? {})) {
      if (typeof v !== 'number') throw new Error(`rolloutMetrics: metric '${k}' must be a number, got ${typeof v}`);
      out[`rollout/${k}`] = v;
    }
    return out;
  }

  // -------------------------------------------------------------------------------------------
  // Evaluation.
  // -------------------------------------------------------------------------------------------

  /**
   * Plays the first `eval_num_samples` eval tasks along one path (one completion per agent per
   * turn, greedy if `eval_greedy`, early termination as in training) and values every step with
   * the critic(s). The eval stream restarts from the seed, so evaluations differ only by the weights.
   */
  async evaluate(): Promise<ActorCriticEvalResult<T, S>> {
    const t0 = performance.now();
    const episodes = await this.playEvalEpisodes(this.config.early_termination_threshold);
    // Critic values along each episode, and the targets y_t from them.
    const valueByTurn = new Map<number, { pred: number[]; target: number[] }>();
    for (const ep of episodes) {
      for (const values of await this.evalValues(ep)) {
        const targets = tdTargets(ep.rewards, values, this.config.discount);
        values.forEach((v, t) => {
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
    Object.assign(metrics, episodeSummary(episodes), await runEvalCallbacks(this.evalCallbacks, episodes));
    metrics['eval/time_s'] = (performance.now() - t0) / 1000;
    await this.logger?.log(this.envStep, metrics);
    return { envStep: this.envStep, metrics, episodes };
  }

  /** The critic's values V(h_t) along an eval episode: one list per critic (per agent for CoLLM-DC). */
  protected abstract evalValues(episode: EvalEpisode<T, S>): Promise<number[][]>;

  // -------------------------------------------------------------------------------------------
  // Resuming.
  // -------------------------------------------------------------------------------------------

  /** Every optimizer, in snapshot order: actors first, then critics. */
  protected abstract allOptimizers(): readonly AdamW[];

  /** Everything besides the weights needed to resume exactly: counters, cursor, streams, AdamW moments, buffer. */
  exportState(): TrainerState<ActorCriticStateExtra> {
    return this.snapshot(this.allOptimizers(), {
      buffer: this.buffer.contents().map((t) => structuredClone(t)),
      policyVersions: [...this.policyVersions],
      episodes: this.episodes,
      epochTurnStats: this.epochStats.snapshot(),
      trainItems: this.trainItems,
    });
  }

  /**
   * Restores a snapshot from `exportState`. Load the saved weights first: the agents' and critics'
   * models, and the value heads (pass them to the constructor).
   */
  importState(state: TrainerState<ActorCriticStateExtra>): void {
    this.restoreSnapshot(state, this.allOptimizers(), (extra) => {
      if (extra.policyVersions.length !== this.agents.length) {
        throw new Error(`importState: ${extra.policyVersions.length} policy versions for ${this.agents.length} agents`);
      }
      if (extra.trainItems !== undefined && !(Number.isInteger(extra.trainItems) && extra.trainItems >= 0)) {
        throw new Error(`importState: bad training item count ${String(extra.trainItems)}`);
      }
    });
    this.buffer = new ReplayBuffer(this.config.rollout_buffer_size);
    for (const t of state.extra.buffer) this.buffer.push(structuredClone(t));
    this.policyVersions = [...state.extra.policyVersions];
    this.episodes = state.extra.episodes;
    this.epochStats.restore(state.extra.epochTurnStats);
    this.trainItems = state.extra.trainItems ?? state.cursor.epoch * this.trainTasks.length + state.cursor.index;
  }
}
