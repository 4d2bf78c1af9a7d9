/**
 * CoLLM-DC — multi-agent actor-critic with decentralized critics (CoLLM paper; CoMLRL 1.3.6's IAC).
 *
 * Every agent i has an actor π_i and its own critic V_i (or Q_i) that sees only agent i's history
 * h_{i,t}: a separate critic LM with a value head (default), or a value head on the actor's own
 * backbone (`use_separate_critic: false`, with value clipping). Per training task:
 *
 *   1. Roll out an episode with the current actors. At turn t each agent observes o_{i,t}, samples
 *      a_{i,t} (K samples when single-turn), and we store h_{i,t}, m_t, a_{i,t}, the behaviour
 *      log-prob Σ log π_old(a_{i,t}|h_{i,t}) and V_i(h_{i,t}); the environment returns the joint
 *      reward r_t and o_{t+1}. The episode ends at the horizon, when the env says done, or when
 *      r_t > early_termination_threshold.
 *   2. One-step TD targets along each agent's trajectory from the stored values:
 *      y_{i,t} = r_t + γ·V_i(h_{i,t+1}), and y = r at the last step (no bootstrap); δ = y − V_i(h_{i,t}).
 *   3. Transitions go to the replay buffer. A full buffer (and the leftovers at epoch end) is
 *      updated: advantages δ z-scored per turn group and agent; for `update_epochs` passes, per
 *      turn group in ascending order, shuffled minibatches; per minibatch and agent
 *        actor:  −mean( min(ρ·A, clip(ρ, 1±c)·A) )   (ρ = π_θ/π_old; CoMLRL: −mean(A·log π))
 *        critic: value_loss_coef · mean (y − V_i(h))²  — a separate critic steps its own AdamW;
 *        a shared head adds it to the actor loss (value clipped around the stored value) and
 *        takes one joint step.
 *      The buffer is then empty: nothing is kept between flushes. During a critic warm-up
 *      (`critic_warmup_items`) only the critics step (a shared head: only the head, not the backbone).
 *
 * With `update_epochs: 1, use_importance_ratio: false, use_global_info: false` (see `comlrl136()`)
 * this is CoMLRL 1.3.6's IAC update. Differences (README): separate critics read the
 * observation text with their own tokenizer; non-finite losses raise; streams are seeded.
 */
import { join } from 'node:path';
import { agentView, type JointTransition } from '../src/buffer/replay.js';
import { tdTargets } from '../src/buffer/targets.js';
import { createCriticHead, headSpecFromHiddenDim, saveCriticHead, type CriticHead } from '../src/critic/heads.js';
import { decentralizedCriticIds, globalInfoPrefixIds, sharedHeadIds } from '../src/critic/inputs.js';
import { ValueModel, type CriticLM } from '../src/critic/value-model.js';
import type { GlobalInfo } from '../src/decpomdp/types.js';
import type { AdamW } from '../src/optim/adamw.js';
import { rngFor } from '../src/util/rng.js';
import { parseCoLLMDCConfig, type CoLLMDCConfig, type CoLLMDCConfigInput } from './actor-critic-config.js';
import {
  ActorCriticTrainer,
  predictDistinct,
  turnGroupAdvantages,
  type ActorCriticInputs,
  type ActorCriticStateExtra,
  type TransitionCritic,
  type TurnRecord,
  type TurnSamples,
} from './common/ac-trainer.js';
import { actorStep, criticStep, sharedStep, type ActorRow, type RatioRecorder, type ValueRow } from './common/actor-critic.js';
import type { EvalEpisode } from './common/eval.js';
import { encodePrompt } from './common/generation.js';
import type { MetricRecord } from './common/metrics.js';
import { agentDir, saveAgents } from './common/save.js';
import type { TrainerState } from './common/state.js';

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
export type CoLLMDCTrainerState = TrainerState<ActorCriticStateExtra>;

