/**
 * What every trainer (MAGRPO, CoLLM-DC, CoLLM-CC) does the same way, as in CoMLRL: check its
 * inputs, walk the training tasks epoch by epoch (evaluating every `eval_interval` items), count
 * env steps and optimizer steps, throttle train logs by `logging_steps`, play eval episodes, and
 * snapshot all that (with the optimizers' moments) for an exact resume. The algorithm itself lives in each trainer's file.
 */
import { JointLoraPasses } from '../../src/model/lora/joint.js';
import type * as tf from '@tensorflow/tfjs';
import type { Agent } from '../../src/decpomdp/agent.js';
import type { LLMDecPOMDP } from '../../src/decpomdp/types.js';
import type { TrainerSectionFields } from '../../src/config/trainers.js';
import { writeTrainerState } from '../../src/checkpoint/state.js';
import { AdamW } from '../../src/optim/adamw.js';
import type { AdamWOptions } from '../../src/optim/config.js';
import { resolveWarmupSteps, scheduledLr, type LrSchedule } from '../../src/optim/schedule.js';
import { createRng, rngFor, type Rng } from '../../src/util/rng.js';
import type { LrScheduleSettings } from './config.js';
import { evalTurnMetrics, runEvalCallbacks, runEvalEpisodes, summarizeEval, type EvalCallback, type EvalEpisode } from './eval.js';
import { saveAgents, type SaveOptions } from './save.js';
import { agentSampling, generateGroup, PromptTooLongError, type JointPasses, type CompletionGroup, type CompletionSampler, type CompletionSource, type GenerationSettings } from './generation.js';
import type { UpdateTrace } from './trace.js';
import type { ResolvedSampling } from '../../src/sampling/defaults.js';
import { describeItem } from '../../src/data/row-origin.js';
import { PhaseTimer, type MetricRecord, type MetricsSink } from './metrics.js';
import { CallbackList, type ItemEvent, type PhaseEvent, type TrainEndReason, type TrainerCallback, type TrainerControl, type TrainEvent } from './callbacks.js';
import { checkTrainerState, optimizerStates, restoreOptimizers, type DatasetCursor, type TrainerState } from './state.js';

/** Options of a trainer's `train()`. */
export interface TrainOptions {
  /** Stop after this many training items in this call (the cursor lets a later call continue). */
  maxItems?: number;
  /** Follow the run and steer it (progress, checkpoints, early stop): see {@link TrainerCallback}. */
  callbacks?: readonly TrainerCallback[];
  /**
   * Writes a checkpoint when a callback sets {@link TrainerControl.save} at an item end, and returns
   * its directory (then `onSave` is sent). Required for that request; e.g. `save()` and
   * `writeState()` into a new directory.
   */
  saveCheckpoint?: (event: ItemEvent) => Promise<string>;
  /**
   * Called after each training item (e.g. to checkpoint with exportState()). The same as a
   * callback with only `onItemEnd`, placed before `callbacks`.
   */
  onItemEnd?: (progress: { epoch: number; index: number; envStep: number }) => void | Promise<void>;
  /**
   * The caller has just evaluated the current weights: skip the evaluation that is due before
   * this call's first item (it would repeat the same numbers, since evaluation sampling restarts
   * from the seed). Later evaluations are unaffected.
   */
  skipFirstEval?: boolean;
}

/**
 * Reports a step of a trainer's work before its items to the callbacks (see {@link PhaseEvent}:
 * progress, and the CLI's stop callback, which lets a pending Ctrl-C be heard); resolves to true
 * when a callback asked the run to stop.
 */
export type PhaseReport = (phase: string, done: number, total: number) => Promise<boolean>;

/**
 * What work done before the items (MARLHF's phase 1) uses of the run: the agents and training
 * tasks, sampling on the training stream, the counters, the timer and the logger.
 */
