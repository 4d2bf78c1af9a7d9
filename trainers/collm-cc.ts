/**
 * CoLLM-CC — multi-agent actor-critic with a centralized critic (CoLLM paper; CoMLRL 1.3.6's MAAC).
 *
 * Decentralized actors π_i act on their own histories h_{i,t}; one critic V(h_t) (or Q(h_t, a_t))
 * reads the joint history — every agent's observation, m_t (turn, horizon, last reward / max) and,
 * for Q, the joint action — in the text layout of src/critic/inputs.ts, with its own LM, tokenizer
 * and learning rate. Per training task:
 *
 *   1. Roll out an episode with the current actors. At turn t each agent observes o_{i,t} and
 *      samples a_{i,t} (K samples when single-turn); we store h_t, m_t, a_t, each actor's
 *      behaviour log-prob Σ log π_old(a_{i,t}|h_{i,t}) and the critic's V(h_t); the environment
 *      returns the joint reward r_t and o_{t+1}. The episode ends at the horizon, when the env says
 *      done, or when r_t > early_termination_threshold.
 *   2. One-step TD targets from the stored joint values: y_t = r_t + γ·V(h_{t+1}), y = r at the
 *      last step (no bootstrap); δ_t = y_t − V(h_t), the same advantage for every agent.
 *   3. Transitions go to the replay buffer. A full buffer (and the leftovers at epoch end) is
 *      updated: δ z-scored per turn group; for `update_epochs` passes, per turn group in ascending
 *      order, shuffled minibatches of joint transitions; per minibatch
 *        every actor i: −mean( min(ρ_i·A, clip(ρ_i, 1±c)·A) )   (CoMLRL: −mean(A·log π_i)),
 *        then the critic ONCE: value_loss_coef · mean (y − V(h))² on the joint inputs.
 *      The buffer is then empty: nothing is kept between flushes. During a critic warm-up
 *      (`critic_warmup_items`) only the critic steps.
 *
 * Differences from CoMLRL 1.3.6 (README): the critic is updated once per joint minibatch, not once
 * per agent buffer (CoMLRL steps it N times on duplicated inputs); it reads m_t and uses the
 * importance ratio unless `comlrl136()` turns them off; it encodes its input with its own tokenizer
 * (CoMLRL: agent 0's); non-finite losses raise; streams are seeded.
 */
import { join } from 'node:path';
import type { JointTransition } from '../src/buffer/replay.js';
import { tdTargets } from '../src/buffer/targets.js';
import { createCriticHead, headSpecFromHiddenDim, saveCriticHead, type CriticHead } from '../src/critic/heads.js';
import { centralizedCriticIds } from '../src/critic/inputs.js';
import { ValueModel, type CriticLM } from '../src/critic/value-model.js';
import type { GlobalInfo } from '../src/decpomdp/types.js';
import type { AdamW } from '../src/optim/adamw.js';
import { rngFor } from '../src/util/rng.js';
import { parseCoLLMCCConfig, type CoLLMCCConfig, type CoLLMCCConfigInput } from './actor-critic-config.js';
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
import { actorStep, criticStep, type RatioRecorder } from './common/actor-critic.js';
import type { EvalEpisode } from './common/eval.js';
import type { MetricRecord } from './common/metrics.js';
import { saveAgents } from './common/save.js';
import type { TrainerState } from './common/state.js';

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
export type CoLLMCCTrainerState = TrainerState<ActorCriticStateExtra>;

/** What the centralized critic stored at one turn. */
interface JointValues {
  /** ids[k]: the critic input of joint sample k. */
  ids: number[][];
  /** values[k]: V(h_t) (or Q(h_t, a_t^k)). */
  values: number[];
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
export class CoLLMCCTrainer<T, S> extends ActorCriticTrainer<T, S, CoLLMCCConfig, JointValues> {
  /** The centralized critic (its own LM + head + tokenizer). */
  readonly critic: ValueModel;
  /** One AdamW per actor. */
  readonly actorOptimizers: readonly AdamW[];
  /** The critic's AdamW. */
  readonly criticOptimizer: AdamW;

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
  }

  // -------------------------------------------------------------------------------------------
  // 1. Rollout: the centralized critic values the joint history.
  //    (The actors' sampling and the joint steps are shared: `rollout` in common/ac-trainer.ts.)
  // -------------------------------------------------------------------------------------------

  /** V(h_t) of the joint history (for Q, one value per joint action k). */
  protected async storeCritic(turn: TurnSamples): Promise<JointValues> {
    const ids = Array.from({ length: this.config.num_generations }, (_, j) => this.criticInput(turn.observations, turn.groups.map((g) => g.texts[j]), turn.globalInfo));
    const values = await this.timer.time('critic', () => predictDistinct((rows) => this.critic.predict(rows), ids));
    return { ids, values };
  }