/** What the agents' critics stored at one turn. */
interface DecentralizedValues {
  /** ids[i][k]: agent i's critic input for its k-th sample. */
  ids: number[][][];
  /** values[i][k]: V_i(h_{i,t}) (or Q_i with the k-th action). */
  values: number[][];
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
export class CoLLMDCTrainer<T, S> extends ActorCriticTrainer<T, S, CoLLMDCConfig, DecentralizedValues> {
  /** Agent i's critic: a separate LM + head, or a head on agent i's backbone. */
  readonly critics: readonly ValueModel[];
  /** One AdamW per agent (in shared-head mode it also trains the head). */
  readonly actorOptimizers: readonly AdamW[];
  /** One AdamW per separate critic (empty with shared heads). */
  readonly criticOptimizers: readonly AdamW[];

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
  }

  // -------------------------------------------------------------------------------------------
  // 1. Rollout: each agent's critic values its own history.
  //    (The actors' sampling and the joint steps are shared: `rollout` in common/ac-trainer.ts.)
  // -------------------------------------------------------------------------------------------

  /** V_i(h_{i,t}) (or Q_i(h_{i,t}, a_{i,t}^k)) of every agent's K samples, from agent i's critic alone. */
  protected async storeCritic(turn: TurnSamples): Promise<DecentralizedValues> {
    const ids: number[][][] = [];
    const values: number[][] = [];
    for (let i = 0; i < this.agents.length; i++) {
      const group = turn.groups[i];
      const rows = group.ids.map((c, j) => this.criticInput(i, turn.observations[i], turn.promptIds[i], group.texts[j], c, turn.globalInfo));
      ids.push(rows);
      values.push(await this.timer.time('critic', () => predictDistinct((r) => this.critics[i].predict(r), rows)));
    }
    return { ids, values };
  }

  /** Agent i's critic input at one step (see src/critic/inputs.ts for the layouts). */
  private criticInput(i: number, observation: string, promptIds: number[], text: string, completionIds: number[], m: GlobalInfo): number[] {
    const { config } = this;
    const critic = this.critics[i];
    const q = config.critic_type === 'q';
    const withM = config.use_global_info ? m : null;
    if (critic.sharesBackbone) {
      return sharedHeadIds(promptIds, q ? completionIds : null, config.critic_max_length, withM ? globalInfoPrefixIds(critic.tokenizer, withM) : null);
    }
    return decentralizedCriticIds(critic.tokenizer, { prompt: observation, action: q ? text : null, globalInfo: withM }, config.critic_max_length);
  }

  // -------------------------------------------------------------------------------------------
  // 2. One-step TD targets along each agent's trajectory.
  // -------------------------------------------------------------------------------------------

  /** Per agent i: y_{i,t} = r_t + γ·V_i(h_{i,t+1}) from its own stored values (no bootstrap at the end). */
  protected criticTargets(turns: readonly TurnRecord<S, DecentralizedValues>[], k: number, rewards: readonly number[]): TransitionCritic[] {
    const targets = this.agents.map((_, i) => tdTargets(rewards, turns.map((tr) => tr.critic.values[i][k]), this.config.discount));
    return turns.map((tr, t) => ({
      agents: this.agents.map((_, i) => ({ criticIds: tr.critic.ids[i][k], value: tr.critic.values[i][k], target: targets[i][t] })),
      joint: null,
    }));
  }

  // -------------------------------------------------------------------------------------------
  // 3. Update from the replay buffer.
  // -------------------------------------------------------------------------------------------

