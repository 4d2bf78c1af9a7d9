/**
 * CoLLM-CC — multi-agent actor-critic with a centralized critic (CoLLM paper, Algorithm 1;
 * CoMLRL 1.3.6's MAAC).
 *
 * Decentralized actors π_i act on their own histories h_{i,t}; one critic V(h_t) (or Q(h_t, a_t))
 * reads the joint history — every agent's earlier observations and actions and its current
 * observation (config `critic_history`), m_t (turn, horizon, last reward / max) and for Q the joint
 * action — in the text layout of src/critic/inputs.ts, with its own LM, tokenizer and learning
 * rate. The file reads in the order of Algorithm 1:
 *
 *   1. `rollout`: play an episode with the current actors. At turn t each agent observes o_{i,t}
 *      and samples a_{i,t} (K samples when single-turn); we keep each actor's behaviour log-prob
 *      Σ log π_old(a_{i,t}|h_{i,t}), the critic's inputs at h_t and h_{t+1} and its value then; the
 *      environment returns the joint reward r_t and o_{t+1}. The episode ends at the horizon,
 *      when the env says done, or when r_t > early_termination_threshold. Transitions go to the
 *      replay buffer; a full buffer (and the leftovers at epoch end) is one `update`.
 *   2. `criticEstimates`: at every update epoch, from the CURRENT critic (Eq. 5;
 *      `recompute_targets: false` keeps the rollout-time values, CoMLRL 1.3.6):
 *      y_t = r_t + γ·V(h_{t+1}), y = r at the episode's last step; δ_t = y_t − V(h_t), the same
 *      advantage for every agent (a Q critic: Q − the turn group's mean, `q_advantage`), z-scored
 *      per turn group.
 *   3. `update`: for `update_epochs` passes, per turn group in ascending order, shuffled
 *      minibatches of joint transitions; per minibatch
 *        every actor i: −mean( min(ρ_i·A, clip(ρ_i, 1±c)·A) )   (CoMLRL: −mean(A·log π_i)),
 *        then the critic ONCE: value_loss_coef · mean max((y − V)², (y − V_clip)²) with V_clip
 *        within ±value_clip_range of the value at the flush's start (the paper's advantage clip).
 *      The buffer is then empty. During a critic warm-up (`critic_warmup_items`) only the critic steps.
 *
 * Differences from CoMLRL 1.3.6 (README): the critic is updated once per joint minibatch, not once
 * per agent buffer (CoMLRL steps it N times on duplicated inputs); the paper-aligned options
 * above unless `comlrl136()` turns them off; it encodes its input with its own tokenizer (CoMLRL:
 * agent 0's); non-finite losses raise; streams are seeded.
 */
import { join } from 'node:path';
import { planMinibatches, type JointTransition } from '../src/buffer/replay.js';
import { tdTargets } from '../src/buffer/targets.js';
import { createCriticHead, headSpecFromHiddenDim, saveCriticHead, type CriticHead } from '../src/critic/heads.js';
import { centralizedCriticIds, type JointHistoryTurn } from '../src/critic/inputs.js';
import { ValueModel, type CriticLM } from '../src/critic/value-model.js';
import type { GlobalInfo } from '../src/decpomdp/types.js';
import type { AdamW } from '../src/optim/adamw.js';
import { rngFor } from '../src/util/rng.js';
import { parseCoLLMCCConfig, type CoLLMCCConfig, type CoLLMCCConfigInput } from './actor-critic-config.js';
import { FlushMetrics } from './common/ac-metrics.js';
import { episodeTransitions, jointSteps, predictDistinct, sampleTurn, type PlayedTurn, type RolloutContext } from './common/ac-rollout.js';
import {
  ActorCriticRun,
  bootstrapTargets,
  estimates,
  evalRecord,
  type ActorCriticEvalResult,
  type ActorCriticInputs,
  type ActorCriticState,
  type CriticEstimates,
} from './common/ac-run.js';
import { actorRow, actorStep, criticStep, type RatioRecorder, type UpdateStepOptions } from './common/actor-critic.js';
import type { EvalEpisode } from './common/eval.js';
import type { MetricRecord } from './common/metrics.js';
import { saveAgents } from './common/save.js';
import { TrainerBase } from './common/trainer.js';

