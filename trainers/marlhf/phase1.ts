/**
 * MARLHF's phase 1 and the reward model's place in a run, shared by both phase-2 trainers (the
 * MAGRPO family in ./trainer.ts, the actor-critic one in ./actor-critic.ts): for every training
 * task each agent samples `preference_num_candidates` completions; the k-th completions of the
 * agents form joint candidate k, which the task's reward scores; `pair_selection` turns each
 * task's non-tied candidates into (winner, loser) pairs (MADPO's `selectPreferencePairs`). A
 * {@link JointRewardModel} is fitted to all pairs with the Bradley–Terry loss for
 * `reward_num_train_epochs` passes, shuffled, in batches of `reward_train_batch_size`; from then on
 * it is frozen and its score is phase 2's reward (the {@link JointRewardEnv} the trainer plays).
 *
 * The runner owns the reward model, the phase and phase 1's streams; the trainer lends it what it
 * needs of the run (its `PreItemsHost`: agents, sampling, counters, logger).
 */
import { join } from 'node:path';
import type { CriticHead } from '../../src/critic/heads.js';
import type { CriticLM } from '../../src/critic/value-model.js';
import type { Agent } from '../../src/decpomdp/agent.js';
import { rngFor, type Rng } from '../../src/util/rng.js';
import { encodePrompt, type CompletionGroup } from '../core/generation.js';
import { takeJointActions } from '../core/joint-step.js';
import { agentDirs, type ModelLayout } from '../core/save.js';
import { assertFiniteReward, type PhaseReport, type PreItemsHost } from '../core/trainer.js';
import { selectPreferencePairs } from '../madpo/preference.js';
import { mean } from '../magrpo/advantage.js';
import type { MARLHFConfig } from './config.js';
import type { JointRewardEnv } from './env.js';
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

/** The reward model's inputs of a MARLHF trainer's options. */
export interface RewardModelInputs {
  /** The reward model's LM and tokenizer (its own: not an actor's model). */
  rewardModel: CriticLM;
  /** A scalar head to use instead of a fresh one (a checkpoint's `reward_model/value_head.*`, to resume). */
  rewardHead?: CriticHead;
  /** Preference pairs to fit the reward model to, instead of phase 1's rollout over the training tasks. */
  preferencePairs?: readonly JointPreference[];
}

/** Phase 1 and the reward model of a MARLHF run (see the module comment). */
export class RewardModelPhase<T, S> {
  /** The joint reward model (fitted in phase 1, then frozen). */
  readonly model: JointRewardModel;
  private readonly givenPairs: readonly JointPreference[] | null;
  private readonly headGiven: boolean;
  /** Pair order of `random` selection. */
  private readonly preferenceRng: Rng;
  /** The order of the pairs in each pass of the fit. */
  private readonly fitRng: Rng;
  private phaseNow: MARLHFPhase = 'reward_model';
  /** Phase 1 was stopped part-way (see {@link RewardModelPhase.fit}). */
  private cut = false;

  constructor(
    private readonly className: string,
    private readonly config: MARLHFConfig,
    private readonly env: JointRewardEnv<T, S>,
    agents: readonly Agent[],
    inputs: RewardModelInputs,
  ) {
    const lm = inputs.rewardModel;
    if (!lm?.model || !lm.tokenizer) throw new Error(`${className}: rewardModel (the reward model LM and its tokenizer) is required`);
    if (agents.some((a) => a.model === lm.model)) throw new Error(`${className}: the reward model is an actor's model; give it its own LM`);
    this.givenPairs = inputs.preferencePairs ? [...inputs.preferencePairs] : null;
    this.headGiven = inputs.rewardHead !== undefined;
    this.preferenceRng = rngFor(config.seed, 'preference');
    this.fitRng = rngFor(config.seed, 'reward-model');
    this.model = JointRewardModel.create(lm, rngFor(config.seed, 'reward-head'), {
      head: inputs.rewardHead,
      maxLength: config.reward_max_length,
      truncation: config.reward_truncation,
    });
  }

  /** 'reward_model' until phase 1 has fitted the reward model, then 'policy'. */
  get phase(): MARLHFPhase {
    return this.phaseNow;
  }

