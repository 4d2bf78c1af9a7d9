/**
 * MARLHF — multi-agent RLHF with a learned joint reward model (CoMLRL 1.4's `MARLHFTrainer`).
 *
 * Phase 1 (before the first training item, once per run): for every training task each agent
 * samples `preference_num_candidates` completions; the k-th completions of the agents form joint
 * candidate k, which the task's reward scores; `pair_selection` turns each task's non-tied
 * candidates into (winner, loser) pairs (MADPO's `selectPreferencePairs`). A {@link JointRewardModel} is fitted to
 * all pairs with the Bradley–Terry loss for `reward_num_train_epochs` passes, shuffled, in batches
 * of `reward_train_batch_size`. Library users may hand in their own pairs (`preferencePairs`)
 * instead of the rollout.
 *
 * Phase 2: MAGRPO's algorithm (the `MAGRPOTrainer` this class extends: rollout groups, returns,
 * advantages, buffers, its loss) with the advantage mode of `rl_algorithm` (magrpo: mean,
 * mareinforce: raw, maremax: max, marloo: rloo, as CoMLRL's newest dispatch), over the task's
 * environment with the reward swapped for the fitted model's score (./env.ts). Evaluation plays
 * the task with its own reward, as CoMLRL's.
 *
 * Phase 1 runs inside `train()` after train begin, reporting each task's candidates and each fit
 * step to the callbacks (`onPhase`: progress, Ctrl-C); each fit row carries its own x,
 * `reward_model/step`. Checkpoints are taken at item ends, so phase 1 has none: a checkpoint holds
 * the fitted reward model (`reward_model/`: LM, tokenizer, `value_head.*`) and the phase; resuming
 * one continues phase 2 exactly, and a run stopped during phase 1 restarts it from the seed.
 *
 * Differences from CoMLRL 1.4 (README): phase 1's candidates count as env steps (the task's
 * environment scored them; CoMLRL leaves env_step at 0 and logs the reward model at step 0); a
 * phase 1 without any non-tied pair is an error (CoMLRL prints a note and trains nothing); the
 * reward model reads the centralized critic's layout of the joint text (CoMLRL: its own header
 * lines) with the task's observations as the prompts.
 */
import { join } from 'node:path';
import type { CriticHead } from '../../src/critic/heads.js';
import type { CriticLM } from '../../src/critic/value-model.js';
import { rngFor, type Rng } from '../../src/util/rng.js';
import { encodePrompt, generateGroup, type CompletionGroup } from '../core/generation.js';
import { takeJointActions } from '../core/joint-step.js';
import { mean } from '../magrpo/advantage.js';
import { agentDirs, type ModelLayout } from '../core/save.js';
import type { TrainerState } from '../core/state.js';
import { assertFiniteReward, type PhaseReport, type TrainerInputs } from '../core/trainer.js';
import { selectPreferencePairs } from '../madpo/preference.js';
import { MAGRPOTrainer, type MAGRPOEvalResult, type MAGRPOStateExtra } from '../magrpo/trainer.js';
import { marlhfAdvantageMode, parseMARLHFConfig, type MARLHFConfig, type MARLHFConfigInput } from './config.js';
import { JointRewardEnv } from './env.js';
import { JointRewardModel, type JointPreference } from './reward-model.js';

/** Where a run is: fitting the reward model (phase 1, not yet done) or training the policies on it (phase 2). */
export type MARLHFPhase = 'reward_model' | 'policy';

/** The folder of the reward model in a saved run: `dir/reward_model/` (LM, tokenizer, `value_head.*`). */
export const REWARD_MODEL_DIR = 'reward_model';

/** Where MARLHF's models are in a directory it saved: the agents, and the reward model as its one critic. */
export function marlhfLayout(dir: string, numAgents: number): ModelLayout {
  const rm = join(dir, REWARD_MODEL_DIR);
  return { agents: agentDirs(dir, numAgents), critics: [rm], heads: [rm] };
}

/** MARLHF's trainer-specific resume data: MAGRPO's, plus the phase. */
export interface MARLHFStateExtra extends MAGRPOStateExtra {
  readonly marlhf: { readonly phase: MARLHFPhase };
}