export interface PreItemsHost<T> {
  readonly agents: readonly Agent[];
  readonly trainTasks: readonly T[];
  readonly timer: PhaseTimer;
  readonly logger: MetricsSink | undefined;
  /** The run's env step now. */
  readonly envStep: number;
  addEnvSteps(n: number): void;
  /** Counts one optimizer step (`updateSteps`). */
  countOptimizerStep(): void;
  /** Agent i's `n` training samples for `promptIds` (the training sampling stream, or the given sampler). */
  sample(agent: number, promptIds: number[], n: number): Promise<CompletionGroup>;
  /** An AdamW at a fixed rate, outside the run's learning-rate schedule (see `fixedRateAdamW`). */
  optimizer(variables: readonly tf.Variable[], lr: number): AdamW;
}

/** Constructor arguments every trainer takes. */
export interface TrainerInputs<T, S> {
  /** The n agents (separate model objects; vocabularies may differ). */
  agents: readonly Agent[];
  env: LLMDecPOMDP<T, S>;
  trainTasks: readonly T[];
  evalTasks?: readonly T[];
  /** User metrics over eval episodes, logged as `eval/<key>`. */
  evalCallbacks?: readonly EvalCallback<T, S>[];
  /** Receives train and eval metrics at step = env_step. */
  logger?: MetricsSink;
  /**
   * Completions to train on in place of the agents' sampling (offline rollouts, replays, the
   * CoMLRL parity check); evaluation still samples. See {@link CompletionSampler}.
   */
  sampler?: CompletionSampler;
  /** Receives what each update computed (advantages, losses, critic estimates): see {@link UpdateTrace}. */
  trace?: UpdateTrace;
}

/**
 * The config fields (CoMLRL's names) the shared run logic reads: every trainer's config has them.
 * (Not the run config file: that is the CLI's `RunConfig`, cli/schemas.ts.)
 */
export interface TrainerRunFields extends TrainerSectionFields, Partial<LrScheduleSettings> {
  readonly rollout_buffer_size: number;
  readonly train_batch_size: number | null;
  readonly eval_greedy: boolean;
  readonly logging_steps: number;
  readonly adam_betas: [number, number];
  readonly adam_eps: number;
  readonly weight_decay: number;
  /** LoRA agents on one base run joint passes unless false (see `JointLoraPasses`). */
  readonly joint_passes?: boolean;
}

/**
 * The sampling settings of a trainer config's generate calls (training; eval adds `greedy`).
 * `top_k: null` stays null here: each agent fills it from its checkpoint ({@link agentSampling}).
 */
export function generationSettingsOf(config: Pick<TrainerRunFields, 'max_new_tokens' | 'temperature' | 'top_p' | 'top_k'>): GenerationSettings {
  return { maxNewTokens: config.max_new_tokens, temperature: config.temperature, topP: config.top_p, topK: config.top_k };
}

/** How a trainer names itself: in constructor errors, in errors during a run, in its saved state. */
export interface TrainerNames {
  /** e.g. 'CoLLMDCTrainer'. */
  readonly className: string;
  /** e.g. 'CoLLM-DC'. */
  readonly label: string;
  /** `TrainerState.trainer`, e.g. 'collm-dc'. */
  readonly stateTag: string;
}

/** Which model an optimizer trains: it picks the schedule (agents' or critics' settings) and names the `lr/` metric. */
export interface OptimizerRole {
  readonly kind: 'agent' | 'critic';
  /** Agent index, or critic slot. */
  readonly index: number;
}

/** An optimizer with the schedule of its learning rate. */
interface ScheduledOptimizer {
  readonly optimizer: AdamW;
  /** The config's learning rate: λ = 1. */
  readonly baseLr: number;
  readonly schedule: LrSchedule;
  /** e.g. `lr/agent_0`, `lr/critic_0`. */
  readonly metric: string;
}

/** Throws when a reward is NaN or infinite (a trainer never learns from it silently). */
export function assertFiniteReward(label: string, envName: string, reward: number, turn: number): void {
  if (!Number.isFinite(reward)) throw new Error(`${label}: env '${envName}' returned a non-finite reward (${reward}) at turn ${turn + 1}`);
}

/** One evaluation along one path: its env step, metrics (`eval/turn_k/...`, callbacks', timing) and episodes. */
export interface OnePathEvalResult<T, S> {
  readonly envStep: number;
  readonly metrics: MetricRecord;
  readonly episodes: EvalEpisode<T, S>[];
}

