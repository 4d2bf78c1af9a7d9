/**
 * CoLLM — multi-agent actor-critic for LLM agents (CoLLM paper, Algorithm 1), over a
 * {@link CriticSet}: decentralized critics (CoLLM-DC, decentralized.ts) or one centralized critic
 * (CoLLM-CC, centralized.ts). Decentralized actors π_i act on their own histories h_{i,t}. The
 * file reads in the order of Algorithm 1, one step per section below:
 *
 *   1. `rollout`: play an episode with the current actors. At turn t each agent
 *      observes o_{i,t} and samples a_{i,t} (K samples when single-turn); we keep each actor's
 *      behaviour log-prob Σ log π_old(a_{i,t}|h_{i,t}), every critic's input at h_t and h_{t+1} and
 *      its value then; the environment returns the joint reward r_t and o_{t+1}. The episode ends at
 *      the horizon, when the env says done, or when r_t > early_termination_threshold. Transitions
 *      go to the replay buffer; a full buffer (and the leftovers at epoch end) is one `update`.
 *   2. `criticEstimates`: at every update epoch, per critic, from the CURRENT critic
 *      (Eq. 5; `recompute_targets: false` keeps the rollout-time values, CoMLRL 1.3.6):
 *      y_t = r_t + γ·V(h_{t+1}), y = r at the episode's last step (comlrl's `critic_target`: or a
 *      Monte-Carlo, n-step or TD(λ) return over the episode's steps in the flush, bootstrapped from
 *      the critic where the flush cut the episode); δ_t = y_t − V(h_t) (a Q critic:
 *      Q − the turn group's mean, `q_advantage`), z-scored per turn group. Agent i trains on the
 *      advantage of its critic (`slotOf(i)`: its own, or the centralized one). Each update also
 *      logs how well every critic predicts the returns (diagnostics.ts).
 *   3. `updateFrom`: for `update_epochs` passes, per turn group in ascending order,
 *      shuffled minibatches of joint transitions; per minibatch
 *        every actor i: −mean( min(ρ_i·A, clip(ρ_i, 1±c)·A) )   (ρ = π_θ/π_old; CoMLRL: −mean(A·log π)),
 *          then the critic it owns (decentralized): value_loss_coef · mean max((y − V)², (y − V_clip)²),
 *          V_clip within ±value_clip_range of the value at the flush's start (the paper's
 *          advantage clip) — a head on the actor's backbone instead joins the actor's loss for one step;
 *        then a centralized critic, once.
 *      The buffer is then empty. During a critic warm-up (`critic_warmup_items`) only the critics
 *      step (a head on an actor: only the head). `update_order: agent` (CoMLRL) walks the buffer
 *      agent by agent instead, each actor step followed by its critic's (the centralized critic
 *      then steps once per agent).
 *
 * Differences from CoMLRL (docs/differences.md): the paper-aligned options above unless
 * `comlrlCompatible()` turns them off (then one update equals CoMLRL's, scripts/comlrl-parity.mjs);
 * non-finite losses raise; streams are seeded.
 */
import { planMinibatches, type JointTransition } from '../../src/buffer/replay.js';
import { segmentTargets, type CriticTarget } from '../../src/buffer/targets.js';
import type { Agent } from '../../src/decpomdp/agent.js';
import { globalFeaturesOf } from '../../src/decpomdp/features.js';
import type { AdamW } from '../../src/optim/adamw.js';
import { rngFor, type Rng } from '../../src/util/rng.js';
import type { EvalEpisode } from '../core/eval.js';
import { encodePrompt } from '../core/generation.js';
import type { MetricRecord } from '../core/metrics.js';
import { saveMergedModels, type SaveOptions } from '../core/save.js';
import { ReferenceKlTracker } from '../core/reference-kl.js';
import { TrainerBase, type TrainerNames } from '../core/trainer.js';
import { criticTargetOf, type ActorCriticConfig } from './config.js';
import type { CriticSet, CriticView } from './critic-set.js';
import { criticDiagnostics } from './diagnostics.js';
import { FlushMetrics } from './metrics.js';
import { checkBufferedFeatures, checkHeadFeatures, criticFeatureSize, featureParts, storedFeatures } from './critic-features.js';
import { episodeTransitions, jointSteps, predictDistinct, sampleTurn, type PlayedTurn, type RolloutContext, type TurnSamples } from './rollout.js';
import {
  ActorCriticRun,
  estimates,
  flushTargets,
  evalRecord,
  type ActorCriticEvalResult,
  type ActorCriticInputs,
  type ActorCriticState,
  type CriticEstimates,
} from './run.js';
import { actorObjective, actorRow, actorStep, checkActorRows, criticStep, sharedStep, type ActorRow, type RatioRecorder, type UpdateStepOptions, type ValueRow } from './steps.js';
import { jointStepOnSequenceLoss } from '../core/loss.js';
import type { JointLoraPasses } from '../../src/model/lora/joint.js';

