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
 *      The buffer is then empty: nothing is kept between flushes.
 *
 * With `update_epochs: 1, use_importance_ratio: false, use_global_info: false` (see `comlrl136()`)
 * this is CoMLRL 1.3.6's IAC update. Differences (README): separate critics read the
 * observation text with their own tokenizer; non-finite losses raise; streams are seeded.
 */
import { join } from 'node:path';
import { agentView, planMinibatches, ReplayBuffer, type AgentTransition, type JointTransition } from '../src/buffer/replay.js';
import { discountedReturns, tdTargets } from '../src/buffer/targets.js';
import { createCriticHead, headSpecFromHiddenDim, saveCriticHead, type CriticHead } from '../src/critic/heads.js';
import { decentralizedCriticIds, globalInfoPrefixIds, sharedHeadIds } from '../src/critic/inputs.js';
import { ValueModel, type CriticLM } from '../src/critic/value-model.js';
import type { Agent } from '../src/decpomdp/agent.js';
import type { GlobalInfo, LLMDecPOMDP } from '../src/decpomdp/types.js';
import { AdamW } from '../src/optim/adamw.js';
import { createRng, rngFor, type Rng } from '../src/util/rng.js';
import { parseCoLLMDCConfig, type CoLLMDCConfig, type CoLLMDCConfigInput } from './actor-critic-config.js';
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
import { actorStep, behaviourLogProbs, criticStep, sharedStep, type ActorRow, type RatioRecorder } from './common/actor-critic.js';
import { mean } from './common/advantage.js';
import { runEvalCallbacks, runEvalEpisodes, summarizeEval, type EvalCallback } from './common/eval.js';
import { encodePrompt, generateGroup, type CompletionGroup, type GenerationSettings } from './common/generation.js';
import { evalKey, PhaseTimer, turnKey, type MetricRecord, type MetricsSink } from './common/metrics.js';
import { agentDir, saveAgents } from './common/save.js';
import { checkTrainerState, optimizerStates, restoreOptimizers, type DatasetCursor, type TrainerState } from './common/state.js';

/** Constructor arguments of {@link CoLLMDCTrainer}. */
export interface CoLLMDCTrainerOptions<T, S> {
  /** The n agents (separate model objects; vocabularies may differ). */
  agents: readonly Agent[];
  env: LLMDecPOMDP<T, S>;
  trainTasks: readonly T[];
  evalTasks?: readonly T[];
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

/** A CoLLM-DC trainer snapshot. */
export type CoLLMDCTrainerState = TrainerState<ActorCriticStateExtra>;

/** What one episode produced, per turn, for one joint sample k. */
interface TurnRecord {
  globalInfo: GlobalInfo;
  observations: string[];
  promptIds: number[][];
  groups: CompletionGroup[];
  /** behaviour[i][k]. */
  behaviour: number[][];
  /** criticIds[i][k]. */
  criticIds: number[][][];
  /** values[i][k]. */
  values: number[][];
  /** steps[k]. */
  steps: RolloutStep<unknown>[];
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
export class CoLLMDCTrainer<T, S> {
  /** The validated config with defaults. */
  readonly config: CoLLMDCConfig;
  readonly agents: readonly Agent[];
  readonly env: LLMDecPOMDP<T, S>;
  /** Agent i's critic: a separate LM + head, or a head on agent i's backbone. */
  readonly critics: readonly ValueModel[];
  /** One AdamW per agent (in shared-head mode it also trains the head). */
  readonly actorOptimizers: readonly AdamW[];
  /** One AdamW per separate critic (empty with shared heads). */
  readonly criticOptimizers: readonly AdamW[];

  private readonly trainTasks: readonly T[];
  private readonly evalTasks: readonly T[];
  private readonly evalCallbacks: readonly EvalCallback<T, S>[];
  private readonly logger: MetricsSink | undefined;
  private readonly rolloutMetrics: ((transitions: readonly JointTransition[]) => Record<string, number>) | undefined;
  private readonly settings: GenerationSettings;
  private readonly trainBatchSize: number;
  private readonly timer = new PhaseTimer();

  private samplingRng: Rng;
  private minibatchRng: Rng;
  private buffer: ReplayBuffer;
  private policyVersions: number[];
  private episodes = 0;
  private cursor: DatasetCursor = { epoch: 0, index: 0 };
  private envStep = 0;
  private optimizerSteps = 0;
  private lastLogEnvStep: number | null = null;
  private readonly epochStats = new EpochTurnStats();
  private lastUpdate: MetricRecord = {};