/**
 * The run bookkeeping of a trainer. Subclasses build their optimizers (and critics) in their own
 * constructor, and supply what one training item and the end of an epoch do.
 */
export abstract class TrainerBase<T, S, C extends TrainerRunFields> {
  /** The validated config with defaults. */
  readonly config: C;
  readonly agents: readonly Agent[];
  readonly env: LLMDecPOMDP<T, S>;

  protected readonly trainTasks: readonly T[];
  protected readonly evalTasks: readonly T[];
  protected readonly evalCallbacks: readonly EvalCallback<T, S>[];
  /** The logger the trainer was given. */
  private readonly sink: MetricsSink | undefined;
  /** During `train()` with callbacks that listen to logs: the sink that also tells them. */
  private trainSink: MetricsSink | null = null;
  /** Sampling settings of every training generate call. */
  protected readonly settings: GenerationSettings;
  /**
   * What each agent samples with (training and sampled evaluation): the config's values, an unset
   * `top_k` filled from the agent's generation_config.json or transformers' default 50.
   */
  readonly sampling: readonly ResolvedSampling[];
  /** Samples per minibatch (one optimizer step each). */
  protected readonly trainBatchSize: number;
  protected readonly timer = new PhaseTimer();
  /** The completion sampler given in place of sampling (training only), else null. */
  protected readonly sampler: CompletionSampler | null;
  /** Where the update's computations are traced, else null. */
  protected readonly trace: UpdateTrace | null;

  protected samplingRng: Rng;
  protected minibatchRng: Rng;
  /**
   * Joint passes over every agent when all are LoRA models on one loaded base and `joint_passes`
   * is not false; null otherwise (each agent runs its own passes).
   */
  protected readonly joint: JointLoraPasses | null;
  /** {@link TrainerBase.joint} and whether the agents may run joint passes at all (it picks their sampling streams). */
  protected readonly jointPasses: JointPasses;
  protected cursor: DatasetCursor = { epoch: 0, index: 0 };
  protected envStep = 0;
  protected optimizerSteps = 0;
  private lastLogEnvStep: number | null = null;
  /** Every optimizer built with {@link TrainerBase.adamW}, with its learning-rate schedule. */
  private readonly scheduled: ScheduledOptimizer[] = [];