/** One played turn with every critic's inputs and values per joint sample k: `[slot][k]`. */
interface CriticTurn<S> extends PlayedTurn<S> {
  readonly criticIds: number[][][];
  readonly values: number[][];
  /** Numeric m_t every head reads beside its input (`critic_global_features`), else null. */
  readonly features: number[] | null;
}

/** One minibatch of a flush's plan. */
type Minibatch = ReturnType<typeof planMinibatches>[number];

/** What one update keeps while it steps through its minibatches. */
interface Flush {
  readonly transitions: readonly JointTransition[];
  readonly metrics: FlushMetrics;
  readonly actorsFrozen: boolean;
  /** The critics' estimates at the flush's start (the value-clip anchor and the logged record). */
  first: CriticEstimates[] | null;
  /** The estimates of the update epoch being played. */
  current: { epoch: number; e: CriticEstimates[] } | null;
}

/**
 * Builds a trainer's critics (after the common checks, before any optimizer): heads come from
 * `rng`, the seeded init stream, and read `featureSize` global features beside h (0: none).
 */
export type CriticSetFactory<C> = (agents: readonly Agent[], config: C, rng: Rng, featureSize: number) => CriticSet;

/** The joint step of joint sample k of a played turn, as critics read it. */
function sampleView(samples: TurnSamples, k: number): CriticView {
  return {
    globalInfo: samples.globalInfo,
    observations: samples.observations,
    promptIds: (i) => samples.promptIds[i],
    actions: samples.groups.map((g) => g.texts[k]),
    actionIds: samples.groups.map((g) => g.ids[k]),
  };
}

/**
 * Trains n agents with CoLLM's actor-critic over a critic set (see the module comment).
 * {@link CoLLMDCTrainer} and {@link CoLLMCCTrainer} are this trainer with their critics.
 */
export class CoLLMTrainer<T, S, C extends ActorCriticConfig> extends TrainerBase<T, S, C> {
  /** The critics and what they read. */
  readonly criticSet: CriticSet;
  /** One AdamW per actor (with a head on its backbone, it trains the head too). */
  readonly actorOptimizers: readonly AdamW[];
  /** One AdamW per critic with its own (none for heads on the actors' backbones), in slot order. */
  readonly criticOptimizers: readonly AdamW[];
  /** The optimizer of each critic slot (an actor's for a head on its backbone). */
  private readonly slotOptimizers: readonly AdamW[];
  private readonly run: ActorCriticRun;
  /** Reference KL (config `reference_kl_enabled`), else null. */
  private readonly referenceKl: ReferenceKlTracker | null;
  /** What the critics regress on (config `critic_target`). */
  private readonly target: CriticTarget;
  /** Width of the numeric m_t every critic head reads (`critic_global_features`: the env's declared size), else 0. */
  readonly criticFeatureSize: number;