  constructor(options: CoLLMDCTrainerOptions<T, S>) {
    const config = parseCoLLMDCConfig(options.config ?? {});
    const { agents, env } = options;
    const n = agents.length;
    if (n < 1) throw new Error('CoLLMDCTrainer: agents must hold at least one agent');
    if (config.num_agents !== undefined && config.num_agents !== n) {
      throw new Error(`CoLLMDCTrainer: config num_agents is ${config.num_agents} but ${n} agents were given`);
    }
    if (env.numAgents !== n) throw new Error(`CoLLMDCTrainer: env '${env.name}' has ${env.numAgents} agents but ${n} agents were given`);
    if (config.num_turns > env.horizon) {
      throw new Error(`CoLLMDCTrainer: num_turns ${config.num_turns} exceeds env '${env.name}' horizon ${env.horizon}`);
    }
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < i; j++) {
        if (agents[i].model === agents[j].model) {
          throw new Error(`CoLLMDCTrainer: agents ${j} and ${i} share one model object; homogeneous agents must be separate copies`);
        }
      }
    }
    if (options.trainTasks.length === 0) throw new Error('CoLLMDCTrainer: trainTasks is empty');
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

    const adam = (lr: number) => ({ lr, betas: config.adam_betas, eps: config.adam_eps, weightDecay: config.weight_decay });
    this.actorOptimizers = agents.map(
      (a, i) =>
        new AdamW(
          config.use_separate_critic ? a.model.trainableVariables() : [...a.model.trainableVariables(), ...this.critics[i].head.trainableVariables()],
          adam(config.agent_learning_rate),
        ),
    );
    this.criticOptimizers = config.use_separate_critic
      ? this.critics.map((c) => new AdamW(c.ownVariables(), adam(config.critic_learning_rate ?? config.agent_learning_rate)))
      : [];

    this.samplingRng = rngFor(config.seed, 'sampling');
    this.minibatchRng = rngFor(config.seed, 'minibatch');
    this.buffer = new ReplayBuffer(config.rollout_buffer_size);
    this.policyVersions = agents.map(() => 0);
  }

  /** Joint transitions played so far (CoMLRL's `env_step`, the logging x-axis). */
  get envSteps(): number {
    return this.envStep;
  }