/** A MARLHF trainer snapshot. */
export type MARLHFTrainerState = TrainerState<MARLHFStateExtra>;

/** Constructor arguments of {@link MARLHFTrainer}. */
export interface MARLHFTrainerOptions<T, S> extends TrainerInputs<T, S> {
  /** CoMLRL `MARLHFConfig` fields (snake_case); see ./config.ts. */
  config?: MARLHFConfigInput;
  /** The reward model's LM and tokenizer (its own: not an actor's model). */
  rewardModel: CriticLM;
  /** A scalar head to use instead of a fresh one (a checkpoint's `reward_model/value_head.*`, to resume). */
  rewardHead?: CriticHead;
  /** Preference pairs to fit the reward model to, instead of phase 1's rollout over the training tasks. */
  preferencePairs?: readonly JointPreference[];
}

/**
 * Trains n agents with MARLHF on a single-turn LLM Dec-POMDP (see the module comment).
 *
 * ```ts
 * const trainer = new MARLHFTrainer({ agents, rewardModel: { model, tokenizer }, env, trainTasks, evalTasks, config: { preference_num_candidates: 8 } });
 * await trainer.train();
 * await trainer.save('out'); // out/agent_i/, out/reward_model/
 * ```
 */
export class MARLHFTrainer<T, S> extends MAGRPOTrainer<T, S> {
  /** The joint reward model (fitted in phase 1, then frozen). */
  readonly rewardModel: JointRewardModel;
  /** The validated config. */
  readonly marlhfConfig: MARLHFConfig;
  private readonly rewardEnv: JointRewardEnv<T, S>;
  private readonly givenPairs: readonly JointPreference[] | null;
  private readonly headGiven: boolean;
  /** Pair order of `random` selection. */
  private readonly preferenceRng: Rng;
  /** The order of the pairs in each pass of the fit. */
  private readonly rewardModelRng: Rng;
  private phaseNow: MARLHFPhase = 'reward_model';
  /** Phase 1 was stopped part-way (see {@link MARLHFTrainer.fitRewardModel}). */
  private phase1Cut = false;

  constructor(options: MARLHFTrainerOptions<T, S>) {
    const config = parseMARLHFConfig(options.config ?? {});
    const rewardEnv = new JointRewardEnv(options.env);
    // Phase 2 is MAGRPO's update with the advantage mode of `rl_algorithm` (CoMLRL's dispatch of its MAGRPO family).
    const phase2 = { ...config, advantage_mode: marlhfAdvantageMode(config) };
    super({ ...options, env: rewardEnv }, { names: { className: 'MARLHFTrainer', label: 'MARLHF', stateTag: 'marlhf' }, parse: () => phase2 });
    const lm = options.rewardModel;
    if (!lm?.model || !lm.tokenizer) throw new Error('MARLHFTrainer: rewardModel (the reward model LM and its tokenizer) is required');
    if (this.agents.some((a) => a.model === lm.model)) throw new Error("MARLHFTrainer: the reward model is an actor's model; give it its own LM");
    this.marlhfConfig = config;
    this.rewardEnv = rewardEnv;
    this.givenPairs = options.preferencePairs ? [...options.preferencePairs] : null;
    this.headGiven = options.rewardHead !== undefined;
    this.preferenceRng = rngFor(config.seed, 'preference');
    this.rewardModelRng = rngFor(config.seed, 'reward-model');
    this.rewardModel = JointRewardModel.create(lm, rngFor(config.seed, 'reward-head'), {
      head: options.rewardHead,
      maxLength: config.reward_max_length,
      truncation: config.reward_truncation,
    });
  }

  /** 'reward_model' until phase 1 has fitted the reward model, then 'policy'. */
  get phase(): MARLHFPhase {
    return this.phaseNow;
  }

  /** Phase 1 when it has not run yet, before MAGRPO's items (see TrainerBase.beforeItems). */
  protected override async beforeItems(report: PhaseReport): Promise<void> {
    if (this.phaseNow === 'reward_model') await this.fitRewardModel(report);
  }

