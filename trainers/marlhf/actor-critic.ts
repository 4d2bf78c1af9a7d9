/**
 * MARLHF with CoMLRL's actor-critic phase 2 (`rl_algorithm: maac | iac`): phase 1 as every MARLHF
 * run (./phase1.ts), then CoLLM's update ({@link CoLLMTrainer}) over the task's environment with
 * the reward swapped for the fitted model's score (./env.ts) — `maac`: CoLLM-CC's one centralized
 * critic (CoMLRL's MAAC), `iac`: CoLLM-DC's critic per agent, a separate LM
 * (`use_separate_critic: true`) or a value head on each actor (CoMLRL's IAC).
 *
 * The actor-critic config is the MARLHF config's fields that CoLLM-CC / CoLLM-DC have under the
 * same names (the MAGRPO fields they share, and the critic fields `critic_learning_rate`,
 * `use_separate_critic`, `critic_type`, `value_loss_coef`, `value_clip_range`,
 * `critic_value_head_hidden_dim`, `value_head_hidden_dim`), with their values as written in the
 * MARLHF config; the options CoMLRL's MARLHFConfig has no field for (comlrl's paper-aligned
 * settings, `update_order`, ...) take CoLLM's defaults unless the config's `actor_critic` or the
 * library's `actorCritic` sets them (e.g. `comlrlCompatible()`).
 *
 * A checkpoint holds the agents, the reward model (`reward_model/`) and the critics where CoLLM
 * saves them (`critic/`, `agent_i/critic/`, or `agent_i/value_head.*`), with the phase.
 */
import type { CriticHead } from '../../src/critic/heads.js';
import type { CriticLM } from '../../src/critic/value-model.js';
import type { TrainerState } from '../core/state.js';
import { agentDirs, type ModelLayout, type SaveOptions } from '../core/save.js';
import type { PhaseReport } from '../core/trainer.js';
import { centralizedCritic } from '../collm/centralized.js';
import type { CoLLMCCConfig, CoLLMDCConfig } from '../collm/config.js';
import { decentralizedCritics } from '../collm/decentralized.js';
import { centralizedCriticLayout, separateCriticsLayout, sharedHeadsLayout } from '../collm/layout.js';
import type { ActorCriticEvalResult, ActorCriticInputs, ActorCriticStateExtra } from '../collm/run.js';
import { CoLLMTrainer } from '../collm/trainer.js';
import {
  isActorCriticAlgorithm,
  marlhfActorCriticConfig,
  parseMARLHFConfig,
  type MARLHFActorCriticAlgorithm,
  type MARLHFActorCriticConfig,
  type MARLHFActorCriticExtras,
  type MARLHFConfig,
  type MARLHFConfigInput,
} from './config.js';
import { JointRewardEnv } from './env.js';
import { marlhfLayout, RewardModelPhase, type MARLHFPhase, type RewardModelInputs } from './phase1.js';
import type { JointRewardModel } from './reward-model.js';

/** Where a maac / iac MARLHF run's models are in a directory it saved: the agents, then the reward model and the critics (CoLLM's places). */
export function marlhfActorCriticLayout(config: Pick<MARLHFConfig, 'rl_algorithm' | 'use_separate_critic'>, dir: string, numAgents: number): ModelLayout {
  const rm = marlhfLayout(dir, numAgents);
  const critics = config.rl_algorithm === 'maac' ? centralizedCriticLayout(dir) : config.use_separate_critic ? separateCriticsLayout(dir, numAgents) : sharedHeadsLayout(dir, numAgents);
  return { agents: agentDirs(dir, numAgents), critics: [...rm.critics, ...critics.critics], heads: [...rm.heads, ...critics.heads] };
}

/** Resume data of {@link MARLHFActorCriticTrainer}: CoLLM's, plus the phase and phase 2's algorithm. */
export interface MARLHFActorCriticStateExtra extends ActorCriticStateExtra {
  readonly marlhf: { readonly phase: MARLHFPhase; readonly rl_algorithm: MARLHFActorCriticAlgorithm };
}

/** A {@link MARLHFActorCriticTrainer} snapshot. */
export type MARLHFActorCriticTrainerState = TrainerState<MARLHFActorCriticStateExtra>;

/** Constructor arguments of {@link MARLHFActorCriticTrainer}. */
export interface MARLHFActorCriticTrainerOptions<T, S> extends ActorCriticInputs<T, S>, RewardModelInputs {
  /** CoMLRL `MARLHFConfig` fields (snake_case) with `rl_algorithm` maac or iac; see ./config.ts. */
  config?: MARLHFConfigInput;
  /** comlrl's actor-critic options CoMLRL's MARLHFConfig has no field for (see {@link MARLHFActorCriticExtras}). */
  actorCritic?: MARLHFActorCriticExtras;
  /** maac: the centralized critic's LM and tokenizer (not an actor's model, not the reward model's). */
  critic?: CriticLM;
  /** maac: a value head for the centralized critic (its checkpoint's `critic/value_head.*`, to resume). */
  criticHead?: CriticHead;
  /** iac with `use_separate_critic` (the default): one critic LM per agent, separate model objects. */
  critics?: readonly CriticLM[];
  /** iac: one value head per agent (a checkpoint's, to resume). */
  criticHeads?: readonly CriticHead[];
}