  /**
   * Phase 1: preference pairs (given, or from the rollout), then the Bradley–Terry fit; the reward
   * model is the reward from then on. Each task's candidates and each fit step are reported to
   * `report`; when it says stop, phase 1 ends unfinished and this runner cannot run it again
   * (its streams and the reward model have moved on): the CLI starts such a run over.
   */
  async fit(host: PreItemsHost<T>, report: PhaseReport = () => Promise.resolve(false)): Promise<void> {
    if (this.cut) throw new Error('MARLHF: phase 1 was stopped part-way, so this trainer cannot run it again (its random streams and reward model moved on); build a new trainer (the CLI\'s --resume starts such a run over)');
    const pairs = this.givenPairs ?? (await this.collectPreferences(host, report));
    if (pairs === null) {
      this.cut = true;
      return;
    }
    if (pairs.length === 0) {
      throw new Error(
        'MARLHF: no preference pairs: every joint candidate of every training task got the same task reward; ' +
          'raise preference_num_candidates or temperature, or check the task reward',
      );
    }
    const c = this.config;
    this.refuseInseparablePairs(pairs);
    const variables = this.model.trainableVariables(c.reward_freeze_backbone);
    // Not scheduled and not among the `lr/` metrics: it is disposed when the fit is done.
    const optimizer = host.optimizer(variables, c.reward_learning_rate);
    const perEpoch = Math.ceil(pairs.length / c.reward_train_batch_size);
    const total = perEpoch * c.reward_num_train_epochs;
    let step = 0;
    try {
      for (let epoch = 0; epoch < c.reward_num_train_epochs; epoch++) {
        const order = this.fitRng.shuffle(pairs.map((_, i) => i));
        for (let at = 0; at < order.length; at += c.reward_train_batch_size) {
          const batch = order.slice(at, at + c.reward_train_batch_size).map((i) => pairs[i]);
          const options = { maxGradNorm: c.max_grad_norm, chunkSize: c.scoring_batch_size, label: 'MARLHF reward model' };
          const r = await host.timer.time('reward_model', () => this.model.step(optimizer, variables, batch, options));
          host.countOptimizerStep();
          step++;
          // The fit's own x: its step (env_step does not move while it runs).
          await host.logger?.log(host.envStep, { 'reward_model/step': step, 'reward_model/loss': r.loss, 'reward_model/accuracy': r.accuracy, 'reward_model/grad_norm': r.gradNorm, 'reward_model/epoch': epoch });
          if (await report('reward model fit', step, total)) {
            this.cut = true;
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
    const bad = this.model.inseparablePair(pairs);
    if (bad === null) return;
    const c = this.config;
    const hint = c.reward_truncation === 'right' ? ", or set reward_truncation: prompts (the prompts are cut and the completions kept)" : '';
    throw new Error(
      `MARLHF: reward_max_length ${c.reward_max_length} cuts the joint text of preference pair ${bad.index + 1} of ${pairs.length} so that its winner and loser read the same tokens ` +
        `(its joint text is ${bad.fullLength} tokens with reward_truncation: ${c.reward_truncation}): the reward model could not tell them apart; raise reward_max_length to at least ${bad.fullLength}${hint}`,
    );
  }

  /** Every training task's preference pairs, from its joint candidates ranked by the task's reward (CoMLRL's preference rollout). */
  private async collectPreferences(host: PreItemsHost<T>, report: PhaseReport): Promise<JointPreference[] | null> {
    const c = this.config;
    const env = this.env.task;
    const n = c.preference_num_candidates;
    const pairs: JointPreference[] = [];
    const rewardMeans: number[] = [];
    for (const [t, task] of host.trainTasks.entries()) {
      const state = env.initialState(task);
      const prompts = host.agents.map((_, i) => env.observe(state, i));
      const groups: CompletionGroup[] = [];
      for (let i = 0; i < host.agents.length; i++) {
        const promptIds = encodePrompt(host.agents[i], prompts[i], env.rendering?.(state, i));
        groups.push(await host.timer.time('generation', () => host.sample(i, promptIds, n)));
      }
      const actions = Array.from({ length: n }, (_, k) => groups.map((g) => g.texts[k]));
      const steps = await takeJointActions(env, state, actions, (rewards) => rewards.map(() => false), (r) => assertFiniteReward('MARLHF', env.name, r, 0), host.timer);
      const rewards = steps.map((s) => s.reward);
      host.addEnvSteps(n);
      rewardMeans.push(mean(rewards));
      for (const { winner: w, loser: l } of selectPreferencePairs(rewards, c.pair_selection, c.preference_pairs_per_sample, this.preferenceRng)) {
        pairs.push({ prompts, winner: actions[w], loser: actions[l], winnerReward: rewards[w], loserReward: rewards[l] });
      }
      if (await report('reward model candidates', t + 1, host.trainTasks.length)) return null;
    }
    await host.logger?.log(host.envStep, {
      'reward_model/num_pairs': pairs.length,
      'reward_model/candidate_reward_mean': mean(rewardMeans),
      ...(pairs.length > 0 ? { 'reward_model/reward_gap_mean': mean(pairs.map((p) => (p.winnerReward ?? 0) - (p.loserReward ?? 0))) } : {}),
      ...host.timer.drain('time/'),
    });
    return pairs;
  }

  private enterPolicyPhase(): void {
    this.phaseNow = 'policy';
    this.env.scorer = this.model;
  }

  /** Runs `fn` (an evaluation) with the task's own reward, as CoMLRL's MARLHF evaluates. */
  async withTaskReward<R>(fn: () => Promise<R>): Promise<R> {
    const scorer = this.env.scorer;
    this.env.scorer = null;
    try {
      return await fn();
    } finally {
      this.env.scorer = scorer;
    }
  }

  /** The reward model, into `dir/reward_model/`; returns that directory. */
  async save(dir: string): Promise<string> {
    const rm = join(dir, REWARD_MODEL_DIR);
    await this.model.save(rm);
    return rm;
  }

  /**
   * Reads the phase of a snapshot's `extra.marlhf` (before the trainer restores anything else).
   * @throws Error when it is missing, or past phase 1 while this runner's reward model has a fresh head.
   */
  checkPhase(extra: unknown): MARLHFPhase {
    const phase: unknown = (extra as { marlhf?: { phase?: unknown } } | undefined)?.marlhf?.phase;
    if (phase !== 'reward_model' && phase !== 'policy') throw new Error(`importState: a MARLHF state needs extra.marlhf.phase 'reward_model' or 'policy', got ${JSON.stringify(phase)}`);
    if (phase === 'policy' && !this.headGiven) {
      throw new Error("importState: the state is past phase 1, but this trainer's reward model has a fresh head; build it with the checkpoint's reward model (rewardHead from reward_model/)");
    }
    return phase;
  }

  /** Sets the phase of a restored snapshot (checked by {@link RewardModelPhase.checkPhase}). */
  restorePhase(phase: MARLHFPhase): void {
    if (phase === 'policy') this.enterPolicyPhase();
    else {
      this.phaseNow = 'reward_model';
      this.env.scorer = null;
    }
  }

  /** Frees the reward model's head (its LM stays with the caller). */
  dispose(): void {
    this.model.dispose();
  }
}