  protected constructor(
    protected readonly names: TrainerNames,
    config: C,
    inputs: TrainerInputs<T, S>,
  ) {
    const name = names.className;
    const { agents, env } = inputs;
    const n = agents.length;
    if (n < 1) throw new Error(`${name}: agents must hold at least one agent`);
    if (config.num_agents !== undefined && config.num_agents !== n) {
      throw new Error(`${name}: config num_agents is ${config.num_agents} but ${n} agents were given`);
    }
    if (env.numAgents !== n) throw new Error(`${name}: env '${env.name}' has ${env.numAgents} agents but ${n} agents were given`);
    if (config.num_turns > env.horizon) {
      throw new Error(`${name}: num_turns ${config.num_turns} exceeds env '${env.name}' horizon ${env.horizon}`);
    }
    // One model object per agent: an optimizer step of one agent must not move another.
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < i; j++) {
        if (agents[i].model === agents[j].model) {
          throw new Error(`${name}: agents ${j} and ${i} share one model object; homogeneous agents must be separate copies`);
        }
      }
    }
    if (inputs.trainTasks.length === 0) throw new Error(`${name}: trainTasks is empty`);

    this.config = config;
    this.agents = [...agents];
    this.env = env;
    this.trainTasks = inputs.trainTasks;
    this.evalTasks = inputs.evalTasks ?? [];
    this.evalCallbacks = inputs.evalCallbacks ?? [];
    this.sink = inputs.logger;
    this.sampler = inputs.sampler ?? null;
    this.trace = inputs.trace ?? null;
    this.settings = generationSettingsOf(config);
    // Resolved now so that a checkpoint's unusable value fails before the first item.
    this.sampling = this.agents.map((agent) => agentSampling(agent, this.settings));
    this.trainBatchSize = config.train_batch_size ?? config.rollout_buffer_size;
    this.samplingRng = rngFor(config.seed, 'sampling');
    this.minibatchRng = rngFor(config.seed, 'minibatch');
    const eligible = JointLoraPasses.of(this.agents.map((a) => a.model));
    this.joint = config.joint_passes === false ? null : eligible;
    this.jointPasses = { eligible: eligible !== null, passes: this.joint };
  }

  /** Where agent i's training completions come from (its own sampling, or the given sampler). */
  protected completionSource(i: number): CompletionSource {
    return { index: i, sampler: this.sampler };
  }

  /** Joint actions the environment has scored so far (CoMLRL's `env_step`, the logging x-axis). */
  get envSteps(): number {
    return this.envStep;
  }

  /** Optimizer steps taken so far, summed over every model the trainer updates. */
  get updateSteps(): number {
    return this.optimizerSteps;
  }

  /** The next training item (epoch, index). */
  get datasetCursor(): DatasetCursor {
    return { ...this.cursor };
  }

  /** Training items per epoch: a run has `itemsPerEpoch · num_train_epochs` steps. */
  get itemsPerEpoch(): number {
    return this.trainTasks.length;
  }

  /** Where trainers send their metrics (undefined: nobody listens, so nothing is computed for logs). */
  protected get logger(): MetricsSink | undefined {
    return this.trainSink ?? this.sink;
  }

  /**
   * Runs the remaining epochs from the current cursor: per task, eval when due, then the trainer's
   * work on the task; at epoch end whatever the trainer still buffers is trained on. The callbacks
   * hear each event and may stop the run or ask for a checkpoint (see {@link TrainerCallback});
   * their `onTrainEnd` hears why it ended.
   */
  async train(options: TrainOptions = {}): Promise<void> {
    const onItemEnd = options.onItemEnd;
    const legacy: TrainerCallback[] = onItemEnd ? [{ onItemEnd: ({ epoch, index, envStep }) => onItemEnd({ epoch, index, envStep }) }] : [];
    const run = new CallbackList([...legacy, ...(options.callbacks ?? [])]);
    const sink = this.sink;
    this.trainSink = run.listensToLogs
      ? {
          log: async (envStep: number, metrics: MetricRecord) => {
            await sink?.log(envStep, metrics);
            await run.log({ ...this.position(), envStep, metrics });
          },
        }
      : null;
    try {
      let reason: TrainEndReason;
      try {
        reason = await this.loop(options, run);
      } catch (error) {
        try {
          await run.trainEnd({ ...this.position(), reason: 'error', error });
        } catch {
          // The training error is the one to report, not a callback's failure while unwinding.
        }
        throw error;
      }
      await run.trainEnd({ ...this.position(), reason });
    } finally {
      this.trainSink = null;
    }
  }

  /** The loop of {@link TrainerBase.train}. */
  private async loop(options: TrainOptions, run: CallbackList): Promise<TrainEndReason> {
    const { num_train_epochs: epochs, eval_interval: evalInterval } = this.config;
    const control: TrainerControl = run.control;
    await run.trainBegin(this.position());
    if (control.stop) return 'stopped';
    await this.beforeItems(async (phase, done, total) => {
      const event: PhaseEvent = { ...this.position(), phase, done, total };
      await run.phase(event);
      return control.stop;
    });
    if (control.stop) return 'stopped';
    let items = 0;
    while (this.cursor.epoch < epochs) {
      while (this.cursor.index < this.trainTasks.length) {
        if (options.maxItems !== undefined && items >= options.maxItems) return 'max-items';
        const { epoch, index } = this.cursor;
        await run.itemBegin({ ...this.position(), epoch, index });
        if (control.stop) return 'stopped';
        // CoMLRL evaluates when batch_idx % eval_interval == 0, i.e. also before each epoch's first item.
        const skip = items === 0 && options.skipFirstEval === true;
        if (evalInterval > 0 && this.evalTasks.length > 0 && index % evalInterval === 0 && !skip) {
          const { metrics } = await this.evaluate();
          await run.evaluate({ ...this.position(), metrics });
        }

        this.applyLearningRates(epoch * this.trainTasks.length + index);
        try {
          await this.trainOn(this.trainTasks[index]);
        } catch (err) {
          // The rollout knows the prompt, not the row it came from: name it here.
          throw err instanceof PromptTooLongError ? err.at(describeItem('train', index, this.trainTasks[index])) : err;
        }

        this.cursor = { epoch, index: index + 1 };
        items++;
        const end: ItemEvent = { ...this.position(), epoch, index };
        await run.itemEnd(end);
        if (control.save) {
          control.save = false;
          if (!options.saveCheckpoint) throw new Error(`${this.names.className}: a callback asked for a checkpoint (control.save) but train() was given no saveCheckpoint`);
          await run.save({ ...this.position(), dir: await options.saveCheckpoint(end) });
        }
        // A stop leaves the epoch's closing work to the next train() (or resume), as if cut here.
        if (control.stop) return 'stopped';
      }
      // The epoch's leftovers train at the rate of the epoch's last item (they are its data).
      this.applyLearningRates((this.cursor.epoch + 1) * this.trainTasks.length - 1);
      await this.endEpoch();
      this.cursor = { epoch: this.cursor.epoch + 1, index: 0 };
    }
    return 'finished';
  }

  /** Where the run is, for callback events. */
  private position(): TrainEvent {
    const perEpoch = this.trainTasks.length;
    return { step: this.cursor.epoch * perEpoch + this.cursor.index, totalSteps: this.config.num_train_epochs * perEpoch, envStep: this.envStep, cursor: { ...this.cursor } };
  }

  /**
   * Work a trainer does before its items, once per `train()` call (default none): MARLHF's
   * phase 1. It reports its steps through `report` and returns early when a report says stop.
   */
  protected beforeItems(_report: PhaseReport): Promise<void> {
    return Promise.resolve();
  }

  /** This run as work before the items sees it (see {@link PreItemsHost}). */
  protected preItemsHost(): PreItemsHost<T> {
    // Getters: the host reads the live counter and the sink of the current train() call.
    const self = this;
    return {
      agents: this.agents,
      trainTasks: this.trainTasks,
      timer: this.timer,
      get logger() {
        return self.logger;
      },
      get envStep() {
        return self.envStep;
      },
      addEnvSteps: (n) => void (this.envStep += n),
      countOptimizerStep: () => void this.optimizerSteps++,
      sample: (i, promptIds, n) => generateGroup(this.agents[i], promptIds, n, this.settings, this.samplingRng, this.completionSource(i)),
      optimizer: (variables, lr) => this.fixedRateAdamW(variables, lr),
    };
  }

  /** Plays one training task and updates on whatever buffer it fills. */
  protected abstract trainOn(task: T): Promise<void>;

  /** Trains on the leftovers of the epoch and logs its summary. */
  protected abstract endEpoch(): Promise<void>;

  /** Evaluates the current agents (and logs the result). */
  abstract evaluate(): Promise<{ readonly metrics: MetricRecord }>;

  /**
   * Plays the first `eval_num_samples` eval tasks along one path (one completion per agent per
   * turn), greedy if `eval_greedy`. The eval stream restarts from the seed at every evaluation, so
   * successive evaluations differ only by the weights.
   */
  protected playEvalEpisodes(earlyTerminationThreshold: number | null): Promise<EvalEpisode<T, S>[]> {
    const { config } = this;
    return runEvalEpisodes({
      agents: this.agents,
      env: this.env,
      tasks: this.evalTasks.slice(0, config.eval_num_samples),
      numTurns: config.num_turns,
      batchSize: config.eval_batch_size,
      settings: { ...this.settings, greedy: config.eval_greedy },
      rng: rngFor(config.seed, 'eval'),
      joint: this.jointPasses,
      discount: config.discount,
      earlyTerminationThreshold,
    });
  }

  /**
   * An evaluation along one path ({@link TrainerBase.playEvalEpisodes}): per-turn reward and return
   * metrics, the eval callbacks' metrics and its time, logged at the current env step.
   */
  protected async evaluateOnePath(earlyTerminationThreshold: number | null): Promise<OnePathEvalResult<T, S>> {
    const t0 = performance.now();
    const episodes = await this.playEvalEpisodes(earlyTerminationThreshold);
    const metrics: MetricRecord = {
      ...evalTurnMetrics(summarizeEval(episodes)),
      ...(await runEvalCallbacks(this.evalCallbacks, episodes)),
      'eval/time_s': (performance.now() - t0) / 1000,
    };
    await this.logger?.log(this.envStep, metrics);
    return { envStep: this.envStep, metrics, episodes };
  }

  /**
   * An AdamW over `variables` with the config's betas, eps and weight decay, whose learning rate
   * `lr` follows the config's schedule for `role` (default: the next agent). With a schedule,
   * every optimizer step of training item s (0-based over the run) uses lr · λ(s) (see
   * {@link TrainerBase.learningRates}).
   */
  protected adamW(variables: readonly tf.Variable[], lr: number, role?: OptimizerRole): AdamW {
    const optimizer = this.fixedRateAdamW(variables, lr);
    const r = role ?? { kind: 'agent', index: this.scheduled.filter((s) => s.metric.startsWith('lr/agent_')).length };
    this.scheduled.push({ optimizer, baseLr: lr, schedule: this.lrScheduleOf(r.kind), metric: `lr/${r.kind}_${r.index}` });
    return optimizer;
  }

  /**
   * An AdamW with the config's betas, eps and weight decay at the fixed rate `lr`: outside the
   * schedule and the `lr/` metrics (for a model trained before the items and then frozen, as
   * MARLHF's reward model, whose optimizer is gone once its fit is done).
   */
  protected fixedRateAdamW(variables: readonly tf.Variable[], lr: number): AdamW {
    const options: AdamWOptions = { lr, betas: this.config.adam_betas, eps: this.config.adam_eps, weightDecay: this.config.weight_decay };
    return new AdamW(variables, options);
  }

  /**
   * The schedule of an agent's or a critic's optimizer over the run's `num_train_epochs · items`
   * training items. A critic takes `critic_lr_scheduler_type` (else the agents' type), and its
   * own warmup keys when either is set (else the agents' `warmup_steps` / `warmup_ratio`).
   */
  private lrScheduleOf(kind: OptimizerRole['kind']): LrSchedule {
    const c = this.config;
    const totalSteps = c.num_train_epochs * this.trainTasks.length;
    const own = kind === 'critic' && (c.critic_lr_warmup_steps != null || c.critic_lr_warmup_ratio != null);
    const type = (kind === 'critic' ? c.critic_lr_scheduler_type : null) ?? c.lr_scheduler_type ?? 'constant';
    const warmupSteps = own ? (c.critic_lr_warmup_steps ?? 0) : (c.warmup_steps ?? 0);
    const warmupRatio = own ? (c.critic_lr_warmup_ratio ?? 0) : (c.warmup_ratio ?? 0);
    return { type, warmupSteps: resolveWarmupSteps(warmupSteps, warmupRatio, totalSteps), totalSteps };
  }

  /** Whether any optimizer has a schedule other than `constant`. */
  private get hasSchedule(): boolean {
    return this.scheduled.some((s) => s.schedule.type !== 'constant');
  }

  /**
   * Sets every scheduled optimizer's rate for training item `step`. A constant schedule never
   * touches its optimizer (the rate stays what it was built with). The rate in force is part of
   * each optimizer's saved state, and the clock is the dataset cursor, so a resume continues the
   * schedule exactly.
   */
  private applyLearningRates(step: number): void {
    for (const s of this.scheduled) {
      if (s.schedule.type !== 'constant') s.optimizer.setLearningRate(scheduledLr(s.baseLr, s.schedule, step));
    }
  }

  /** The current learning rate of every optimizer, by metric name (`lr/agent_0`, `lr/critic_0`, ...). */
  get learningRates(): MetricRecord {
    return Object.fromEntries(this.scheduled.map((s) => [s.metric, s.optimizer.learningRate]));
  }

  /** {@link TrainerBase.learningRates} for a train log when a schedule is set (a constant rate is the config's). */
  protected learningRateMetrics(): MetricRecord {
    return this.hasSchedule ? this.learningRates : {};
  }

  /**
   * Whether train metrics are due now: there is a logger, and env_step has advanced by at least
   * `logging_steps` since the last train log (the first is always due). Marks the log as taken.
   */
  protected trainLogDue(): boolean {
    if (!this.logger) return false;
    if (this.lastLogEnvStep !== null && this.envStep - this.lastLogEnvStep < this.config.logging_steps) return false;
    this.lastLogEnvStep = this.envStep;
    return true;
  }

  /**
   * Writes `dir/agent_i/` (HF-format weights + tokenizer) for every agent and the trainer's own
   * models beside them ({@link TrainerBase.saveOwnModels}), in the options' dtype and with merged
   * LoRA models as asked (see {@link SaveOptions}); logs `final_model_saved` for a final save.
   * Returns the directories written, the agents' first.
   */
  async save(dir: string, options: SaveOptions = {}): Promise<string[]> {
    const dirs = [...(await saveAgents(dir, this.agents, options)), ...(await this.saveOwnModels(dir, options))];
    if (options.final !== false) await this.logger?.log(this.envStep, { final_model_saved: 1 });
    return dirs;
  }

  /** The models a trainer keeps besides its agents (critics, a reward model), saved into `dir`: their directories. None by default. */
  protected saveOwnModels(_dir: string, _options: SaveOptions): Promise<string[]> {
    return Promise.resolve([]);
  }

  /** Everything besides the weights needed to resume exactly (see each trainer). */
  abstract exportState(): TrainerState<unknown>;

  /** Set while {@link TrainerBase.writeState} takes a snapshot: the optimizers whose moments it streams. */
  private streamedOptimizers: readonly AdamW[] | null = null;

  /**
   * Writes {@link TrainerBase.exportState}'s snapshot into `dir` (what `readTrainerState` reads
   * and `importState` resumes), copying the AdamW moments from the backend one at a time as they
   * are written: two 0.47 B-parameter agents have 7.5 GB of moments, which a host copy of all of
   * them next to the tensors would add to the run's peak at every checkpoint.
   */
  async writeState(dir: string): Promise<void> {
    this.streamedOptimizers = [];
    let state: TrainerState<unknown>;
    let live: readonly AdamW[];
    try {
      state = this.exportState();
      live = this.streamedOptimizers;
    } finally {
      this.streamedOptimizers = null;
    }
    await writeTrainerState(dir, state, live);
  }

  /**
   * A snapshot of this run for `exportState`: counters, dataset cursor, seeded streams, the
   * optimizers' moments (in the trainer's order) and the trainer's own data.
   */
  protected snapshot<Extra>(optimizers: readonly AdamW[], extra: Extra): TrainerState<Extra> {
    const streaming = this.streamedOptimizers !== null;
    if (streaming) this.streamedOptimizers = optimizers;
    return {
      format: 'comlrl-trainer-state',
      version: 1,
      trainer: this.names.stateTag,
      numAgents: this.agents.length,
      counters: { env_step: this.envStep, optimizer_steps: this.optimizerSteps, last_log_env_step: this.lastLogEnvStep ?? -1 },
      cursor: { ...this.cursor },
      rng: { sampling: this.samplingRng.state(), minibatch: this.minibatchRng.state() },
      optimizers: streaming ? [] : optimizerStates(optimizers),
      extra,
    };
  }

  /**
   * Restores what {@link TrainerBase.snapshot} wrote, except the trainer's own data: checks that
   * the state is this trainer's (and `checkExtra` its data) before anything is changed, then
   * restores the optimizers, counters, cursor and streams.
   */
  protected restoreSnapshot<Extra>(state: TrainerState<Extra>, optimizers: readonly AdamW[], checkExtra: (extra: Extra) => void): void {
    checkTrainerState(state, this.names.stateTag, this.agents.length, optimizers.length);
    checkExtra(state.extra);
    restoreOptimizers(optimizers, state.optimizers);
    this.samplingRng = createRng(0, state.rng.sampling);
    this.minibatchRng = createRng(0, state.rng.minibatch);
    this.cursor = { ...state.cursor };
    this.envStep = state.counters.env_step ?? 0;
    this.optimizerSteps = state.counters.optimizer_steps ?? 0;
    const last = state.counters.last_log_env_step ?? -1;
    this.lastLogEnvStep = last < 0 ? null : last;
  }
}
