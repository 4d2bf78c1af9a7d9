/**
 * CoLLM-DC — multi-agent actor-critic with decentralized critics (CoLLM paper, Algorithm 1 with
 * per-agent critics; CoMLRL 1.3.6's IAC).
 *
 * Every agent i has an actor π_i and its own critic V_i (or Q_i) that sees only agent i's history
 * h_{i,t} (config `critic_history`) and m_t: a separate critic LM with a value head (default), or a
 * value head on the actor's own backbone (`use_separate_critic: false`). The file reads in the
 * order of Algorithm 1:
 *
 *   1. `rollout`: play an episode with the current actors. At turn t each agent observes o_{i,t},
 *      samples a_{i,t} (K samples when single-turn); we keep the behaviour log-prob
 *      Σ log π_old(a_{i,t}|h_{i,t}), agent i's critic inputs at h_{i,t} and h_{i,t+1} and its value
 *      then; the environment returns the joint reward r_t and o_{t+1}. The episode ends at the
 *      horizon, when the env says done, or when r_t > early_termination_threshold. Transitions go
 *      to the replay buffer; a full buffer (and the leftovers at epoch end) is one `update`.
 *   2. `criticEstimates`: at every update epoch, per agent, from its CURRENT critic (Eq. 5;
 *      `recompute_targets: false` keeps the rollout-time values, CoMLRL 1.3.6):
 *      y_{i,t} = r_t + γ·V_i(h_{i,t+1}), y = r at the last step; δ = y − V_i(h_{i,t}) (a Q critic:
 *      Q_i − the turn group's mean, `q_advantage`), z-scored per turn group and agent.
 *   3. `update`: for `update_epochs` passes, per turn group in ascending order, shuffled
 *      minibatches; per minibatch and agent
 *        actor:  −mean( min(ρ·A, clip(ρ, 1±c)·A) )   (ρ = π_θ/π_old; CoMLRL: −mean(A·log π))
 *        critic: value_loss_coef · mean max((y − V_i)², (y − V_clip)²), V_clip within
 *        ±value_clip_range of the value at the flush's start (the paper's advantage clip) — a
 *        separate critic steps its own AdamW; a shared head adds it to the actor loss and takes
 *        one joint step.
 *      The buffer is then empty. During a critic warm-up (`critic_warmup_items`) only the critics
 *      step (a shared head: only the head, not the backbone).
 *
 * With `comlrl136()` this is CoMLRL 1.3.6's IAC update. Differences (README): separate critics
 * read the observation text with their own tokenizer; non-finite losses raise; streams are seeded.
 */
import { join } from 'node:path';
import { planMinibatches, type JointTransition } from '../src/buffer/replay.js';
import { tdTargets } from '../src/buffer/targets.js';
import { createCriticHead, headSpecFromHiddenDim, saveCriticHead, type CriticHead } from '../src/critic/heads.js';
import { decentralizedCriticIds, globalInfoPrefixIds, sharedHeadIds } from '../src/critic/inputs.js';
import { ValueModel, type CriticLM } from '../src/critic/value-model.js';
import type { GlobalInfo } from '../src/decpomdp/types.js';
import type { AdamW } from '../src/optim/adamw.js';
import { rngFor } from '../src/util/rng.js';
import { parseCoLLMDCConfig, type CoLLMDCConfig, type CoLLMDCConfigInput } from './actor-critic-config.js';
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
import { actorRow, actorStep, criticStep, sharedStep, type ActorRow, type RatioRecorder, type UpdateStepOptions, type ValueRow } from './common/actor-critic.js';
import type { EvalEpisode } from './common/eval.js';
import { encodePrompt } from './common/generation.js';
import type { MetricRecord } from './common/metrics.js';
import { agentDir, saveAgents } from './common/save.js';
import { TrainerBase } from './common/trainer.js';