  constructor(names: TrainerNames, config: C, options: ActorCriticInputs<T, S>, critics: CriticSetFactory<C>) {
    super(names, config, options);
    const { agents } = this;
    this.criticFeatureSize = criticFeatureSize(names.label, config, options.env);
    const set = critics(agents, config, rngFor(config.seed, 'init'), this.criticFeatureSize);
    checkHeadFeatures(set, this.criticFeatureSize, names.label, options.env.name);
    this.criticSet = set;
    const headsOn = (i: number) => set.slots.filter((s) => s.sharesActor && s.owner === i).flatMap((s) => s.model.head.trainableVariables());
    this.actorOptimizers = agents.map((a, i) => this.adamW([...a.model.trainableVariables(), ...headsOn(i)], config.agent_learning_rate));
    const criticLr = config.critic_learning_rate ?? config.agent_learning_rate;
    const own = new Map(set.slots.flatMap((s, c) => (s.sharesActor ? [] : [[c, this.adamW(s.model.ownVariables(), criticLr, { kind: 'critic', index: c })] as const])));
    this.criticOptimizers = [...own.values()];
    this.slotOptimizers = set.slots.map((s, c) => own.get(c) ?? this.actorOptimizers[s.owner as number]);
    this.run = new ActorCriticRun(config.rollout_buffer_size, agents.length, options.rolloutMetrics);
    this.referenceKl = ReferenceKlTracker.of(config, agents);
    this.target = criticTargetOf(config);
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
   * every critic's inputs (at h_t and h_{t+1}), rollout-time values and targets, and the
   * behaviour log-probs (K joint samples when single-turn).
   */
  async rollout(task: T): Promise<JointTransition[]> {
    const { config, criticSet } = this;
    const ctx = this.rolloutContext();
    const episode = this.run.episodes++;
    const turns: CriticTurn<S>[] = [];
    let state: S | null = this.env.initialState(task);
    for (let t = 0; t < config.num_turns && state !== null; t++) {
      const samples = await sampleTurn(ctx, state, config.num_generations);
      // Each critic's input per joint sample k: its history so far (sample 0's path: multi-turn
      // plays K = 1), m_t, the observations, and for Q the k-th action(s).
      const history = config.critic_history === 'full' ? turns.map((tr) => sampleView(tr, 0)) : [];
      // Numeric m_t (`critic_global_features`): one vector per turn, beside every critic's input.
      const features = this.criticFeatureSize > 0 ? globalFeaturesOf(this.env, state) : null;
      const criticIds: number[][][] = [];
      const values: number[][] = [];
      for (let c = 0; c < criticSet.slots.length; c++) {
        const rows = samples.groups[0].ids.map((_, k) => criticSet.input(c, sampleView(samples, k), history));
        criticIds.push(rows);
        values.push(await this.timer.time('critic', () => this.predictValues(c, rows, features === null ? null : rows.map(() => features))));
      }
      const played: { steps: PlayedTurn<S>['steps']; next: S | null } = await jointSteps(ctx, state, samples, t, config.num_turns, config.early_termination_threshold);
      turns.push({ ...samples, steps: played.steps, criticIds, values, features });
      state = played.next;
    }
    // Rollout-time targets per critic from its own values over the whole episode (what
    // `recompute_targets: false` trains on; no flush has cut the episode yet).
    const k = turns[0].steps.length;
    const targets = criticSet.slots.map((_, c) =>
      Array.from({ length: k }, (_, j) =>
        segmentTargets(
          {
            rewards: turns.map((tr) => tr.steps[j].reward),
            values: turns.map((tr) => tr.values[c][j]),
            bootstrap: null,
          },
          this.target,
          config.discount,
        ),
      ),
    );
    return episodeTransitions(this.env, this.agents, episode, turns, this.run.policyVersions, config.discount, (t, j) =>
      criticSet.transitionParts(
        criticSet.slots.map((_, c) => ({
          criticIds: turns[t].criticIds[c][j],
          nextCriticIds: t + 1 < turns.length ? turns[t + 1].criticIds[c][j] : null,
          ...featureParts(turns, t),
          value: turns[t].values[c][j],
          target: targets[c][j][t],
        })),
        this.agents.length,
      ),
    );
  }

  // -------------------------------------------------------------------------------------------
  // 2. Targets and advantages from the current critics.
  // -------------------------------------------------------------------------------------------

  /**
   * Per critic: V(h_t), y_t and the advantage of every transition in a flush, from the current
   * critic when `recompute_targets` (the paper's Eq. 5), else the values and targets stored at rollout.
   */
  private async criticEstimates(transitions: readonly JointTransition[], epoch: number): Promise<CriticEstimates[]> {
    const out = await this.currentEstimates(transitions);
    const trace = this.trace;
    if (trace) {
      out.forEach((e, slot) =>
        trace({
          kind: 'critic_estimates',
          slot,
          epoch,
          turns: transitions.map((t) => t.turn),
          values: e.values,
          targets: e.targets,
          advantagesRaw: e.advantagesRaw,
          advantages: e.advantages,
        }),
      );
    }
    return out;
  }

  private async currentEstimates(transitions: readonly JointTransition[]): Promise<CriticEstimates[]> {
    const { config, criticSet } = this;
    const options = { normalize: config.advantage_normalization, qBaseline: config.critic_type === 'q' && config.q_advantage === 'baseline' };
    const out: CriticEstimates[] = [];
    for (let c = 0; c < criticSet.slots.length; c++) {
      const parts = transitions.map((tr) => criticSet.partOf(tr, c));
      if (!config.recompute_targets) {
        out.push(
          estimates(
            transitions,
            parts.map((p) => p.value),
            parts.map((p) => p.target),
            options,
          ),
        );
        continue;
      }
      // V(h_t) and V(h_{t+1}) in one pass (each distinct input once).
      const nexts = parts.filter((p) => p.nextCriticIds !== null);
      const rows = [...parts.map((p) => p.criticIds), ...nexts.map((p) => p.nextCriticIds as readonly number[])];
      const features = this.criticFeatureSize > 0 ? [...parts.map((p) => storedFeatures(p.criticFeatures)), ...nexts.map((p) => storedFeatures(p.nextCriticFeatures))] : null;
      const preds = await this.timer.time('critic', () => this.predictValues(c, rows, features));
      let q = parts.length;
      const next = parts.map((p) => (p.nextCriticIds === null ? null : preds[q++]));
      const values = preds.slice(0, parts.length);
      out.push(estimates(transitions, values, flushTargets(transitions, values, next, this.target, config.discount), options));
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
   * One update (steps 2–3) on `transitions`: per update epoch, targets and advantages from the
   * current critics; then per minibatch every actor (and the critic it owns), then a centralized
   * critic — or, with `update_order: agent` (CoMLRL), agent by agent over the whole buffer, each
   * actor step followed by its critic's step.
   */
  async updateFrom(transitions: readonly JointTransition[]): Promise<MetricRecord> {
    if (transitions.length === 0) return {};
    const { agents, config } = this;
    const flush: Flush = {
      transitions,
      metrics: new FlushMetrics(config.use_importance_ratio ? config.ratio_clip_range : null),
      // Critic warm-up (`critic_warmup_items`): the actors do not step; the critics alone learn.
      actorsFrozen: this.inCriticWarmup,
      first: null,
      current: null,
    };
    const plan = (): Minibatch[] =>
      planMinibatches(
        transitions.map((t) => t.turn),
        { batchSize: this.trainBatchSize, epochs: config.update_epochs, rng: this.minibatchRng },
      );
    if (config.update_order === 'agent') {
      for (let i = 0; i < agents.length; i++) {
        // Each agent's pass starts its own update epochs: from the current critic when targets are
        // recomputed; stored values are the same for every agent, so they are kept.
        if (config.recompute_targets) flush.current = null;
        for (const mb of plan()) {
          await this.estimatesFor(flush, mb);
          await this.agentStep(flush, mb, i);
          await this.centralizedCriticSteps(flush, mb);
        }
      }
    } else {
      for (const mb of plan()) {
        await this.estimatesFor(flush, mb);
        const joint = this.jointActors(flush);
        if (joint) await this.jointAgentSteps(joint, flush, mb);
        else for (let i = 0; i < agents.length; i++) await this.agentStep(flush, mb, i);
        // A centralized critic: once per joint minibatch (CoMLRL: once per agent), after the actors.
        await this.centralizedCriticSteps(flush, mb);
      }
    }

    const warmup: MetricRecord = flush.actorsFrozen ? { critic_warmup: 1 } : {};
    // Every agent's record shows its critic's estimates at the flush's start.
    const atStart = flush.first as CriticEstimates[];
    // Each critic's fit against the returns beside its fit against its own targets (diagnostics.ts).
    const diagnostics: MetricRecord = {};
    this.criticSet.slots.forEach((s, c) => Object.assign(diagnostics, criticDiagnostics(transitions, atStart[c], s.owner)));
    this.run.lastUpdate = {
      ...flush.metrics.record(
        transitions,
        agents.map((_, i) => atStart[this.criticSet.slotOf(i)]),
      ),
      ...diagnostics,
      ...this.run.userRolloutMetrics(transitions),
      ...this.referenceKl?.flushMetrics(transitions),
      ...warmup,
      optimizer_steps: this.optimizerSteps,
    };
    if (this.trainLogDue()) await this.logger?.log(this.envStep, { ...this.run.lastUpdate, epoch: this.cursor.epoch, ...this.learningRateMetrics(), ...this.timer.drain('time/') });
    return this.run.lastUpdate;
  }

  /** Step 2 at the start of every update epoch (stored values: the same every epoch). */
  private async estimatesFor(flush: Flush, mb: Minibatch): Promise<void> {
    if (flush.current !== null && flush.current.epoch === mb.epoch) return;
    const e = flush.current !== null && !this.config.recompute_targets ? flush.current.e : await this.criticEstimates(flush.transitions, mb.epoch);
    flush.current = { epoch: mb.epoch, e };
    flush.first ??= e;
  }

  /** Critic c's regression rows over a minibatch: its inputs, the targets y and the values at the flush's start. */
  private valueRows(flush: Flush, mb: Minibatch, c: number): ValueRow[] {
    const e = (flush.current as { e: CriticEstimates[] }).e;
    const anchor = flush.first as CriticEstimates[];
    return mb.indices.map((j) => {
      const part = this.criticSet.partOf(flush.transitions[j], c);
      const features = this.criticFeatureSize > 0 ? { features: storedFeatures(part.criticFeatures) } : {};
      return { criticIds: part.criticIds, target: e[c].targets[j], oldValue: anchor[c].values[j], ...features };
    });
  }

  /** Step 3 for actor i on one minibatch, with the critic it owns (a separate one after it, or a head joining its loss). */
  private async agentStep(flush: Flush, mb: Minibatch, i: number): Promise<void> {
    const { agents, config, criticSet } = this;
    const { metrics } = flush;
    const ratio = { useRatio: config.use_importance_ratio, clipRange: config.ratio_clip_range };
    const label = `${criticSet.label} agent ${i} ('${agents[i].name}'), turn ${mb.turn + 1}, epoch ${mb.epoch + 1}`;
    const owned = criticSet.slots.findIndex((s) => s.owner === i);
    if (flush.actorsFrozen) {
      // Warm-up: the critic's own variables only (a head on the actor: through the actor's
      // AdamW, whose per-parameter steps leave the backbone untouched). The actor is
      // unchanged, so its policy version is too.
      if (owned >= 0) await this.stepCritic(owned, this.valueRows(flush, mb, owned), `${label} critic`, mb.turn, metrics);
      return;
    }
    const rows = this.actorRows(flush, mb, i);
    const recorder: RatioRecorder = { ratios: [] };
    if (owned >= 0 && criticSet.slots[owned].sharesActor) {
      // A head on the actor's backbone: actor loss + coef · clipped value loss, one backward, one step.
      const v = this.valueRows(flush, mb, owned);
      const r = await this.timer.time('training', () =>
        sharedStep(
          criticSet.slots[owned].model,
          this.actorOptimizers[i],
          rows.map((row, q) => ({ ...row, ...v[q] })),
          ratio,
          config.value_loss_coef,
          this.valueClip(owned),
          this.stepOptions(label),
          recorder,
        ),
      );
      metrics.loss(mb.turn, i, 'policy_loss', r.policyLoss);
      metrics.loss(mb.turn, i, 'value_loss', r.valueLoss);
      metrics.gradNorm(i, 'grad_norm', r.gradNorm);
      this.optimizerSteps++;
      this.trace?.({ kind: 'policy_step', agent: i, turn: mb.turn, loss: r.policyLoss, gradNorm: r.gradNorm });
      this.traceCriticStep(owned, mb.turn, v, r.predictions, r.valueLoss, r.gradNorm);
    } else {
      // The actor steps on its loss; then the critic it owns on coef · (clipped) (y − V)².
      const a = await this.timer.time('training', () => actorStep(agents[i].model, this.actorOptimizers[i], rows, ratio, this.stepOptions(label), recorder));
      this.optimizerSteps++;
      this.trace?.({ kind: 'policy_step', agent: i, turn: mb.turn, loss: a.loss, gradNorm: a.gradNorm });
      metrics.loss(mb.turn, i, 'policy_loss', a.loss);
      const c = owned >= 0 ? await this.criticUpdate(owned, this.valueRows(flush, mb, owned), `${label} critic`, mb.turn) : null;
      if (c) metrics.loss(mb.turn, i, 'value_loss', c.loss);
      metrics.gradNorm(i, 'grad_norm', a.gradNorm);
      if (c) metrics.gradNorm(i, 'critic_grad_norm', c.gradNorm);
    }
    this.run.policyVersions[i]++;
    metrics.ratio(mb.turn, recorder.ratios);
  }

  /** Actor i's rows of a minibatch: its samples with their advantages under its critic. */
  private actorRows(flush: Flush, mb: Minibatch, i: number): ActorRow[] {
    const e = (flush.current as { e: CriticEstimates[] }).e;
    const { transitions } = flush;
    const slot = this.criticSet.slotOf(i);
    return mb.indices.map((j) => actorRow(transitions[j].agents[i], e[slot].advantages[j], this.run.policyVersions[i], mb.indices.length, this.config.reference_kl_coef));
  }

  /**
   * The joint passes the actors step in, when they may: LoRA agents on one base without dropout,
   * actors not frozen, and no critic head on an actor's backbone (whose loss joins the actor's).
   */
  private jointActors(flush: Flush): JointLoraPasses | null {
    const joint = this.joint;
    if (!joint?.trainable || flush.actorsFrozen || this.criticSet.slots.some((s) => s.sharesActor)) return null;
    return joint;
  }

  /**
   * Step 3 for every actor on one minibatch in joint passes, then each owned critic's step: each
   * actor's step is its own (its loss reaches only its adapter), and no critic reads an actor's
   * weights, so the order differs from {@link agentStep}'s but not the result.
   */
  private async jointAgentSteps(joint: JointLoraPasses, flush: Flush, mb: Minibatch): Promise<void> {
    const { agents, config, criticSet } = this;
    const { metrics } = flush;
    const ratio = { useRatio: config.use_importance_ratio, clipRange: config.ratio_clip_range };
    const recorders: RatioRecorder[] = agents.map(() => ({ ratios: [] }));
    const labels = agents.map((a, i) => `${criticSet.label} agent ${i} ('${a.name}'), turn ${mb.turn + 1}, epoch ${mb.epoch + 1}`);
    const parts = agents.map((_, i) => {
      const rows = this.actorRows(flush, mb, i);
      checkActorRows(rows, labels[i]);
      return { rows, loss: actorObjective(ratio, recorders[i]), optimizer: this.actorOptimizers[i], label: labels[i] };
    });
    const results = await this.timer.time('training', () => jointStepOnSequenceLoss(joint, parts, { maxGradNorm: config.max_grad_norm, chunkSize: config.scoring_batch_size }));
    for (let i = 0; i < agents.length; i++) {
      const a = results[i];
      this.optimizerSteps++;
      this.trace?.({ kind: 'policy_step', agent: i, turn: mb.turn, loss: a.loss, gradNorm: a.gradNorm });
      metrics.loss(mb.turn, i, 'policy_loss', a.loss);
      const owned = criticSet.slots.findIndex((s) => s.owner === i);
      const c = owned >= 0 ? await this.criticUpdate(owned, this.valueRows(flush, mb, owned), `${labels[i]} critic`, mb.turn) : null;
      if (c) metrics.loss(mb.turn, i, 'value_loss', c.loss);
      metrics.gradNorm(i, 'grad_norm', a.gradNorm);
      if (c) metrics.gradNorm(i, 'critic_grad_norm', c.gradNorm);
      this.run.policyVersions[i]++;
      metrics.ratio(mb.turn, recorders[i].ratios);
    }
  }

  /** One step of each critic no actor owns (the centralized critic) on a minibatch. */
  private async centralizedCriticSteps(flush: Flush, mb: Minibatch): Promise<void> {
    const { criticSet } = this;
    for (let c = 0; c < criticSet.slots.length; c++) {
      if (criticSet.slots[c].owner !== null) continue;
      await this.stepCritic(c, this.valueRows(flush, mb, c), `${criticSet.label} critic, turn ${mb.turn + 1}, epoch ${mb.epoch + 1}`, mb.turn, flush.metrics);
    }
  }

  /** One optimizer step of critic slot `c` alone, recorded under its owner (`critic_grad_norm`) or `critic/` (`grad_norm`). */
  private async stepCritic(c: number, rows: readonly ValueRow[], label: string, turn: number, metrics: FlushMetrics): Promise<void> {
    const owner = this.criticSet.slots[c].owner;
    const r = await this.criticUpdate(c, rows, label, turn);
    metrics.loss(turn, owner, 'value_loss', r.loss);
    metrics.gradNorm(owner, owner === null ? 'grad_norm' : 'critic_grad_norm', r.gradNorm);
  }

  /** Critic slot `c`'s step on coef · (clipped) (y − V)², counted as one optimizer step. */
  private async criticUpdate(c: number, rows: readonly ValueRow[], label: string, turn: number): Promise<{ loss: number; gradNorm: number }> {
    const r = await this.timer.time('critic_training', () =>
      criticStep(this.criticSet.slots[c].model, this.slotOptimizers[c], rows, this.config.value_loss_coef, this.valueClip(c), this.stepOptions(label)),
    );
    this.optimizerSteps++;
    this.traceCriticStep(c, turn, rows, r.predictions, r.loss, r.gradNorm);
    return r;
  }

  private traceCriticStep(slot: number, turn: number, rows: readonly ValueRow[], values: readonly number[], valueLoss: number, gradNorm: number): void {
    this.trace?.({ kind: 'critic_step', slot, turn, criticIds: rows.map((r) => r.criticIds), values, targets: rows.map((r) => r.target), valueLoss, gradNorm });
  }

  /** A head on an actor always clips its value (CoMLRL); a critic with its own LM when `value_clip_separate` (the paper). */
  private valueClip(c: number): number | null {
    return this.criticSet.slots[c].sharesActor || this.config.value_clip_separate ? this.config.value_clip_range : null;
  }

  private stepOptions(label: string): UpdateStepOptions {
    return { maxGradNorm: this.config.max_grad_norm, chunkSize: this.config.scoring_batch_size, label };
  }

  /** Critic slot c's values of some inputs (with their numeric m_t when the heads read it), each distinct input once. */
  private predictValues(c: number, rows: readonly (readonly number[])[], features: readonly (readonly number[])[] | null): Promise<number[]> {
    const model = this.criticSet.slots[c].model;
    return predictDistinct((r, f) => model.predict(r, null, f), rows, features);
  }

  private rolloutContext(): RolloutContext<T, S> {
    return { agents: this.agents, env: this.env, settings: this.settings, rng: this.samplingRng, timer: this.timer, label: this.names.label, referenceKl: this.referenceKl, sampler: this.sampler, joint: this.jointPasses };
  }

  // -------------------------------------------------------------------------------------------
  // Evaluation.
  // -------------------------------------------------------------------------------------------

  /**
   * Plays the first `eval_num_samples` eval tasks along one path (one completion per agent per
   * turn, greedy if `eval_greedy`, early termination as in training) and values every step with
   * the critics. The eval stream restarts from the seed, so evaluations differ only by the weights.
   */
  async evaluate(): Promise<ActorCriticEvalResult<T, S>> {
    const t0 = performance.now();
    const episodes = await this.playEvalEpisodes(this.config.early_termination_threshold);
    const metrics = await evalRecord(episodes, (ep) => this.evalValues(ep), this.config.discount, this.evalCallbacks, this.target);
    metrics['eval/time_s'] = (performance.now() - t0) / 1000;
    await this.logger?.log(this.envStep, metrics);
    return { envStep: this.envStep, metrics, episodes };
  }

  /** Every critic's values along an eval episode, one list per slot. */
  private async evalValues(ep: EvalEpisode<T, S>): Promise<number[][]> {
    const { criticSet } = this;
    const views = ep.observations.map((observations, t): CriticView => {
      const prompts = new Map<number, number[]>();
      return {
        globalInfo: this.env.globalInfo(ep.states[t]),
        observations,
        promptIds: (i) => {
          let p = prompts.get(i);
          if (p === undefined) prompts.set(i, (p = encodePrompt(this.agents[i], observations[i], this.env.rendering?.(ep.states[t], i))));
          return p;
        },
        actions: ep.completions[t],
        actionIds: ep.completionIds[t],
      };
    });
    const full = this.config.critic_history === 'full';
    const features = this.criticFeatureSize > 0 ? views.map((_, t) => globalFeaturesOf(this.env, ep.states[t])) : null;
    const out: number[][] = [];
    for (let c = 0; c < criticSet.slots.length; c++) {
      const ids = views.map((view, t) => criticSet.input(c, view, full ? views.slice(0, t) : []));
      out.push(await criticSet.slots[c].model.predict(ids, null, features));
    }
    return out;
  }

  // -------------------------------------------------------------------------------------------
  // Saving and resuming.
  // -------------------------------------------------------------------------------------------

  /**
   * The critics, where their set puts them (`criticSet.layout(dir)`), with merged LoRA critics as
   * asked (see {@link SaveOptions}): the critic directories (none for heads on the actors).
   */
  protected override async saveOwnModels(dir: string, options: SaveOptions): Promise<string[]> {
    const { criticSet } = this;
    const critics = await criticSet.save(dir);
    if (options.merged?.critics) await saveMergedModels(criticSet.layout(dir).critics.map((d, c) => ({ model: criticSet.slots[c].model.backbone, tokenizer: criticSet.slots[c].model.tokenizer, dir: d })), options.dtype);
    return critics;
  }

  private allOptimizers(): readonly AdamW[] {
    return [...this.actorOptimizers, ...this.criticOptimizers];
  }

  /** Everything besides the weights needed to resume exactly: counters, cursor, streams, AdamW moments, buffer. */
  exportState(): ActorCriticState {
    return this.snapshot(this.allOptimizers(), this.run.exportExtra());
  }

  /**
   * Restores a snapshot from `exportState`. Load the saved weights first: the agents' and critics'
   * models, and the value heads (pass them to the constructor).
   */
  importState(state: ActorCriticState): void {
    this.restoreSnapshot(state, this.allOptimizers(), (extra) => {
      ActorCriticRun.checkExtra(extra, this.agents.length);
      checkBufferedFeatures(extra.buffer, this.criticSet, this.criticFeatureSize, this.names.label);
    });
    this.run.importExtra(state.extra, state.cursor.epoch * this.trainTasks.length + state.cursor.index);
  }

  /** Frees the optimizers' moments and the heads (models stay with the caller). */
  dispose(): void {
    for (const o of this.allOptimizers()) o.dispose();
    for (const s of this.criticSet.slots) s.model.head.dispose();
    this.referenceKl?.dispose();
  }
}