  /** One update (step 3) of every actor and critic on `transitions` (see the module comment). */
  async updateFrom(transitions: readonly JointTransition[]): Promise<MetricRecord> {
    if (transitions.length === 0) return {};
    const { agents, config } = this;
    const metrics = this.flushMetrics();

    // Advantages δ = y − V_old, z-scored within each turn group, per agent.
    const advantages = agents.map((_, i) =>
      turnGroupAdvantages(
        agentView(transitions, i).map((s) => ({ turn: s.turn, delta: s.step.target - s.step.value })),
        config.advantage_normalization,
      ),
    );

    // Critic warm-up (`critic_warmup_items`): only the critics (a shared head: only the head) step.
    const actorsFrozen = this.inCriticWarmup;

    for (const mb of this.minibatchPlan(transitions)) {
      for (let i = 0; i < agents.length; i++) {
        const label = `CoLLM-DC agent ${i} ('${agents[i].name}'), turn ${mb.turn + 1}, epoch ${mb.epoch + 1}`;
        const rows = mb.indices.map((j) => {
          const s = transitions[j].agents[i];
          return {
            ...this.actorRow(i, s, advantages[i][j], mb.indices.length),
            criticIds: s.criticIds,
            target: s.target,
            oldValue: s.value,
          } satisfies ActorRow & ValueRow;
        });
        const recorder: RatioRecorder = { ratios: [] };
        if (actorsFrozen) {
          // Warm-up: the critic's own variables only (for a shared head: the head, through the
          // actor's AdamW, whose per-parameter steps leave the backbone untouched). The actor is
          // unchanged, so its policy version is too.
          const shared = this.critics[i].sharesBackbone;
          const c = await this.timer.time('critic_training', () =>
            criticStep(
              this.critics[i],
              shared ? this.actorOptimizers[i] : this.criticOptimizers[i],
              rows,
              config.value_loss_coef,
              shared ? config.value_clip_range : null,
              this.stepOptions(`${label} critic`),
            ),
          );
          metrics.loss(mb.turn, i, 'value_loss', c.loss);
          metrics.gradNorm(i, 'critic_grad_norm', c.gradNorm);
          this.optimizerSteps++;
          continue;
        }
        if (this.critics[i].sharesBackbone) {
          // Shared head: actor loss + coef · clipped value loss, one backward, one step.
          const r = await this.timer.time('training', () =>
            sharedStep(this.critics[i], this.actorOptimizers[i], rows, this.ratioSettings, config.value_loss_coef, config.value_clip_range, this.stepOptions(label), recorder),
          );
          metrics.loss(mb.turn, i, 'policy_loss', r.policyLoss);
          metrics.loss(mb.turn, i, 'value_loss', r.valueLoss);
          metrics.gradNorm(i, 'grad_norm', r.gradNorm);
          this.optimizerSteps++;
        } else {
          // Separate critic: the actor steps on its loss, the critic on coef · (y − V)².
          const a = await this.timer.time('training', () => actorStep(agents[i].model, this.actorOptimizers[i], rows, this.ratioSettings, this.stepOptions(label), recorder));
          const c = await this.timer.time('critic_training', () =>
            criticStep(this.critics[i], this.criticOptimizers[i], rows, config.value_loss_coef, null, this.stepOptions(`${label} critic`)),
          );
          metrics.loss(mb.turn, i, 'policy_loss', a.loss);
          metrics.loss(mb.turn, i, 'value_loss', c.loss);
          metrics.gradNorm(i, 'grad_norm', a.gradNorm);
          metrics.gradNorm(i, 'critic_grad_norm', c.gradNorm);
          this.optimizerSteps += 2;
        }
        this.policyVersions[i]++;
        metrics.ratio(mb.turn, recorder.ratios);
      }
    }
    return this.finishUpdate(metrics, transitions);
  }

  // -------------------------------------------------------------------------------------------
  // Evaluation.
  // -------------------------------------------------------------------------------------------

  /** V_i(h_{i,t}) along an eval episode, one list per agent. */
  protected async evalValues(ep: EvalEpisode<T, S>): Promise<number[][]> {
    const perAgent: number[][] = [];
    for (let i = 0; i < this.agents.length; i++) {
      const ids = ep.observations.map((obs, t) => {
        const promptIds = encodePrompt(this.agents[i], obs[i], this.env.rendering?.(ep.states[t], i));
        return this.criticInput(i, obs[i], promptIds, ep.completions[t][i], ep.completionIds[t][i], this.env.globalInfo(ep.states[t]));
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

  protected allOptimizers(): readonly AdamW[] {
    return [...this.actorOptimizers, ...this.criticOptimizers];
  }

  /** Frees the optimizers' moments and the heads (models stay with the caller). */
  dispose(): void {
    for (const o of this.allOptimizers()) o.dispose();
    for (const c of this.critics) c.head.dispose();
  }
}