/** Constructor arguments of {@link CoLLMDCTrainer}. */
export interface CoLLMDCTrainerOptions<T, S> extends ActorCriticInputs<T, S> {
  /**
   * One separate critic LM per agent (required with `use_separate_critic: true`, the default;
   * an error with a shared head). Separate model objects: critics do not share weights.
   */
  critics?: readonly CriticLM[];
  /**
   * Value heads to use instead of fresh ones (e.g. loaded with `loadCriticHead` to resume), one per
   * agent; their input size must match the critic (or actor, for shared heads) hidden size.
   */
  criticHeads?: readonly CriticHead[];
  /** CoMLRL IACConfig fields (snake_case) plus comlrl's extras; see actor-critic-config.ts. */
  config?: CoLLMDCConfigInput;
}

/** A CoLLM-DC trainer snapshot. */
export type CoLLMDCTrainerState = ActorCriticState;

/** One played turn with every agent's critic inputs and values: `[agent][k]`. */
interface DCTurn<S> extends PlayedTurn<S> {
  readonly criticIds: number[][][];
  readonly values: number[][];
}

/** One earlier turn of agent i's history, as its critic needs it. */
interface OwnTurn {
  readonly observation: string;
  readonly action: string;
  readonly promptIds: readonly number[];
  readonly completionIds: readonly number[];
}

/**
 * Trains n agents with CoLLM-DC on an LLM Dec-POMDP.
 *
 * ```ts
 * const trainer = new CoLLMDCTrainer({ agents, critics, env, trainTasks, evalTasks, config: { num_turns: 2 } });
 * await trainer.train();
 * await trainer.save('out');
 * ```
 */
export class CoLLMDCTrainer<T, S> extends TrainerBase<T, S, CoLLMDCConfig> {
  /** Agent i's critic: a separate LM + head, or a head on agent i's backbone. */
  readonly critics: readonly ValueModel[];
  /** One AdamW per agent (in shared-head mode it also trains the head). */
  readonly actorOptimizers: readonly AdamW[];
  /** One AdamW per separate critic (empty with shared heads). */
  readonly criticOptimizers: readonly AdamW[];
  private readonly run: ActorCriticRun;

  constructor(options: CoLLMDCTrainerOptions<T, S>) {
    super({ className: 'CoLLMDCTrainer', label: 'CoLLM-DC', stateTag: 'collm-dc' }, parseCoLLMDCConfig(options.config ?? {}), options);
    const { agents, config } = this;
    const n = agents.length;
    // CoMLRL's critic rules, same wording where it has one.
    const critics = options.critics;
    if (config.use_separate_critic) {
      if (!critics || critics.length === 0) throw new Error('CoLLMDCTrainer: critics must be provided when use_separate_critic is true (one critic LM per agent)');
      if (critics.length !== n) throw new Error(`CoLLMDCTrainer: critics length ${critics.length} does not match the ${n} agents`);
      for (let i = 0; i < n; i++) {
        for (let j = 0; j < i; j++) {
          if (critics[i].model === critics[j].model) throw new Error(`CoLLMDCTrainer: critics ${j} and ${i} share one model object; give each agent its own critic copy`);
        }
        if (agents.some((a) => a.model === critics[i].model)) {
          throw new Error(`CoLLMDCTrainer: critic ${i} is an actor's model; use use_separate_critic: false for a head on the actor's backbone`);
        }
      }
    } else if (critics && critics.length > 0) {
      throw new Error('CoLLMDCTrainer: critics were given but use_separate_critic is false (a shared head lives on each actor; drop critics or set use_separate_critic: true)');
    }
    if (options.criticHeads && options.criticHeads.length !== n) {
      throw new Error(`CoLLMDCTrainer: criticHeads length ${options.criticHeads.length} does not match the ${n} agents`);
    }

    // Heads: N(0, 0.02) from the seeded init stream, agent by agent.
    const initRng = rngFor(config.seed, 'init');
    const hiddenDim = config.use_separate_critic ? config.critic_value_head_hidden_dim : config.value_head_hidden_dim;
    const spec = config.critic_head ? { ...headSpecFromHiddenDim(hiddenDim), type: config.critic_head } : headSpecFromHiddenDim(hiddenDim);
    this.critics = agents.map((agent, i) => {
      const backbone = config.use_separate_critic ? (critics as readonly CriticLM[])[i].model : agent.model;
      const tokenizer = config.use_separate_critic ? (critics as readonly CriticLM[])[i].tokenizer : agent.tokenizer;
      const head = options.criticHeads?.[i] ?? createCriticHead(backbone.hiddenSize, spec, initRng);
      return new ValueModel(backbone, head, tokenizer, !config.use_separate_critic);
    });

    this.actorOptimizers = agents.map((a, i) =>
      this.adamW(
        config.use_separate_critic ? a.model.trainableVariables() : [...a.model.trainableVariables(), ...this.critics[i].head.trainableVariables()],
        config.agent_learning_rate,
      ),
    );
    this.criticOptimizers = config.use_separate_critic
      ? this.critics.map((c) => this.adamW(c.ownVariables(), config.critic_learning_rate ?? config.agent_learning_rate))
      : [];
    this.run = new ActorCriticRun(config.rollout_buffer_size, n, options.rolloutMetrics);
  }