/**
 * Trains n agents with MARLHF, phase 2 on CoLLM's actor-critic update (see the module comment).
 *
 * ```ts
 * const trainer = new MARLHFActorCriticTrainer({ agents, rewardModel, critic, env, trainTasks, config: { rl_algorithm: 'maac' } });
 * await trainer.train();
 * await trainer.save('out'); // out/agent_i/, out/reward_model/, out/critic/
 * ```
 */
export class MARLHFActorCriticTrainer<T, S> extends CoLLMTrainer<T, S, MARLHFActorCriticConfig> {
  /** The validated MARLHF config. */
  readonly marlhfConfig: MARLHFConfig;
  /** Phase 2's algorithm. */
  readonly algorithm: MARLHFActorCriticAlgorithm;
  private readonly rewardPhase: RewardModelPhase<T, S>;

  constructor(options: MARLHFActorCriticTrainerOptions<T, S>) {
    const config = parseMARLHFConfig(options.config ?? {});
    const algorithm = config.rl_algorithm;
    if (!isActorCriticAlgorithm(algorithm)) {
      throw new Error(`MARLHFActorCriticTrainer: rl_algorithm '${algorithm}' trains phase 2 with MAGRPO's update: build it with createMARLHFTrainer or MARLHFTrainer`);
    }
    const phase2 = marlhfActorCriticConfig(config, options.actorCritic);
    const rewardEnv = new JointRewardEnv(options.env);
    const critics = options.critics ?? [];
    const rm = options.rewardModel?.model;
    if (rm !== undefined && [options.critic, ...critics].some((c) => c?.model === rm)) {
      throw new Error("MARLHFActorCriticTrainer: a critic is the reward model's LM; the reward model is frozen after phase 1, so give each critic its own LM");
    }
    if (algorithm === 'maac' && !options.critic) throw new Error('MARLHFActorCriticTrainer: rl_algorithm maac needs critic (the centralized critic LM and its tokenizer)');
    if (algorithm === 'iac' && config.use_separate_critic && critics.length === 0) {
      throw new Error('MARLHFActorCriticTrainer: rl_algorithm iac with use_separate_critic true needs critics (one critic LM per agent); or set use_separate_critic: false for a value head on each actor');
    }
    super({ className: 'MARLHFActorCriticTrainer', label: `MARLHF (${algorithm})`, stateTag: 'marlhf' }, phase2, { ...options, env: rewardEnv }, (agents, cfg, rng, featureSize) =>
      algorithm === 'maac' ? centralizedCritic(agents, cfg as CoLLMCCConfig, options.critic, options.criticHead, rng, featureSize) : decentralizedCritics(agents, cfg as CoLLMDCConfig, options, rng, featureSize),
    );
    this.marlhfConfig = config;
    this.algorithm = algorithm;
    this.rewardPhase = new RewardModelPhase('MARLHFActorCriticTrainer', config, rewardEnv, this.agents, options);
  }

  /** The joint reward model (fitted in phase 1, then frozen). */
  get rewardModel(): JointRewardModel {
    return this.rewardPhase.model;
  }

  /** 'reward_model' until phase 1 has fitted the reward model, then 'policy'. */
  get phase(): MARLHFPhase {
    return this.rewardPhase.phase;
  }

  /** Phase 1 when it has not run yet, before CoLLM's items. */
  protected override async beforeItems(report: PhaseReport): Promise<void> {
    if (this.phase === 'reward_model') await this.fitRewardModel(report);
  }

  /** Phase 1 (see {@link RewardModelPhase.fit}). */
  fitRewardModel(report?: PhaseReport): Promise<void> {
    return this.rewardPhase.fit(this.preItemsHost(), report);
  }

  /** CoLLM's evaluation on the task's own reward (as CoMLRL's MARLHF evaluates). */
  override evaluate(): Promise<ActorCriticEvalResult<T, S>> {
    return this.rewardPhase.withTaskReward(() => super.evaluate());
  }

  /** The reward model into `dir/reward_model/`, and the critics where CoLLM saves them. */
  protected override async saveOwnModels(dir: string, options: SaveOptions): Promise<string[]> {
    const rm = await this.rewardPhase.save(dir);
    return [rm, ...(await super.saveOwnModels(dir, options))];
  }

  /** CoLLM's state plus the phase and the algorithm (the weights are in the checkpoint's folders). */
  override exportState(): MARLHFActorCriticTrainerState {
    const state = super.exportState();
    return { ...state, extra: { ...state.extra, marlhf: { phase: this.phase, rl_algorithm: this.algorithm } } };
  }

  /**
   * Restores a snapshot from {@link MARLHFActorCriticTrainer.exportState}. Build the trainer on
   * the checkpoint's weights first: the agents, the critics and their heads, and the reward model
   * (`rewardModel` and `rewardHead` from `reward_model/`) when the snapshot is past phase 1.
   */
  override importState(state: MARLHFActorCriticTrainerState): void {
    const saved: unknown = (state.extra as Partial<MARLHFActorCriticStateExtra> | undefined)?.marlhf?.rl_algorithm;
    if (saved !== this.algorithm) throw new Error(`importState: the state is of a MARLHF run with phase 2 ${JSON.stringify(saved ?? 'magrpo family')}, this trainer's rl_algorithm is '${this.algorithm}'`);
    const phase = this.rewardPhase.checkPhase(state.extra);
    super.importState(state);
    this.rewardPhase.restorePhase(phase);
  }

  /** Frees what CoLLMTrainer frees and the reward model's head (the LMs stay with the caller). */
  override dispose(): void {
    super.dispose();
    this.rewardPhase.dispose();
  }
}