/** Constructor arguments of {@link CoLLMCCTrainer}. */
export interface CoLLMCCTrainerOptions<T, S> extends ActorCriticInputs<T, S> {
  /** The centralized critic's LM and tokenizer (required; not an actor's model). */
  critic: CriticLM;
  /** A value head to use instead of a fresh one (e.g. loaded with `loadCriticHead` to resume). */
  criticHead?: CriticHead;
  /** CoMLRL MAACConfig fields (snake_case) plus comlrl's extras; see actor-critic-config.ts. */
  config?: CoLLMCCConfigInput;
}

/** A CoLLM-CC trainer snapshot. */
export type CoLLMCCTrainerState = ActorCriticState;

/** One played turn with the centralized critic's inputs and values per joint sample k. */
interface CCTurn<S> extends PlayedTurn<S> {
  readonly criticIds: number[][];
  readonly values: number[];
}

/**
 * Trains n agents with CoLLM-CC on an LLM Dec-POMDP.
 *
 * ```ts
 * const trainer = new CoLLMCCTrainer({ agents, critic, env, trainTasks, evalTasks, config: { num_turns: 2 } });
 * await trainer.train();
 * await trainer.save('out');
 * ```
 */
export class CoLLMCCTrainer<T, S> extends TrainerBase<T, S, CoLLMCCConfig> {
  /** The centralized critic (its own LM + head + tokenizer). */
  readonly critic: ValueModel;
  /** One AdamW per actor. */
  readonly actorOptimizers: readonly AdamW[];
  /** The critic's AdamW. */
  readonly criticOptimizer: AdamW;
  private readonly run: ActorCriticRun;

  constructor(options: CoLLMCCTrainerOptions<T, S>) {
    super({ className: 'CoLLMCCTrainer', label: 'CoLLM-CC', stateTag: 'collm-cc' }, parseCoLLMCCConfig(options.config ?? {}), options);
    const { agents, config } = this;
    const { critic } = options;
    // CoMLRL: exactly one centralized critic is required.
    if (!critic) throw new Error('CoLLMCCTrainer: critic must be provided (exactly one centralized critic LM)');
    if (Array.isArray(critic)) throw new Error(`CoLLMCCTrainer: critics length ${(critic as unknown[]).length}: CoLLM-CC takes exactly one critic`);
    if (agents.some((a) => a.model === critic.model)) throw new Error("CoLLMCCTrainer: the critic is an actor's model; give the critic its own LM");

    // Head: N(0, 0.02) from the seeded init stream.
    const base = headSpecFromHiddenDim(config.critic_value_head_hidden_dim);
    const spec = config.critic_head ? { ...base, type: config.critic_head } : base;
    const head = options.criticHead ?? createCriticHead(critic.model.hiddenSize, spec, rngFor(config.seed, 'init'));
    this.critic = new ValueModel(critic.model, head, critic.tokenizer, false);

    this.actorOptimizers = agents.map((a) => this.adamW(a.model.trainableVariables(), config.agent_learning_rate));
    this.criticOptimizer = this.adamW(this.critic.ownVariables(), config.critic_learning_rate ?? config.agent_learning_rate);
    this.run = new ActorCriticRun(config.rollout_buffer_size, agents.length, options.rolloutMetrics);
  }

  /** The metrics of the latest buffer flush (also sent to the logger when due). */
  get lastUpdateMetrics(): MetricRecord {
    return { ...this.run.lastUpdate };
  }

  /** Transitions waiting in the replay buffer. */
  get bufferedTransitions(): number {
    return this.run.buffer.size;
  }

  /** Whether an update now is a critic warm-up update (config `critic_warmup_items`): only the critic steps. */
  get inCriticWarmup(): boolean {
    return this.run.inWarmup(this.config.critic_warmup_items);
  }

  /** One training task: roll out an episode, buffer it, and update whenever the buffer fills. */
  protected async trainOn(task: T): Promise<void> {
    this.run.trainItems++;
    const transitions = await this.rollout(task);
    this.envStep += transitions.length;
    await this.run.absorb(transitions, () => this.update());
  }

  /** Epoch end: the leftovers are trained on too (CoMLRL flushes every non-empty buffer). */
  protected async endEpoch(): Promise<void> {
    if (this.run.buffer.size > 0) await this.update();
    await this.logger?.log(this.envStep, this.run.epochStats.drain());
  }