  /**
   * Phase 1: preference pairs (given, or from the rollout), then the Bradley–Terry fit; the reward
   * model is the reward from then on. Each task's candidates and each fit step are reported to
   * `report`; when it says stop, phase 1 ends unfinished and this trainer cannot run it again
   * (its streams and the reward model have moved on): the CLI starts such a run over.
   */
  async fitRewardModel(report: PhaseReport = () => Promise.resolve(false)): Promise<void> {
    if (this.phase1Cut) throw new Error('MARLHF: phase 1 was stopped part-way, so this trainer cannot run it again (its random streams and reward model moved on); build a new trainer (the CLI\'s --resume starts such a run over)');
    const pairs = this.givenPairs ?? (await this.collectPreferences(report));
    if (pairs === null) {
      this.phase1Cut = true;
      return;
    }
    if (pairs.length === 0) {
      throw new Error(
        'MARLHF: no preference pairs: every joint candidate of every training task got the same task reward; ' +
          'raise preference_num_candidates or temperature, or check the task reward',
      );
    }
    const c = this.marlhfConfig;
    this.refuseInseparablePairs(pairs);
    const variables = this.rewardModel.trainableVariables(c.reward_freeze_backbone);
    // Not scheduled and not among the `lr/` metrics: it is disposed when the fit is done.
    const optimizer = this.fixedRateAdamW(variables, c.reward_learning_rate);
    const perEpoch = Math.ceil(pairs.length / c.reward_train_batch_size);
    const total = perEpoch * c.reward_num_train_epochs;
    let step = 0;
    try {
      for (let epoch = 0; epoch < c.reward_num_train_epochs; epoch++) {
        const order = this.rewardModelRng.shuffle(pairs.map((_, i) => i));
        for (let at = 0; at < order.length; at += c.reward_train_batch_size) {
          const batch = order.slice(at, at + c.reward_train_batch_size).map((i) => pairs[i]);
          const options = { maxGradNorm: c.max_grad_norm, chunkSize: c.scoring_batch_size, label: 'MARLHF reward model' };
          const r = await this.timer.time('reward_model', () => this.rewardModel.step(optimizer, variables, batch, options));
          this.optimizerSteps++;
          step++;
          // The fit's own x: its step (env_step does not move while it runs).
          await this.logger?.log(this.envStep, { 'reward_model/step': step, 'reward_model/loss': r.loss, 'reward_model/accuracy': r.accuracy, 'reward_model/grad_norm': r.gradNorm, 'reward_model/epoch': epoch });
          if (await report('reward model fit', step, total)) {
            this.phase1Cut = true;
            return;
          }
        }
      }
    } finally {
      // The fit is over for good (the model is frozen in phase 2): its moments are not kept.
      optimizer.dispose();
    }
    this.enterPolicyPhase();
  }

  /**
   * Refuses pairs whose winner and loser `reward_max_length` cuts to the same tokens: the fit
   * would learn nothing from them (loss log 2, gradient 0) and say nothing.
   */
  private refuseInseparablePairs(pairs: readonly JointPreference[]): void {
    const bad = this.rewardModel.inseparablePair(pairs);
    if (bad === null) return;
    const c = this.marlhfConfig;
    const hint = c.reward_truncation === 'right' ? ", or set reward_truncation: prompts (the prompts are cut and the completions kept)" : '';
    throw new Error(
      `MARLHF: reward_max_length ${c.reward_max_length} cuts the joint text of preference pair ${bad.index + 1} of ${pairs.length} so that its winner and loser read the same tokens ` +
        `(its joint text is ${bad.fullLength} tokens with reward_truncation: ${c.reward_truncation}): the reward model could not tell them apart; raise reward_max_length to at least ${bad.fullLength}${hint}`,
    );
  }