  /** Optimizer steps taken so far (actors and critics). */
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
      // Epoch end: the leftovers are trained on too (CoMLRL flushes every non-empty buffer).
      if (this.buffer.size > 0) await this.update();
      await this.logEpochEnd();
      this.cursor = { epoch: this.cursor.epoch + 1, index: 0 };
    }
  }

  // -------------------------------------------------------------------------------------------
  // 1–2. Rollout and one-step TD targets.
  // -------------------------------------------------------------------------------------------

  /**
   * Plays one episode of `task` with the current actors and returns its joint transitions with
   * stored values, behaviour log-probs and TD targets (K joint samples when single-turn).
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

      // Each agent samples K completions; behaviour log-probs and its own critic's values.
      const groups: CompletionGroup[] = [];
      const behaviour: number[][] = [];
      const criticIds: number[][][] = [];
      const values: number[][] = [];
      for (let i = 0; i < agents.length; i++) {
        const group = await this.timer.time('generation', () => generateGroup(agents[i], promptIds[i], k, this.settings, this.samplingRng));
        groups.push(group);
        behaviour.push(
          await this.timer.time('scoring', () => behaviourLogProbs(agents[i].model, group.ids.map(() => promptIds[i]), group.ids)),
        );
        const ids = group.ids.map((c, j) => this.criticInput(i, observations[i], promptIds[i], group.texts[j], c, globalInfo));
        criticIds.push(ids);
        values.push(await this.timer.time('critic', () => predictDistinct((rows) => this.critics[i].predict(rows), ids)));
      }

      // Joint action k = the k-th completion of every agent; one joint reward each. The episode
      // goes on after this turn unless it is the last, or the reward is above the threshold.
      const threshold = config.early_termination_threshold;
      const continues = (r: number) => t < config.num_turns - 1 && !(threshold !== null && r > threshold);
      const steps: RolloutStep<S>[] = [];
      for (let j = 0; j < k; j++) {
        const actions = groups.map((g) => g.texts[j]);
        steps.push(await this.timer.time('reward', () => rolloutStep(env, state, actions, continues, 'CoLLM-DC', t)));
      }
      turns.push({ globalInfo, observations, promptIds, groups, behaviour, criticIds, values, steps: steps as RolloutStep<unknown>[] });

      // Multi-turn plays K = 1: its single joint step decides whether the episode goes on.
      const last = steps[0];
      if (!continues(last.reward) || last.done || last.next === null) break;
      state = last.next;
    }
    return this.buildTransitions(episode, turns);
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

  /** Per joint sample k, per agent trajectory: y_t = r_t + γ·V_{t+1} (no bootstrap at the end). */
  private buildTransitions(episode: number, turns: TurnRecord[]): JointTransition[] {
    const { agents, config } = this;
    const out: JointTransition[] = [];
    const k = turns[0].steps.length;
    for (let j = 0; j < k; j++) {
      const rewards = turns.map((tr) => tr.steps[j].reward);
      const returns = discountedReturns(rewards, config.discount);
      const targets = agents.map((_, i) => tdTargets(rewards, turns.map((tr) => tr.values[i][j]), config.discount));
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
          criticIds: tr.criticIds[i][j],
          value: tr.values[i][j],
          target: targets[i][t],
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
          joint: null,
        });
      });
    }
    return out;
  }

  // -------------------------------------------------------------------------------------------
  // 3. Update from the replay buffer.
  // -------------------------------------------------------------------------------------------

  /** Drains the buffer and updates every actor and critic on it (see the module comment). */
  async update(): Promise<MetricRecord> {
    return this.updateFrom(this.buffer.drain());
  }

  /**
   * One update (step 3) on the given transitions instead of the buffer's, e.g. transitions from
   * {@link CoLLMDCTrainer.rollout}. Their behaviour log-probs must come from these actors.
   */
  async updateFrom(transitions: readonly JointTransition[]): Promise<MetricRecord> {
    if (transitions.length === 0) return {};
    const { agents, config } = this;
    const metrics = new FlushMetrics(config.use_importance_ratio ? config.ratio_clip_range : null);
    const ratioSettings = { useRatio: config.use_importance_ratio, clipRange: config.ratio_clip_range };
    const stepOptions = (label: string) => ({ maxGradNorm: config.max_grad_norm, chunkSize: config.scoring_batch_size, label });

    // Advantages δ = y − V_old, z-scored within each turn group, per agent.
    const advantages = agents.map((_, i) =>
      turnGroupAdvantages(
        agentView(transitions, i).map((s) => ({ turn: s.turn, delta: s.step.target - s.step.value })),
        config.advantage_normalization,
      ),
    );

    const plan = planMinibatches(
      transitions.map((t) => t.turn),
      { batchSize: this.trainBatchSize, epochs: config.update_epochs, rng: this.minibatchRng },
    );
    for (const mb of plan) {
      for (let i = 0; i < agents.length; i++) {
        const label = `CoLLM-DC agent ${i} ('${agents[i].name}'), turn ${mb.turn + 1}, epoch ${mb.epoch + 1}`;
        const rows = mb.indices.map((j) => {
          const s = transitions[j].agents[i];
          return {
            promptIds: s.promptIds,
            completionIds: s.completionIds,
            advantage: advantages[i][j],
            // Unchanged actor: π_old is π_θ, so ρ is exactly 1 (see common/actor-critic.ts).
            oldLogProb: s.policyVersion === this.policyVersions[i] ? null : s.behaviourLogProb,
            weight: 1 / mb.indices.length,
            criticIds: s.criticIds,
            target: s.target,
            oldValue: s.value,
          } satisfies ActorRow & { criticIds: readonly number[]; target: number; oldValue: number };
        });
        const recorder: RatioRecorder = { ratios: [] };
        if (this.critics[i].sharesBackbone) {
          // Shared head: actor loss + coef · clipped value loss, one backward, one step.
          const r = await this.timer.time('training', () =>
            sharedStep(this.critics[i], this.actorOptimizers[i], rows, ratioSettings, config.value_loss_coef, config.value_clip_range, stepOptions(label), recorder),
          );
          metrics.loss(mb.turn, i, 'policy_loss', r.policyLoss);
          metrics.loss(mb.turn, i, 'value_loss', r.valueLoss);
          metrics.gradNorm(i, 'grad_norm', r.gradNorm);
          this.optimizerSteps++;
        } else {
          // Separate critic: the actor steps on its loss, the critic on coef · (y − V)².
          const a = await this.timer.time('training', () => actorStep(agents[i].model, this.actorOptimizers[i], rows, ratioSettings, stepOptions(label), recorder));
          const c = await this.timer.time('critic_training', () =>
            criticStep(this.critics[i], this.criticOptimizers[i], rows, config.value_loss_coef, null, stepOptions(`${label} critic`)),
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
    this.lastUpdate = { ...metrics.record(transitions), ...this.userRolloutMetrics(transitions), optimizer_steps: this.optimizerSteps };
    await this.maybeLog(this.lastUpdate);
    return this.lastUpdate;
  }

  // -------------------------------------------------------------------------------------------
  // Evaluation.
  // -------------------------------------------------------------------------------------------

  /**
   * Plays the first `eval_num_samples` eval tasks along one path (one completion per agent per
   * turn, greedy if `eval_greedy`, early termination as in training) and scores every step with
   * the critics. The eval stream restarts from the seed, so evaluations differ only by the weights.
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
    // Critic values along each episode: V_i(h_{i,t}) per agent, then y_t from them.
    const valueByTurn = new Map<number, { pred: number[]; target: number[] }>();
    for (const ep of episodes) {
      const perAgent: number[][] = [];
      for (let i = 0; i < this.agents.length; i++) {
        const ids = ep.observations.map((obs, t) =>
          this.criticInput(i, obs[i], encodePrompt(this.agents[i], obs[i]), ep.completions[t][i], ep.completionIds[t][i], this.env.globalInfo(ep.states[t])),
        );
        perAgent.push(await this.critics[i].predict(ids));
      }
      perAgent.forEach((values) => {
        const targets = tdTargets(ep.rewards, values, this.config.discount);
        values.forEach((v, t) => {
          const acc = valueByTurn.get(t) ?? { pred: [], target: [] };
          acc.pred.push(v);
          acc.target.push(targets[t]);
          valueByTurn.set(t, acc);
        });
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

  // -------------------------------------------------------------------------------------------
  // Metrics.
  // -------------------------------------------------------------------------------------------

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

  private async logEpochEnd(): Promise<void> {
    await this.logger?.log(this.envStep, this.epochStats.drain());
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

  /** Everything besides the weights needed to resume exactly: counters, cursor, streams, AdamW moments, buffer. */
  exportState(): CoLLMDCTrainerState {
    return {
      format: 'comlrl-trainer-state',
      version: 1,
      trainer: 'collm-dc',
      numAgents: this.agents.length,
      counters: { env_step: this.envStep, optimizer_steps: this.optimizerSteps, last_log_env_step: this.lastLogEnvStep ?? -1 },
      cursor: { ...this.cursor },
      rng: { sampling: this.samplingRng.state(), minibatch: this.minibatchRng.state() },
      optimizers: optimizerStates([...this.actorOptimizers, ...this.criticOptimizers]),
      extra: {
        buffer: this.buffer.contents().map((t) => structuredClone(t)),
        policyVersions: [...this.policyVersions],
        episodes: this.episodes,
        epochTurnStats: this.epochStats.snapshot(),
      },
    };
  }

  /**
   * Restores a snapshot from {@link CoLLMDCTrainer.exportState}. Load the saved weights first: the
   * agents' and critics' models, and the heads (pass them as `criticHeads`).
   */
  importState(state: CoLLMDCTrainerState): void {
    checkTrainerState(state, 'collm-dc', this.agents.length, this.actorOptimizers.length + this.criticOptimizers.length);
    if (state.extra.policyVersions.length !== this.agents.length) {
      throw new Error(`importState: ${state.extra.policyVersions.length} policy versions for ${this.agents.length} agents`);
    }
    restoreOptimizers([...this.actorOptimizers, ...this.criticOptimizers], state.optimizers);
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

  /** Frees the optimizers' moments and the heads (models stay with the caller). */
  dispose(): void {
    for (const o of [...this.actorOptimizers, ...this.criticOptimizers]) o.dispose();
    for (const c of this.critics) c.head.dispose();
  }
}