  /** The metrics of the latest buffer flush (also sent to the logger when due). */
  get lastUpdateMetrics(): MetricRecord {
    return { ...this.run.lastUpdate };
  }

  /** Transitions waiting in the replay buffer. */
  get bufferedTransitions(): number {
    return this.run.buffer.size;
  }

  /** Whether an update now is a critic warm-up update (config `critic_warmup_items`): only the critics step. */
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
   * Plays one episode of `task` with the current actors and returns its joint transitions with
   * every agent's critic inputs (h_{i,t} and h_{i,t+1}), rollout-time values and TD targets, and
   * the behaviour log-probs (K joint samples when single-turn).
   */
  async rollout(task: T): Promise<JointTransition[]> {
    const { agents, config } = this;
    const ctx = this.rolloutContext();
    const episode = this.run.episodes++;
    const turns: DCTurn<S>[] = [];
    let state: S | null = this.env.initialState(task);
    for (let t = 0; t < config.num_turns && state !== null; t++) {
      const samples = await sampleTurn(ctx, state, config.num_generations);
      // Agent i's critic reads its own history (sample 0's path: multi-turn plays K = 1), m_t, its
      // observation, and for Q its k-th action.
      const criticIds: number[][][] = [];
      const values: number[][] = [];
      for (let i = 0; i < agents.length; i++) {
        const history = this.ownHistory(turns, i);
        const group = samples.groups[i];
        const rows = group.ids.map((c, k) => this.criticInput(i, samples.observations[i], samples.promptIds[i], group.texts[k], c, samples.globalInfo, history));
        criticIds.push(rows);
        values.push(await this.timer.time('critic', () => predictDistinct((r) => this.critics[i].predict(r), rows)));
      }
      const played: { steps: PlayedTurn<S>['steps']; next: S | null } = await jointSteps(ctx, state, samples, t, config.num_turns, config.early_termination_threshold);
      turns.push({ ...samples, steps: played.steps, criticIds, values });
      state = played.next;
    }
    // Rollout-time targets per agent from its own values (what `recompute_targets: false` trains on).
    const k = turns[0].steps.length;
    const targets = agents.map((_, i) =>
      Array.from({ length: k }, (_, j) =>
        tdTargets(
          turns.map((tr) => tr.steps[j].reward),
          turns.map((tr) => tr.values[i][j]),
          config.discount,
        ),
      ),
    );
    return episodeTransitions(this.env, agents, episode, turns, this.run.policyVersions, config.discount, (t, j) => ({
      agents: agents.map((_, i) => ({
        criticIds: turns[t].criticIds[i][j],
        nextCriticIds: t + 1 < turns.length ? turns[t + 1].criticIds[i][j] : null,
        value: turns[t].values[i][j],
        target: targets[i][j][t],
      })),
      joint: null,
    }));
  }