  /** The centralized critic's input ids at one joint step (layout in src/critic/inputs.ts). */
  private criticInput(observations: readonly string[], actions: readonly string[], m: GlobalInfo): number[] {
    const { config } = this;
    return centralizedCriticIds(
      this.critic.tokenizer,
      { observations, actions: config.critic_type === 'q' ? actions : null, globalInfo: config.use_global_info ? m : null },
      config.critic_max_length,
    );
  }

  // -------------------------------------------------------------------------------------------
  // 2. One-step TD targets from the joint values.
  // -------------------------------------------------------------------------------------------

  /** y_t = r_t + γ·V(h_{t+1}) from the stored joint values (no bootstrap at the end); every agent gets the same. */
  protected criticTargets(turns: readonly TurnRecord<S, JointValues>[], k: number, rewards: readonly number[]): TransitionCritic[] {
    const targets = tdTargets(rewards, turns.map((tr) => tr.critic.values[k]), this.config.discount);
    return turns.map((tr, t) => ({
      agents: this.agents.map(() => ({ criticIds: [], value: tr.critic.values[k], target: targets[t] })),
      joint: { criticIds: tr.critic.ids[k], value: tr.critic.values[k], target: targets[t] },
    }));
  }

  // -------------------------------------------------------------------------------------------
  // 3. Update from the replay buffer.
  // -------------------------------------------------------------------------------------------

  /** One update (step 3) on `transitions`: every actor, then the critic once per joint minibatch. */
  async updateFrom(transitions: readonly JointTransition[]): Promise<MetricRecord> {
    if (transitions.length === 0) return {};
    const { agents, config } = this;
    const metrics = this.flushMetrics();

    // One advantage per joint transition, δ = y − V(h) from the shared critic, z-scored per turn group.
    const advantages = turnGroupAdvantages(
      transitions.map((tr) => ({ turn: tr.turn, delta: jointOf(tr).target - jointOf(tr).value })),
      config.advantage_normalization,
    );

    // Critic warm-up (`critic_warmup_items`): the actors do not step; the critic alone learns.
    const actorsFrozen = this.inCriticWarmup;

    for (const mb of this.minibatchPlan(transitions)) {
      // Every actor on its own part of the joint minibatch.
      for (let i = 0; i < (actorsFrozen ? 0 : agents.length); i++) {
        const label = `CoLLM-CC agent ${i} ('${agents[i].name}'), turn ${mb.turn + 1}, epoch ${mb.epoch + 1}`;
        const rows = mb.indices.map((j) => this.actorRow(i, transitions[j].agents[i], advantages[j], mb.indices.length));
        const recorder: RatioRecorder = { ratios: [] };
        const a = await this.timer.time('training', () => actorStep(agents[i].model, this.actorOptimizers[i], rows, this.ratioSettings, this.stepOptions(label), recorder));
        this.policyVersions[i]++;
        this.optimizerSteps++;
        metrics.loss(mb.turn, i, 'policy_loss', a.loss);
        metrics.gradNorm(i, 'grad_norm', a.gradNorm);
        metrics.ratio(mb.turn, recorder.ratios);
      }
      // The centralized critic: once per joint minibatch (CoMLRL: once per agent).
      const valueRows = mb.indices.map((j) => {
        const joint = jointOf(transitions[j]);
        return { criticIds: joint.criticIds, target: joint.target, oldValue: joint.value };
      });
      const c = await this.timer.time('critic_training', () =>
        criticStep(this.critic, this.criticOptimizer, valueRows, config.value_loss_coef, null, this.stepOptions(`CoLLM-CC critic, turn ${mb.turn + 1}, epoch ${mb.epoch + 1}`)),
      );
      this.optimizerSteps++;
      metrics.loss(mb.turn, null, 'value_loss', c.loss);
      metrics.gradNorm(null, 'grad_norm', c.gradNorm);
    }
    return this.finishUpdate(metrics, transitions);
  }

  // -------------------------------------------------------------------------------------------
  // Evaluation.
  // -------------------------------------------------------------------------------------------

  /** V(h_t) along an eval episode (one list: the critic is shared). */
  protected async evalValues(ep: EvalEpisode<T, S>): Promise<number[][]> {
    const ids = ep.observations.map((obs, t) => this.criticInput(obs, ep.completions[t], this.env.globalInfo(ep.states[t])));
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

  protected allOptimizers(): readonly AdamW[] {
    return [...this.actorOptimizers, this.criticOptimizer];
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