  // -------------------------------------------------------------------------------------------
  // 1. Rollout.
  // -------------------------------------------------------------------------------------------

  /**
   * Plays one episode of `task` with the current actors and returns its joint transitions with the
   * critic's inputs (h_t and h_{t+1}), its rollout-time values and TD targets, the behaviour
   * log-probs (K joint samples when single-turn).
   */
  async rollout(task: T): Promise<JointTransition[]> {
    const { config } = this;
    const ctx = this.rolloutContext();
    const episode = this.run.episodes++;
    const turns: CCTurn<S>[] = [];
    let state: S | null = this.env.initialState(task);
    for (let t = 0; t < config.num_turns && state !== null; t++) {
      const samples = await sampleTurn(ctx, state, config.num_generations);
      // The critic's input per joint sample k: the joint history so far (sample 0's path:
      // multi-turn plays K = 1), m_t, every o_{i,t}, and for Q the joint action a_t^k.
      const history = this.jointHistory(turns);
      const criticIds = samples.groups[0].texts.map((_, k) =>
        this.criticInput(
          samples.observations,
          samples.groups.map((g) => g.texts[k]),
          samples.globalInfo,
          history,
        ),
      );
      const values = await this.timer.time('critic', () => predictDistinct((rows) => this.critic.predict(rows), criticIds));
      const played: { steps: PlayedTurn<S>['steps']; next: S | null } = await jointSteps(ctx, state, samples, t, config.num_turns, config.early_termination_threshold);
      turns.push({ ...samples, steps: played.steps, criticIds, values });
      state = played.next;
    }
    // Rollout-time targets y_t = r_t + γ·V(h_{t+1}) (what `recompute_targets: false` trains on).
    const k = turns[0].steps.length;
    const targets = Array.from({ length: k }, (_, j) =>
      tdTargets(
        turns.map((tr) => tr.steps[j].reward),
        turns.map((tr) => tr.values[j]),
        config.discount,
      ),
    );
    return episodeTransitions(this.env, this.agents, episode, turns, this.run.policyVersions, config.discount, (t, j) => {
      const joint = {
        criticIds: turns[t].criticIds[j],
        nextCriticIds: t + 1 < turns.length ? turns[t + 1].criticIds[j] : null,
        value: turns[t].values[j],
        target: targets[j][t],
      };
      // Every agent's part carries the joint value and target (its own critic inputs are empty).
      return { agents: this.agents.map(() => ({ criticIds: [], nextCriticIds: null, value: joint.value, target: joint.target })), joint };
    });
  }

  /** The joint history turns the critic reads (`critic_history: full`), or none. */
  private jointHistory(turns: readonly CCTurn<S>[]): JointHistoryTurn[] {
    if (this.config.critic_history !== 'full') return [];
    return turns.map((tr) => ({ observations: tr.observations, actions: tr.groups.map((g) => g.texts[0]) }));
  }

  /** The centralized critic's input ids at one joint step (layout and token budget in src/critic/inputs.ts). */
  private criticInput(observations: readonly string[], actions: readonly string[], m: GlobalInfo, history: readonly JointHistoryTurn[]): number[] {
    const { config } = this;
    return centralizedCriticIds(
      this.critic.tokenizer,
      { observations, actions: config.critic_type === 'q' ? actions : null, globalInfo: config.use_global_info ? m : null, history },
      config.critic_max_length,
    );
  }

  // -------------------------------------------------------------------------------------------
  // 2. Targets and advantages from the current critic.
  // -------------------------------------------------------------------------------------------

  /**
   * V(h_t), y_t and the advantage of every transition in a flush: from the current critic when
   * `recompute_targets` (the paper's Eq. 5), else the values and targets stored at rollout.
   */
  private async criticEstimates(transitions: readonly JointTransition[]): Promise<CriticEstimates> {
    const { config } = this;
    const joints = transitions.map(jointOf);
    const options = { normalize: config.advantage_normalization, qBaseline: config.critic_type === 'q' && config.q_advantage === 'baseline' };
    if (!config.recompute_targets) {
      return estimates(
        transitions,
        joints.map((j) => j.value),
        joints.map((j) => j.target),
        options,
      );
    }
    // V(h_t) and V(h_{t+1}) in one pass (each distinct input once).
    const rows = [...joints.map((j) => j.criticIds), ...joints.flatMap((j) => (j.nextCriticIds === null ? [] : [j.nextCriticIds]))];
    const preds = await this.timer.time('critic', () => predictDistinct((r) => this.critic.predict(r), rows));
    let q = joints.length;
    const next = joints.map((j) => (j.nextCriticIds === null ? null : preds[q++]));
    return estimates(transitions, preds.slice(0, joints.length), bootstrapTargets(transitions, next, config.discount), options);
  }

