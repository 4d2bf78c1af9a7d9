/**
 * MARLHF — multi-agent RLHF with a learned joint reward model (CoMLRL's `MARLHFTrainer`).
 *
 * Phase 1 (before the first training item, once per run; ./phase1.ts): preference pairs from the
 * task's reward over joint candidates, and the Bradley–Terry fit of a {@link JointRewardModel}.
 * Library users may hand in their own pairs (`preferencePairs`) instead of the rollout.
 *
 * Phase 2 is CoMLRL's newest dispatch on `rl_algorithm`: the MAGRPO family (this file: the
 * `MAGRPOTrainer` this class extends, with the advantage mode of `rl_algorithm` — magrpo: mean,
 * mareinforce: raw, maremax: max, marloo: rloo), or the actor-critic update (`maac`: CoLLM-CC's
 * centralized critic, `iac`: CoLLM-DC's per-agent critics; ./actor-critic.ts). Either plays the
 * task's environment with the reward swapped for the fitted model's score (./env.ts); evaluation
 * plays the task with its own reward, as CoMLRL's. {@link createMARLHFTrainer} picks the class.
 *
 * Phase 1 runs inside `train()` after train begin, reporting each task's candidates and each fit
 * step to the callbacks (`onPhase`: progress, Ctrl-C); each fit row carries its own x,
 * `reward_model/step`. Checkpoints are taken at item ends, so phase 1 has none: a checkpoint holds
 * the fitted reward model (`reward_model/`: LM, tokenizer, `value_head.*`) and the phase; resuming
 * one continues phase 2 exactly, and a run stopped during phase 1 restarts it from the seed.
 *
 * Differences from CoMLRL (docs/differences.md): phase 1's candidates count as env
 * steps (the task's environment scored them; CoMLRL leaves env_step at 0 and logs the reward model
 * at step 0); a phase 1 without any non-tied pair is an error (CoMLRL prints a note and trains
 * nothing); the reward model reads the centralized critic's layout of the joint text (CoMLRL: its
 * own header lines) with the task's observations as the prompts.
 */
import type { TrainerState } from '../core/state.js';
import type { PhaseReport, TrainerInputs } from '../core/trainer.js';
import { MAGRPOTrainer, type MAGRPOEvalResult, type MAGRPOStateExtra } from '../magrpo/trainer.js';
import { isActorCriticAlgorithm, marlhfAdvantageMode, parseMARLHFConfig, type MARLHFConfig, type MARLHFConfigInput } from './config.js';
import { JointRewardEnv } from './env.js';
import { RewardModelPhase, type MARLHFPhase, type RewardModelInputs } from './phase1.js';
import type { JointRewardModel } from './reward-model.js';

/** MARLHF's trainer-specific resume data: MAGRPO's, plus the phase. */
export interface MARLHFStateExtra extends MAGRPOStateExtra {
  readonly marlhf: { readonly phase: MARLHFPhase };
}

/** A MARLHF trainer snapshot. */
export type MARLHFTrainerState = TrainerState<MARLHFStateExtra>;

/** Constructor arguments of {@link MARLHFTrainer}. */
export interface MARLHFTrainerOptions<T, S> extends TrainerInputs<T, S>, RewardModelInputs {
  /** CoMLRL `MARLHFConfig` fields (snake_case); see ./config.ts. */
  config?: MARLHFConfigInput;
}

/**
 * Trains n agents with MARLHF, phase 2 on the MAGRPO family, on a single-turn LLM Dec-POMDP (see
 * the module comment); `rl_algorithm: maac | iac` is {@link MARLHFActorCriticTrainer}'s.
 *
 * ```ts
 * const trainer = new MARLHFTrainer({ agents, rewardModel: { model, tokenizer }, env, trainTasks, evalTasks, config: { preference_num_candidates: 8 } });
 * await trainer.train();
 * await trainer.save('out'); // out/agent_i/, out/reward_model/
 * ```
 */
export class MARLHFTrainer<T, S> extends MAGRPOTrainer<T, S> {
  /** The validated config. */
  readonly marlhfConfig: MARLHFConfig;
  private readonly rewardPhase: RewardModelPhase<T, S>;

  constructor(options: MARLHFTrainerOptions<T, S>) {
    const config = parseMARLHFConfig(options.config ?? {});
    if (isActorCriticAlgorithm(config.rl_algorithm)) {
      throw new Error(`MARLHFTrainer: rl_algorithm '${config.rl_algorithm}' trains phase 2 with an actor-critic update: build it with createMARLHFTrainer or MARLHFActorCriticTrainer (with its critics)`);
    }
    const rewardEnv = new JointRewardEnv(options.env);
    // Phase 2 is MAGRPO's update with the advantage mode of `rl_algorithm` (CoMLRL's dispatch of its MAGRPO family).
    const phase2 = { ...config, advantage_mode: marlhfAdvantageMode(config) };
    super({ ...options, env: rewardEnv }, { names: { className: 'MARLHFTrainer', label: 'MARLHF', stateTag: 'marlhf' }, parse: () => phase2 });
    this.marlhfConfig = config;
    this.rewardPhase = new RewardModelPhase('MARLHFTrainer', config, rewardEnv, this.agents, options);
  }

  /** The joint reward model (fitted in phase 1, then frozen). */
  get rewardModel(): JointRewardModel {
    return this.rewardPhase.model;
  }

  /** 'reward_model' until phase 1 has fitted the reward model, then 'policy'. */
  get phase(): MARLHFPhase {
    return this.rewardPhase.phase;
  }

  /** Phase 1 when it has not run yet, before MAGRPO's items (see TrainerBase.beforeItems). */
  protected override async beforeItems(report: PhaseReport): Promise<void> {
    if (this.phase === 'reward_model') await this.fitRewardModel(report);
  }

  /** Phase 1 (see {@link RewardModelPhase.fit}). */
  fitRewardModel(report?: PhaseReport): Promise<void> {
    return this.rewardPhase.fit(this.preItemsHost(), report);
  }

  /** MAGRPO's evaluation on the task's own reward (as CoMLRL's MARLHF evaluates). */
  override evaluate(): Promise<MAGRPOEvalResult<T, S>> {
    return this.rewardPhase.withTaskReward(() => super.evaluate());
  }

  /** The reward model, into `dir/reward_model/`. */
  protected override async saveOwnModels(dir: string): Promise<string[]> {
    return [await this.rewardPhase.save(dir)];
  }

  /** MAGRPO's state plus the phase (the reward model's weights are in the checkpoint's `reward_model/`). */
  override exportState(): MARLHFTrainerState {
    const state = super.exportState();
    return { ...state, extra: { ...state.extra, marlhf: { phase: this.phase } } };
  }

  /**
   * Restores a snapshot from {@link MARLHFTrainer.exportState}. Build the trainer on the
   * checkpoint's weights first: the agents, and the reward model (`rewardModel` and `rewardHead`
   * from `reward_model/`) when the snapshot is past phase 1.
   */
  override importState(state: MARLHFTrainerState): void {
    const phase = this.rewardPhase.checkPhase(state.extra);
    super.importState(state);
    this.rewardPhase.restorePhase(phase);
  }

  /** Frees what MAGRPOTrainer frees and the reward model's head (its LM stays with the caller). */
  override dispose(): void {
    super.dispose();
    this.rewardPhase.dispose();
  }
}