  /** Agent i's earlier turns for its critic (`critic_history: full`), or none. */
  private ownHistory(turns: readonly PlayedTurn<S>[], i: number): OwnTurn[] {
    if (this.config.critic_history !== 'full') return [];
    return turns.map((tr) => ({ observation: tr.observations[i], action: tr.groups[i].texts[0], promptIds: tr.promptIds[i], completionIds: tr.groups[i].ids[0] }));
  }

  /** Agent i's critic input at one step (see src/critic/inputs.ts for the layouts and the token budget). */
  private criticInput(i: number, observation: string, promptIds: number[], text: string, completionIds: number[], m: GlobalInfo, history: readonly OwnTurn[]): number[] {
    const { config } = this;
    const critic = this.critics[i];
    const q = config.critic_type === 'q';
    const withM = config.use_global_info ? m : null;
    if (critic.sharesBackbone) {
      return sharedHeadIds(promptIds, q ? completionIds : null, config.critic_max_length, withM ? globalInfoPrefixIds(critic.tokenizer, withM) : null, history);
    }
    return decentralizedCriticIds(critic.tokenizer, { prompt: observation, action: q ? text : null, globalInfo: withM, history }, config.critic_max_length);
  }

  // -------------------------------------------------------------------------------------------
  // 2. Targets and advantages from the current critics.
  // -------------------------------------------------------------------------------------------

  /**
   * Per agent: V_i(h_{i,t}), y_{i,t} and the advantage of every transition in a flush, from agent
   * i's current critic when `recompute_targets` (the paper's Eq. 5), else the rollout-time values.
   */
  private async criticEstimates(transitions: readonly JointTransition[]): Promise<CriticEstimates[]> {
    const { config } = this;
    const options = { normalize: config.advantage_normalization, qBaseline: config.critic_type === 'q' && config.q_advantage === 'baseline' };
    const out: CriticEstimates[] = [];
    for (let i = 0; i < this.agents.length; i++) {
      const steps = transitions.map((tr) => tr.agents[i]);
      if (!config.recompute_targets) {
        out.push(
          estimates(
            transitions,
            steps.map((s) => s.value),
            steps.map((s) => s.target),
            options,
          ),
        );
        continue;
      }
      const rows = [...steps.map((s) => s.criticIds), ...steps.flatMap((s) => (s.nextCriticIds === null ? [] : [s.nextCriticIds]))];
      const preds = await this.timer.time('critic', () => predictDistinct((r) => this.critics[i].predict(r), rows));
      let q = steps.length;
      const next = steps.map((s) => (s.nextCriticIds === null ? null : preds[q++]));
      out.push(estimates(transitions, preds.slice(0, steps.length), bootstrapTargets(transitions, next, config.discount), options));
    }
    return out;
  }

  // -------------------------------------------------------------------------------------------
  // 3. Update from the replay buffer.
  // -------------------------------------------------------------------------------------------

  /** Drains the buffer and updates on it. */
  async update(): Promise<MetricRecord> {
    return this.updateFrom(this.run.buffer.drain());
  }