  // -------------------------------------------------------------------------------------------
  // 3. Update from the replay buffer.
  // -------------------------------------------------------------------------------------------

  /** Drains the buffer and updates on it. */
  async update(): Promise<MetricRecord> {
    return this.updateFrom(this.run.buffer.drain());
  }

  /**
   * One update (steps 2–3) on `transitions`: per update epoch, targets and advantages from the
   * current critic; then per minibatch every actor, then the critic once.
   */
  async updateFrom(transitions: readonly JointTransition[]): Promise<MetricRecord> {
    if (transitions.length === 0) return {};
    const { agents, config } = this;
    const metrics = new FlushMetrics(config.use_importance_ratio ? config.ratio_clip_range : null);
    const ratio = { useRatio: config.use_importance_ratio, clipRange: config.ratio_clip_range };
    const valueClip = config.value_clip_separate ? config.value_clip_range : null;
    // Critic warm-up (`critic_warmup_items`): the actors do not step; the critic alone learns.
    const actorsFrozen = this.inCriticWarmup;

    const plan = planMinibatches(
      transitions.map((t) => t.turn),
      { batchSize: this.trainBatchSize, epochs: config.update_epochs, rng: this.minibatchRng },
    );
    let first: CriticEstimates | null = null;
    let current: { epoch: number; e: CriticEstimates } | null = null;
    for (const mb of plan) {
      // Step 2 at the start of every update epoch (stored values: the same every epoch).
      if (current === null || current.epoch !== mb.epoch) {
        const e: CriticEstimates = current !== null && !config.recompute_targets ? current.e : await this.criticEstimates(transitions);
        current = { epoch: mb.epoch, e };
        first ??= e;
      }
      const { e } = current;
      const anchor = first as CriticEstimates;
      const where = `turn ${mb.turn + 1}, epoch ${mb.epoch + 1}`;

      // Every actor on its own part of the joint minibatch, with the shared advantage.
      for (let i = 0; i < (actorsFrozen ? 0 : agents.length); i++) {
        const rows = mb.indices.map((j) => actorRow(transitions[j].agents[i], e.advantages[j], this.run.policyVersions[i], mb.indices.length));
        const recorder: RatioRecorder = { ratios: [] };
        const a = await this.timer.time('training', () =>
          actorStep(agents[i].model, this.actorOptimizers[i], rows, ratio, this.stepOptions(`CoLLM-CC agent ${i} ('${agents[i].name}'), ${where}`), recorder),
        );
        this.run.policyVersions[i]++;
        this.optimizerSteps++;
        metrics.loss(mb.turn, i, 'policy_loss', a.loss);
        metrics.gradNorm(i, 'grad_norm', a.gradNorm);
        metrics.ratio(mb.turn, recorder.ratios);
      }

      // The centralized critic: once per joint minibatch (CoMLRL: once per agent), clipped
      // around its value at the flush's start.
      const valueRows = mb.indices.map((j) => ({ criticIds: jointOf(transitions[j]).criticIds, target: e.targets[j], oldValue: anchor.values[j] }));
      const c = await this.timer.time('critic_training', () =>
        criticStep(this.critic, this.criticOptimizer, valueRows, config.value_loss_coef, valueClip, this.stepOptions(`CoLLM-CC critic, ${where}`)),
      );
      this.optimizerSteps++;
      metrics.loss(mb.turn, null, 'value_loss', c.loss);
      metrics.gradNorm(null, 'grad_norm', c.gradNorm);
    }

    const warmup: MetricRecord = actorsFrozen ? { critic_warmup: 1 } : {};
    // Every agent's record shows the one critic's estimates at the flush's start.
    const atStart = first as CriticEstimates;
    this.run.lastUpdate = {
      ...metrics.record(
        transitions,
        agents.map(() => atStart),
      ),
      ...this.run.userRolloutMetrics(transitions),
      ...warmup,
      optimizer_steps: this.optimizerSteps,
    };
    if (this.trainLogDue()) await this.logger?.log(this.envStep, { ...this.run.lastUpdate, epoch: this.cursor.epoch, ...this.timer.drain('time/') });
    return this.run.lastUpdate;
  }