  /** Every training task's preference pairs, from its joint candidates ranked by the task's reward (CoMLRL's preference rollout). */
  private async collectPreferences(report: PhaseReport): Promise<JointPreference[] | null> {
    const c = this.marlhfConfig;
    const env = this.rewardEnv.task;
    const n = c.preference_num_candidates;
    const pairs: JointPreference[] = [];
    const rewardMeans: number[] = [];
    for (const [t, task] of this.trainTasks.entries()) {
      const state = env.initialState(task);
      const prompts = this.agents.map((_, i) => env.observe(state, i));
      const groups: CompletionGroup[] = [];
      for (let i = 0; i < this.agents.length; i++) {
        const promptIds = encodePrompt(this.agents[i], prompts[i], env.rendering?.(state, i));
        groups.push(await this.timer.time('generation', () => generateGroup(this.agents[i], promptIds, n, this.settings, this.samplingRng, this.completionSource(i))));
      }
      const actions = Array.from({ length: n }, (_, k) => groups.map((g) => g.texts[k]));
      const steps = await takeJointActions(env, state, actions, (rewards) => rewards.map(() => false), (r) => assertFiniteReward('MARLHF', env.name, r, 0), this.timer);
      const rewards = steps.map((s) => s.reward);
      this.envStep += n;
      rewardMeans.push(mean(rewards));
      for (const { winner: w, loser: l } of selectPreferencePairs(rewards, c.pair_selection, c.preference_pairs_per_sample, this.preferenceRng)) {
        pairs.push({ prompts, winner: actions[w], loser: actions[l], winnerReward: rewards[w], loserReward: rewards[l] });
      }
      if (await report('reward model candidates', t + 1, this.trainTasks.length)) return null;
    }
    await this.logger?.log(this.envStep, {
      'reward_model/num_pairs': pairs.length,
      'reward_model/candidate_reward_mean': mean(rewardMeans),
      ...(pairs.length > 0 ? { 'reward_model/reward_gap_mean': mean(pairs.map((p) => (p.winnerReward ?? 0) - (p.loserReward ?? 0))) } : {}),
      ...this.timer.drain('time/'),
    });
    return pairs;
  }

  private enterPolicyPhase(): void {
    this.phaseNow = 'policy';
    this.rewardEnv.scorer = this.rewardModel;
  }

  /** MAGRPO's evaluation on the task's own reward (as CoMLRL's MARLHF evaluates). */
  override async evaluate(): Promise<MAGRPOEvalResult<T, S>> {
    const scorer = this.rewardEnv.scorer;
    this.rewardEnv.scorer = null;
    try {
      return await super.evaluate();
    } finally {
      this.rewardEnv.scorer = scorer;
    }
  }

  /** The reward model, into `dir/reward_model/`. */
  protected override async saveOwnModels(dir: string): Promise<string[]> {
    const rm = join(dir, REWARD_MODEL_DIR);
    await this.rewardModel.save(rm);
    return [rm];
  }

  /** MAGRPO's state plus the phase (the reward model's weights are in the checkpoint's `reward_model/`). */
  override exportState(): MARLHFTrainerState {
    const state = super.exportState();
    return { ...state, extra: { ...state.extra, marlhf: { phase: this.phaseNow } } };
  }

  /**
   * Restores a snapshot from {@link MARLHFTrainer.exportState}. Build the trainer on the
   * checkpoint's weights first: the agents, and the reward model (`rewardModel` and `rewardHead`
   * from `reward_model/`) when the snapshot is past phase 1.
   */
  override importState(state: MARLHFTrainerState): void {
    const phase: unknown = (state.extra as Partial<MARLHFStateExtra> | undefined)?.marlhf?.phase;
    if (phase !== 'reward_model' && phase !== 'policy') throw new Error(`importState: a MARLHF state needs extra.marlhf.phase 'reward_model' or 'policy', got ${JSON.stringify(phase)}`);
    if (phase === 'policy' && !this.headGiven) {
      throw new Error("importState: the state is past phase 1, but this trainer's reward model has a fresh head; build it with the checkpoint's reward model (rewardHead from reward_model/)");
    }
    super.importState(state);
    if (phase === 'policy') this.enterPolicyPhase();
    else {
      this.phaseNow = 'reward_model';
      this.rewardEnv.scorer = null;
    }
  }

  /** Frees what MAGRPOTrainer frees and the reward model's head (its LM stays with the caller). */
  override dispose(): void {
    super.dispose();
    this.rewardModel.dispose();
  }
}
