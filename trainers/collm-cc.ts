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
 *      The buffer is then empty: nothing is kept between flushes.
 *
 * Differences from CoMLRL 1.3.6 (README): the critic is updated once per joint minibatch, not once
 * per agent buffer (CoMLRL steps it N times on duplicated inputs); it reads m_t and uses the
 * importance ratio unless `comlrl136()` turns them off; it encodes its input with its own tokenizer
 * (CoMLRL: agent 0's); non-finite losses raise; streams are seeded.
 */
import { join } from 'node:path';
import { planMinibatches, ReplayBuffer, type AgentTransition, type JointTransition } from '../src/buffer/replay.js';
import { discountedReturns, tdTargets } from '../src/buffer/targets.js';
import { createCriticHead, headSpecFromHiddenDim, saveCriticHead, type CriticHead } from '../src/critic/heads.js';
import { centralizedCriticIds } from '../src/critic/inputs.js';
import { ValueModel, type CriticLM } from '../src/critic/value-model.js';
import type { Agent } from '../src/decpomdp/agent.js';
import type { GlobalInfo, LLMDecPOMDP } from '../src/decpomdp/types.js';
import { AdamW } from '../src/optim/adamw.js';
import { createRng, rngFor, type Rng } from '../src/util/rng.js';
import { parseCoLLMCCConfig, type CoLLMCCConfig, type CoLLMCCConfigInput } from './actor-critic-config.js';
import { FlushMetrics } from './common/ac-metrics.js';
import {
  episodeSummary,
  EpochTurnStats,
  predictDistinct,
  rolloutStep,
  turnGroupAdvantages,
  type ActorCriticEvalResult,
  type ActorCriticStateExtra,
  type ActorCriticTrainOptions,
  type RolloutStep,
} from './common/ac-trainer.js';
import { actorStep, behaviourLogProbs, criticStep, type ActorRow, type RatioRecorder } from './common/actor-critic.js';
import { mean } from './common/advantage.js';
import { runEvalCallbacks, runEvalEpisodes, summarizeEval, type EvalCallback } from './common/eval.js';
import { encodePrompt, generateGroup, type CompletionGroup, type GenerationSettings } from './common/generation.js';
import { evalKey, PhaseTimer, turnKey, type MetricRecord, type MetricsSink } from './common/metrics.js';
import { saveAgents } from './common/save.js';
import { checkTrainerState, optimizerStates, restoreOptimizers, type DatasetCursor, type TrainerState } from './common/state.js';

/** Constructor arguments of {@link CoLLMCCTrainer}. */
export interface CoLLMCCTrainerOptions<T, S> {
  /** The n agents (separate model objects; vocabularies may differ). */
  agents: readonly Agent[];
  env: LLMDecPOMDP<T, S>;
  trainTasks: readonly T[];
  evalTasks?: readonly T[];
  /** The centralized critic's LM and tokenizer (required; not an actor's model). */
  critic: CriticLM;
  /** A value head to use instead of a fresh one (e.g. loaded with `loadCriticHead` to resume). */
  criticHead?: CriticHead;
  /** CoMLRL MAACConfig fields (snake_case) plus comlrl's extras; see actor-critic-config.ts. */
  config?: CoLLMCCConfigInput;
  /** User metrics over eval episodes, logged as `eval/<key>`. */
  evalCallbacks?: readonly EvalCallback<T, S>[];
  /**
   * User metrics over the transitions of each update (CoMLRL's `metrics_callback`), merged into
   * that update's record under `rollout/<key>`.
   */
  rolloutMetrics?: (transitions: readonly JointTransition[]) => Record<string, number>;
  /** Receives train and eval metrics at step = env_step. */
  logger?: MetricsSink;
}

/** A CoLLM-CC trainer snapshot. */
export type CoLLMCCTrainerState = TrainerState<ActorCriticStateExtra>;

/** What one turn of an episode produced. */
interface TurnRecord {
  globalInfo: GlobalInfo;
  observations: string[];
  promptIds: number[][];
  groups: CompletionGroup[];
  /** behaviour[i][k]. */
  behaviour: number[][];
  /** jointIds[k]: the critic input of joint sample k. */
  jointIds: number[][];
  /** values[k]: V(h_t) (or Q(h_t, a_t^k)). */
  values: number[];
  /** steps[k]. */
  steps: RolloutStep<unknown>[];
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
export class CoLLMCCTrainer<T, S> {
  /** The validated config with defaults. */
  readonly config: CoLLMCCConfig;
  readonly agents: readonly Agent[];
  readonly env: LLMDecPOMDP<T, S>;
  /** The centralized critic (its own LM + head + tokenizer). */
  readonly critic: ValueModel;
  /** One AdamW per actor. */
  readonly actorOptimizers: readonly AdamW[];
  /** The critic's AdamW. */
  readonly criticOptimizer: AdamW;

  private readonly trainTasks: readonly T[];
  private readonly evalTasks: readonly T[];
  private readonly evalCallbacks: readonly EvalCallback<T, S>[];
  private readonly logger: MetricsSink | undefined;
  private readonly rolloutMetrics: ((transitions: readonly JointTransition[]) => Record<string, number>) | undefined;
  private readonly settings: GenerationSettings;
  private readonly trainBatchSize: number;
  private readonly timer = new PhaseTimer();
  private readonly epochStats = new EpochTurnStats();

  private samplingRng: Rng;
  private minibatchRng: Rng;
  private buffer: ReplayBuffer;
  private policyVersions: number[];
  private episodes = 0;
  private cursor: DatasetCursor = { epoch: 0, index: 0 };
  private envStep = 0;
  private optimizerSteps = 0;
  private lastLogEnvStep: number | null = null;
  private lastUpdate: MetricRecord = {};

  constructor(options: CoLLMCCTrainerOptions<T, S>) {
    const config = parseCoLLMCCConfig(options.config ?? {});
    const { agents, env, critic } = options;
    const n = agents.length;
    if (n < 1) throw new Error('CoLLMCCTrainer: agents must hold at least one agent');
    if (config.num_agents !== undefined && config.num_agents !== n) {
      throw new Error(`CoLLMCCTrainer: config num_agents is ${config.num_agents} but ${n} agents were given`);
    }
    if (env.numAgents !== n) throw new Error(`CoLLMCCTrainer: env '${env.name}' has ${env.numAgents} agents but ${n} agents were given`);
    if (config.num_turns > env.horizon) {
      throw new Error(`CoLLMCCTrainer: num_turns ${config.num_turns} exceeds env '${env.name}' horizon ${env.horizon}`);
    }
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < i; j++) {
        if (agents[i].model === agents[j].model) {
          throw new Error(`CoLLMCCTrainer: agents ${j} and ${i} share one model object; homogeneous agents must be separate copies`);
        }
      }
    }
    if (options.trainTasks.length === 0) throw new Error('CoLLMCCTrainer: trainTasks is empty');
    // CoMLRL: exactly one centralized critic is required.
    if (!critic) throw new Error('CoLLMCCTrainer: critic must be provided (exactly one centralized critic LM)');
    if (Array.isArray(critic)) throw new Error(`CoLLMCCTrainer: critics length ${(critic as unknown[]).length}: CoLLM-CC takes exactly one critic`);
    if (agents.some((a) => a.model === critic.model)) throw new Error("CoLLMCCTrainer: the critic is an actor's model; give the critic its own LM");

    this.config = config;
    this.agents = [...agents];
    this.env = env;
    this.trainTasks = options.trainTasks;
    this.evalTasks = options.evalTasks ?? [];
    this.evalCallbacks = options.evalCallbacks ?? [];
    this.logger = options.logger;
    this.rolloutMetrics = options.rolloutMetrics;
    this.settings = { maxNewTokens: config.max_new_tokens, temperature: config.temperature, topP: config.top_p, topK: config.top_k };
    this.trainBatchSize = config.train_batch_size ?? config.rollout_buffer_size;

    // Head: N(0, 0.02) from the seeded init stream.
    const base = headSpecFromHiddenDim(config.critic_value_head_hidden_dim);
    const spec = config.critic_head ? { ...base, type: config.critic_head } : base;
    const head = options.criticHead ?? createCriticHead(critic.model.hiddenSize, spec, rngFor(config.seed, 'init'));
    this.critic = new ValueModel(critic.model, head, critic.tokenizer, false);

    const adam = (lr: number) => ({ lr, betas: config.adam_betas, eps: config.adam_eps, weightDecay: config.weight_decay });
    this.actorOptimizers = agents.map((a) => new AdamW(a.model.trainableVariables(), adam(config.agent_learning_rate)));
    this.criticOptimizer = new AdamW(this.critic.ownVariables(), adam(config.critic_learning_rate ?? config.agent_learning_rate));

    this.samplingRng = rngFor(config.seed, 'sampling');
    this.minibatchRng = rngFor(config.seed, 'minibatch');
    this.buffer = new ReplayBuffer(config.rollout_buffer_size);
    this.policyVersions = agents.map(() => 0);
  }

  /** Joint transitions played so far (CoMLRL's `env_step`, the logging x-axis). */
  get envSteps(): number {
    return this.envStep;
  }

  /** Optimizer steps taken so far (actors and critic). */
  get updateSteps(): number {
    return this.optimizerSteps;
  }

  /** The next training item (epoch, index). */
  get datasetCursor(): DatasetCursor {
    return { ...this.cursor };
  }

  /** The metrics of the latest buffer flush (also sent to the logger when due). */
  get lastUpdateMetrics(): MetricRecord {
    return { ...this.lastUpdate };
  }

  /** Transitions waiting in the replay buffer. */
  get bufferedTransitions(): number {
    return this.buffer.size;
  }

  // -------------------------------------------------------------------------------------------
  // Training loop.
  // -------------------------------------------------------------------------------------------

  /**
   * Runs the remaining epochs from the current cursor: per task, eval when due, roll out one
   * episode, push its transitions and update on every full buffer; at epoch end flush the rest.
   */
  async train(options: ActorCriticTrainOptions = {}): Promise<void> {
    const { num_train_epochs: epochs, eval_interval: evalInterval } = this.config;
    let items = 0;
    while (this.cursor.epoch < epochs) {
      while (this.cursor.index < this.trainTasks.length) {
        if (options.maxItems !== undefined && items >= options.maxItems) return;
        const index = this.cursor.index;
        // CoMLRL evaluates when batch_idx % eval_interval == 0, i.e. also before each epoch's first item.
        if (evalInterval > 0 && this.evalTasks.length > 0 && index % evalInterval === 0) await this.evaluate();

        const transitions = await this.rollout(this.trainTasks[index]);
        this.envStep += transitions.length;
        this.epochStats.add(transitions);
        for (const tr of transitions) {
          if (this.buffer.push(tr)) await this.update();
        }

        this.cursor = { epoch: this.cursor.epoch, index: index + 1 };
        items++;
        await options.onItemEnd?.({ epoch: this.cursor.epoch, index, envStep: this.envStep });
      }
      // Epoch end: the leftovers are trained on too.
      if (this.buffer.size > 0) await this.update();
      await this.logger?.log(this.envStep, this.epochStats.drain());
      this.cursor = { epoch: this.cursor.epoch + 1, index: 0 };
    }
  }

  // -------------------------------------------------------------------------------------------
  // 1–2. Rollout and one-step TD targets.
  // -------------------------------------------------------------------------------------------

  /**
   * Plays one episode of `task` with the current actors and returns its joint transitions with the
   * critic's stored values, behaviour log-probs and TD targets (K joint samples when single-turn).
   */
  async rollout(task: T): Promise<JointTransition[]> {
    const { agents, env, config } = this;
    const k = config.num_generations;
    const episode = this.episodes++;
    const turns: TurnRecord[] = [];
    let state = env.initialState(task);
    for (let t = 0; t < config.num_turns; t++) {
      const globalInfo = env.globalInfo(state);
      const observations = agents.map((_, i) => env.observe(state, i));
      const promptIds = agents.map((a, i) => encodePrompt(a, observations[i]));

      // Every actor samples K completions and records its behaviour log-probs.
      const groups: CompletionGroup[] = [];
      const behaviour: number[][] = [];
      for (let i = 0; i < agents.length; i++) {
        const group = await this.timer.time('generation', () => generateGroup(agents[i], promptIds[i], k, this.settings, this.samplingRng));
        groups.push(group);
        behaviour.push(
          await this.timer.time('scoring', () => behaviourLogProbs(agents[i].model, group.ids.map(() => promptIds[i]), group.ids)),
        );
      }

      // The centralized critic values the joint history (and for Q the k-th joint action).
      const jointIds = Array.from({ length: k }, (_, j) => this.criticInput(observations, groups.map((g) => g.texts[j]), globalInfo));
      const values = await this.timer.time('critic', () => predictDistinct((rows) => this.critic.predict(rows), jointIds));

      // Joint action k = the k-th completion of every agent; one joint reward each. The episode
      // goes on after this turn unless it is the last, or the reward is above the threshold.
      const threshold = config.early_termination_threshold;
      const continues = (r: number) => t < config.num_turns - 1 && !(threshold !== null && r > threshold);
      const steps: RolloutStep<S>[] = [];
      for (let j = 0; j < k; j++) {
        const actions = groups.map((g) => g.texts[j]);
        steps.push(await this.timer.time('reward', () => rolloutStep(env, state, actions, continues, 'CoLLM-CC', t)));
      }
      turns.push({ globalInfo, observations, promptIds, groups, behaviour, jointIds, values, steps: steps as RolloutStep<unknown>[] });

      // Multi-turn plays K = 1: its single joint step decides whether the episode goes on.
      const last = steps[0];
      if (!continues(last.reward) || last.done || last.next === null) break;
      state = last.next;
    }
    return this.buildTransitions(episode, turns);
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

  /** Per joint sample k: y_t = r_t + γ·V(h_{t+1}) from the stored joint values (no bootstrap at the end). */
  private buildTransitions(episode: number, turns: TurnRecord[]): JointTransition[] {
    const { agents, config } = this;
    const out: JointTransition[] = [];
    const k = turns[0].steps.length;
    for (let j = 0; j < k; j++) {
      const rewards = turns.map((tr) => tr.steps[j].reward);
      const returns = discountedReturns(rewards, config.discount);
      const targets = tdTargets(rewards, turns.map((tr) => tr.values[j]), config.discount);
      turns.forEach((tr, t) => {
        const last = t === turns.length - 1;
        const step = tr.steps[j];
        const agentSteps: AgentTransition[] = agents.map((agent, i) => ({
          prompt: agent.tokenizer.decode(tr.promptIds[i]),
          observation: tr.observations[i],
          promptIds: tr.promptIds[i],
          completionIds: tr.groups[i].ids[j],
          action: tr.groups[i].texts[j],
          behaviourLogProb: tr.behaviour[i][j],
          policyVersion: this.policyVersions[i],
          criticIds: [],
          value: tr.values[j],
          target: targets[t],
          return: returns[t],
        }));
        out.push({
          episode,
          turn: t,
          generation: j,
          globalInfo: tr.globalInfo,
          nextGlobalInfo: last ? (step.next === null ? null : this.env.globalInfo(step.next as S)) : turns[t + 1].globalInfo,
          reward: step.reward,
          done: last,
          nextObservations: last ? null : turns[t + 1].observations,
          agents: agentSteps,
          joint: { criticIds: tr.jointIds[j], value: tr.values[j], target: targets[t] },
        });
      });
    }
    return out;
  }

  // -------------------------------------------------------------------------------------------
  // 3. Update from the replay buffer.
  // -------------------------------------------------------------------------------------------

  /** Drains the buffer and updates every actor, then the critic once per joint minibatch. */
  async update(): Promise<MetricRecord> {
    return this.updateFrom(this.buffer.drain());
  }

  /**
   * One update (step 3) on the given transitions instead of the buffer's, e.g. transitions from
   * {@link CoLLMCCTrainer.rollout}. Their behaviour log-probs must come from these actors.
   */
  async updateFrom(transitions: readonly JointTransition[]): Promise<MetricRecord> {
    if (transitions.length === 0) return {};
    const { agents, config } = this;
    const metrics = new FlushMetrics(config.use_importance_ratio ? config.ratio_clip_range : null);
    const ratioSettings = { useRatio: config.use_importance_ratio, clipRange: config.ratio_clip_range };
    const stepOptions = (label: string) => ({ maxGradNorm: config.max_grad_norm, chunkSize: config.scoring_batch_size, label });

    // One advantage per joint transition, δ = y − V(h) from the shared critic, z-scored per turn group.
    const advantages = turnGroupAdvantages(
      transitions.map((tr) => ({ turn: tr.turn, delta: jointOf(tr).target - jointOf(tr).value })),
      config.advantage_normalization,
    );

    const plan = planMinibatches(
      transitions.map((t) => t.turn),
      { batchSize: this.trainBatchSize, epochs: config.update_epochs, rng: this.minibatchRng },
    );
    for (const mb of plan) {
      // Every actor on its own part of the joint minibatch.
      for (let i = 0; i < agents.length; i++) {
        const label = `CoLLM-CC agent ${i} ('${agents[i].name}'), turn ${mb.turn + 1}, epoch ${mb.epoch + 1}`;
        const rows: ActorRow[] = mb.indices.map((j) => {
          const s = transitions[j].agents[i];
          return {
            promptIds: s.promptIds,
            completionIds: s.completionIds,
            advantage: advantages[j],
            // Unchanged actor: π_old is π_θ, so ρ is exactly 1 (see common/actor-critic.ts).
            oldLogProb: s.policyVersion === this.policyVersions[i] ? null : s.behaviourLogProb,
            weight: 1 / mb.indices.length,
          };
        });
        const recorder: RatioRecorder = { ratios: [] };
        const a = await this.timer.time('training', () => actorStep(agents[i].model, this.actorOptimizers[i], rows, ratioSettings, stepOptions(label), recorder));
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
        criticStep(this.critic, this.criticOptimizer, valueRows, config.value_loss_coef, null, stepOptions(`CoLLM-CC critic, turn ${mb.turn + 1}, epoch ${mb.epoch + 1}`)),
      );
      this.optimizerSteps++;
      metrics.loss(mb.turn, null, 'value_loss', c.loss);
      metrics.gradNorm(null, 'grad_norm', c.gradNorm);
    }
    this.lastUpdate = { ...metrics.record(transitions), ...this.userRolloutMetrics(transitions), optimizer_steps: this.optimizerSteps };
    await this.maybeLog(this.lastUpdate);
    return this.lastUpdate;
  }

  // -------------------------------------------------------------------------------------------
  // Evaluation.
  // -------------------------------------------------------------------------------------------

  /**
   * Plays the first `eval_num_samples` eval tasks along one path (one completion per agent per
   * turn, greedy if `eval_greedy`, early termination as in training) and values every step with the
   * critic. The eval stream restarts from the seed, so evaluations differ only by the weights.
   */
  async evaluate(): Promise<ActorCriticEvalResult<T, S>> {
    const t0 = performance.now();
    const tasks = this.evalTasks.slice(0, this.config.eval_num_samples);
    const episodes = await runEvalEpisodes({
      agents: this.agents,
      env: this.env,
      tasks,
      numTurns: this.config.num_turns,
      batchSize: this.config.eval_batch_size,
      settings: { ...this.settings, greedy: this.config.eval_greedy },
      rng: rngFor(this.config.seed, 'eval'),
      discount: this.config.discount,
      earlyTerminationThreshold: this.config.early_termination_threshold,
    });
    const valueByTurn = new Map<number, { pred: number[]; target: number[] }>();
    for (const ep of episodes) {
      const ids = ep.observations.map((obs, t) => this.criticInput(obs, ep.completions[t], this.env.globalInfo(ep.states[t])));
      const values = await this.critic.predict(ids);
      const targets = tdTargets(ep.rewards, values, this.config.discount);
      values.forEach((v, t) => {
        const acc = valueByTurn.get(t) ?? { pred: [], target: [] };
        acc.pred.push(v);
        acc.target.push(targets[t]);
        valueByTurn.set(t, acc);
      });
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

  private userRolloutMetrics(transitions: readonly JointTransition[]): MetricRecord {
    const out: MetricRecord = {};
    for (const [k, v] of Object.entries(this.rolloutMetrics?.(transitions) ?? {})) {
      if (typeof v !== 'number') throw new Error(`rolloutMetrics: metric '${k}' must be a number, got ${typeof v}`);
      out[`rollout/${k}`] = v;
    }
    return out;
  }

  private async maybeLog(update: MetricRecord): Promise<void> {
    if (!this.logger) return;
    if (this.lastLogEnvStep !== null && this.envStep - this.lastLogEnvStep < this.config.logging_steps) return;
    this.lastLogEnvStep = this.envStep;
    await this.logger.log(this.envStep, { ...update, epoch: this.cursor.epoch, ...this.timer.drain('time/') });
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

  /** Everything besides the weights needed to resume exactly: counters, cursor, streams, AdamW moments, buffer. */
  exportState(): CoLLMCCTrainerState {
    return {
      format: 'comlrl-trainer-state',
      version: 1,
      trainer: 'collm-cc',
      numAgents: this.agents.length,
      counters: { env_step: this.envStep, optimizer_steps: this.optimizerSteps, last_log_env_step: this.lastLogEnvStep ?? -1 },
      cursor: { ...this.cursor },
      rng: { sampling: this.samplingRng.state(), minibatch: this.minibatchRng.state() },
      optimizers: optimizerStates([...this.actorOptimizers, this.criticOptimizer]),
      extra: {
        buffer: this.buffer.contents().map((t) => structuredClone(t)),
        policyVersions: [...this.policyVersions],
        episodes: this.episodes,
        epochTurnStats: this.epochStats.snapshot(),
      },
    };
  }

  /**
   * Restores a snapshot from {@link CoLLMCCTrainer.exportState}. Load the saved weights first: the
   * agents' and critic's models, and the head (pass it as `criticHead`).
   */
  importState(state: CoLLMCCTrainerState): void {
    checkTrainerState(state, 'collm-cc', this.agents.length, this.actorOptimizers.length + 1);
    if (state.extra.policyVersions.length !== this.agents.length) {
      throw new Error(`importState: ${state.extra.policyVersions.length} policy versions for ${this.agents.length} agents`);
    }
    restoreOptimizers([...this.actorOptimizers, this.criticOptimizer], state.optimizers);
    this.samplingRng = createRng(0, state.rng.sampling);
    this.minibatchRng = createRng(0, state.rng.minibatch);
    this.cursor = { ...state.cursor };
    this.envStep = state.counters.env_step ?? 0;
    this.optimizerSteps = state.counters.optimizer_steps ?? 0;
    const last = state.counters.last_log_env_step ?? -1;
    this.lastLogEnvStep = last < 0 ? null : last;
    this.buffer = new ReplayBuffer(this.config.rollout_buffer_size);
    for (const t of state.extra.buffer) this.buffer.push(structuredClone(t));
    this.policyVersions = [...state.extra.policyVersions];
    this.episodes = state.extra.episodes;
    this.epochStats.restore(state.extra.epochTurnStats);
  }

  /** Frees the optimizers' moments and the head (models stay with the caller). */
  dispose(): void {
    for (const o of [...this.actorOptimizers, this.criticOptimizer]) o.dispose();
    this.critic.head.dispose();
  }
}

function jointOf(tr: JointTransition): NonNullable<JointTransition['joint']> {
  if (!tr.joint) throw new Error(`CoLLM-CC: transition of episode ${tr.episode} turn ${tr.turn} has no centralized critic data`);
  return tr.joint;
}