  private stepOptions(label: string): UpdateStepOptions {
    return { maxGradNorm: this.config.max_grad_norm, chunkSize: this.config.scoring_batch_size, label };
  }

  private rolloutContext(): RolloutContext<T, S> {
    return { agents: this.agents, env: this.env, settings: this.settings, rng: this.samplingRng, timer: this.timer, label: this.names.label };
  }

  // -------------------------------------------------------------------------------------------
  // Evaluation.
  // -------------------------------------------------------------------------------------------

  /**
   * Plays the first `eval_num_samples` eval tasks along one path (one completion per agent per
   * turn, greedy if `eval_greedy`, early termination as in training) and values every step with
   * the critic. The eval stream restarts from the seed, so evaluations differ only by the weights.
   */
  async evaluate(): Promise<ActorCriticEvalResult<T, S>> {
    const t0 = performance.now();
    const episodes = await this.playEvalEpisodes(this.config.early_termination_threshold);
    const metrics = await evalRecord(episodes, (ep) => this.evalValues(ep), this.config.discount, this.evalCallbacks);
    metrics['eval/time_s'] = (performance.now() - t0) / 1000;
    await this.logger?.log(this.envStep, metrics);
    return { envStep: this.envStep, metrics, episodes };
  }

  /** V(h_t) along an eval episode (one list: the critic is shared). */
  private async evalValues(ep: EvalEpisode<T, S>): Promise<number[][]> {
    const full = this.config.critic_history === 'full';
    const ids = ep.observations.map((obs, t) => {
      const history = full ? ep.observations.slice(0, t).map((o, k) => ({ observations: o, actions: ep.completions[k] })) : [];
      return this.criticInput(obs, ep.completions[t], this.env.globalInfo(ep.states[t]), history);
    });
    return [await this.critic.predict(ids)];
  }

  // -------------------------------------------------------------------------------------------
  // Saving and resuming.
  // -------------------------------------------------------------------------------------------

  /** Writes `dir/agent_i/` (HF weights + tokenizer) per agent and `dir/critic/` (critic LM, tokenizer, `value_head.*`). */
  async save(dir: string): Promise<string[]> {
    const dirs = await saveAgents(dir, this.agents);
    const cdir = join(dir, 'critic');
    await this.critic.backbone.save(cdir);
    await this.critic.tokenizer.save(cdir);
    await saveCriticHead(this.critic.head, cdir);
    await this.logger?.log(this.envStep, { final_model_saved: 1 });
    return [...dirs, cdir];
  }

  private allOptimizers(): readonly AdamW[] {
    return [...this.actorOptimizers, this.criticOptimizer];
  }

  /** Everything besides the weights needed to resume exactly: counters, cursor, streams, AdamW moments, buffer. */
  exportState(): CoLLMCCTrainerState {
    return this.snapshot(this.allOptimizers(), this.run.exportExtra());
  }

  /**
   * Restores a snapshot from `exportState`. Load the saved weights first: the agents' and critic's
   * models, and the value head (pass it to the constructor).
   */
  importState(state: CoLLMCCTrainerState): void {
    this.restoreSnapshot(state, this.allOptimizers(), (extra) => ActorCriticRun.checkExtra(extra, this.agents.length));
    this.run.importExtra(state.extra, state.cursor.epoch * this.trainTasks.length + state.cursor.index);
  }

  /** Frees the optimizers' moments and the head (models stay with the caller). */
  dispose(): void {
    for (const o of this.allOptimizers()) o.dispose();
    this.critic.head.dispose();
  }
}

function jointOf(tr: JointTransition): NonNullable<JointTransition['joint']> {
  if (!tr.joint) throw new Error(`CoLLM-CC: transition of episode ${tr.episode} turn ${tr.turn} has no centralized critic data`);
  return tr.joint;
}