  /**
   * One update (steps 2–3) of every actor and critic on `transitions`: per update epoch, targets
   * and advantages from the current critics; then per minibatch and agent, actor and critic.
   */
  async updateFrom(transitions: readonly JointTransition[]): Promise<MetricRecord> {
    if (transitions.length === 0) return {};
    const { agents, config } = this;
    const metrics = new FlushMetrics(config.use_importance_ratio ? config.ratio_clip_range : null);
    const ratio = { useRatio: config.use_importance_ratio, clipRange: config.ratio_clip_range };
    // Critic warm-up (`critic_warmup_items`): only the critics (a shared head: only the head) step.
    const actorsFrozen = this.inCriticWarmup;

    const plan = planMinibatches(
      transitions.map((t) => t.turn),
      { batchSize: this.trainBatchSize, epochs: config.update_epochs, rng: this.minibatchRng },
    );
    let first: CriticEstimates[] | null = null;
    let current: { epoch: number; e: CriticEstimates[] } | null = null;
    for (const mb of plan) {
      // Step 2 at the start of every update epoch (stored values: the same every epoch).
      if (current === null || current.epoch !== mb.epoch) {
        const e: CriticEstimates[] = current !== null && !config.recompute_targets ? current.e : await this.criticEstimates(transitions);
        current = { epoch: mb.epoch, e };
        first ??= e;
      }
      const { e } = current;
      const anchor = first as CriticEstimates[];
      for (let i = 0; i < agents.length; i++) {
        const label = `CoLLM-DC agent ${i} ('${agents[i].name}'), turn ${mb.turn + 1}, epoch ${mb.epoch + 1}`;
        const shared = this.critics[i].sharesBackbone;
        // A shared head always clips (CoMLRL); separate critics when `value_clip_separate` (the paper).
        const valueClip = shared || config.value_clip_separate ? config.value_clip_range : null;
        const rows = mb.indices.map(
          (j) =>
            ({
              ...actorRow(transitions[j].agents[i], e[i].advantages[j], this.run.policyVersions[i], mb.indices.length),
              criticIds: transitions[j].agents[i].criticIds,
              target: e[i].targets[j],
              oldValue: anchor[i].values[j],
            }) satisfies ActorRow & ValueRow,
        );
        const recorder: RatioRecorder = { ratios: [] };
        if (actorsFrozen) {
          // Warm-up: the critic's own variables only (for a shared head: the head, through the
          // actor's AdamW, whose per-parameter steps leave the backbone untouched). The actor is
          // unchanged, so its policy version is too.
          const c = await this.timer.time('critic_training', () =>
            criticStep(this.critics[i], shared ? this.actorOptimizers[i] : this.criticOptimizers[i], rows, config.value_loss_coef, valueClip, this.stepOptions(`${label} critic`)),
          );
          metrics.loss(mb.turn, i, 'value_loss', c.loss);
          metrics.gradNorm(i, 'critic_grad_norm', c.gradNorm);
          this.optimizerSteps++;
          continue;
        }
        if (shared) {
          // Shared head: actor loss + coef · clipped value loss, one backward, one step.
          const r = await this.timer.time('training', () =>
            sharedStep(this.critics[i], this.actorOptimizers[i], rows, ratio, config.value_loss_coef, valueClip, this.stepOptions(label), recorder),
          );
          metrics.loss(mb.turn, i, 'policy_loss', r.policyLoss);
          metrics.loss(mb.turn, i, 'value_loss', r.valueLoss);
          metrics.gradNorm(i, 'grad_norm', r.gradNorm);
          this.optimizerSteps++;
        } else {
          // Separate critic: the actor steps on its loss, the critic on coef · (clipped) (y − V)².
          const a = await this.timer.time('training', () => actorStep(agents[i].model, this.actorOptimizers[i], rows, ratio, this.stepOptions(label), recorder));
          const c = await this.timer.time('critic_training', () =>
            criticStep(this.critics[i], this.criticOptimizers[i], rows, config.value_loss_coef, valueClip, this.stepOptions(`${label} critic`)),
          );
          metrics.loss(mb.turn, i, 'policy_loss', a.loss);
          metrics.loss(mb.turn, i, 'value_loss', c.loss);
          metrics.gradNorm(i, 'grad_norm', a.gradNorm);
          metrics.gradNorm(i, 'critic_grad_norm', c.gradNorm);
          this.optimizerSteps += 2;
        }
        this.run.policyVersions[i]++;
        metrics.ratio(mb.turn, recorder.ratios);
      }
    }

    const warmup: MetricRecord = actorsFrozen ? { critic_warmup: 1 } : {};
    this.run.lastUpdate = {
      ...metrics.record(transitions, first as CriticEstimates[]),
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
   * each agent's critic. The eval stream restarts from the seed, so evaluations differ only by the weights.
   */
  async evaluate(): Promise<ActorCriticEvalResult<T, S>> {
    const t0 = performance.now();
    const episodes = await this.playEvalEpisodes(this.config.early_termination_threshold);
    const metrics = await evalRecord(episodes, (ep) => this.evalValues(ep), this.config.discount, this.evalCallbacks);
    metrics['eval/time_s'] = (performance.now() - t0) / 1000;
    await this.logger?.log(this.envStep, metrics);
    return { envStep: this.envStep, metrics, episodes };
  }

  /** V_i(h_{i,t}) along an eval episode, one list per agent. */
  private async evalValues(ep: EvalEpisode<T, S>): Promise<number[][]> {
    const perAgent: number[][] = [];
    const full = this.config.critic_history === 'full';
    for (let i = 0; i < this.agents.length; i++) {
      const promptIds = ep.observations.map((obs, t) => encodePrompt(this.agents[i], obs[i], this.env.rendering?.(ep.states[t], i)));
      const ids = ep.observations.map((obs, t) => {
        const history: OwnTurn[] = full
          ? ep.observations.slice(0, t).map((o, k) => ({ observation: o[i], action: ep.completions[k][i], promptIds: promptIds[k], completionIds: ep.completionIds[k][i] }))
          : [];
        return this.criticInput(i, obs[i], promptIds[t], ep.completions[t][i], ep.completionIds[t][i], this.env.globalInfo(ep.states[t]), history);
      });
      perAgent.push(await this.critics[i].predict(ids));
    }
    return perAgent;
  }

  // -------------------------------------------------------------------------------------------
  // Saving and resuming.
  // -------------------------------------------------------------------------------------------

  /**
   * Writes `dir/agent_i/` (HF weights + tokenizer) per agent; with separate critics also
   * `dir/agent_i/critic/` (the critic LM, its tokenizer and `value_head.*`); with shared heads
   * `dir/agent_i/value_head.*` (CoMLRL's layout).
   */
  async save(dir: string): Promise<string[]> {
    const dirs = await saveAgents(dir, this.agents);
    for (let i = 0; i < this.agents.length; i++) {
      const critic = this.critics[i];
      if (critic.sharesBackbone) {
        await saveCriticHead(critic.head, agentDir(dir, i));
      } else {
        const cdir = join(agentDir(dir, i), 'critic');
        await critic.backbone.save(cdir);
        await critic.tokenizer.save(cdir);
        await saveCriticHead(critic.head, cdir);
      }
    }
    await this.logger?.log(this.envStep, { final_model_saved: 1 });
    return dirs;
  }

  private allOptimizers(): readonly AdamW[] {
    return [...this.actorOptimizers, ...this.criticOptimizers];
  }

  /** Everything besides the weights needed to resume exactly: counters, cursor, streams, AdamW moments, buffer. */
  exportState(): CoLLMDCTrainerState {
    return this.snapshot(this.allOptimizers(), this.run.exportExtra());
  }

  /**
   * Restores a snapshot from `exportState`. Load the saved weights first: the agents' and critics'
   * models, and the value heads (pass them to the constructor).
   */
  importState(state: CoLLMDCTrainerState): void {
    this.restoreSnapshot(state, this.allOptimizers(), (extra) => ActorCriticRun.checkExtra(extra, this.agents.length));
    this.run.importExtra(state.extra, state.cursor.epoch * this.trainTasks.length + state.cursor.index);
  }

  /** Frees the optimizers' moments and the heads (models stay with the caller). */
  dispose(): void {
    for (const o of this.allOptimizers()) o.dispose();
    for (const c of this.critics) c.head.dispose();
  }
}
