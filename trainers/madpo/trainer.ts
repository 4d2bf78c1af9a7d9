/**
 * MADPO — multi-agent direct preference optimization (CoMLRL 1.4's `MADPOTrainer`), on-policy.
 *
 * For each training task (one turn):
 *   1. every agent samples K candidates for its prompt (K = `preference_num_candidates`, else
 *      `num_generations`; one generate call per agent);
 *   2. joint candidate k is candidate k of every agent (index-aligned, as CoMLRL); each gets the
 *      environment's joint scalar reward;
 *   3. winner/loser pairs of joint candidates are chosen by `pair_selection`, at most
 *      `preference_pairs_per_sample` of them; equal rewards make no pair (./preference.ts);
 *      each agent's frozen reference scores the winner's and loser's completions once, here;
 *   4. pairs are buffered; a buffer of `rollout_buffer_size` pairs (and the rest at epoch end) is
 *      shuffled into minibatches of `train_batch_size`, and per minibatch every agent takes one
 *      AdamW step on the joint DPO loss mean_p −log σ(β Σ_i Δ_{p,i}) through its own log-probs
 *      (the other agents' margins are constants: ./preference.ts derives the rows). The margins
 *      of all agents are measured before any of them steps, as CoMLRL does.
 *
 * The reference of each agent is `referenceOf` (core/reference-kl.ts): its base with the adapter
 * off under LoRA (no second copy), else `Agent.reference`, else a frozen copy of the weights it
 * starts from.
 *
 * Differences from CoMLRL 1.4 (README "MADPO"): CoMLRL samples the whole preference set once from
 * the starting policy and then trains `num_train_epochs` passes over it; comlrl samples each
 * item's candidates from the current policy as it reaches the item (each epoch anew), so training
 * walks the tasks as the other trainers do (eval schedule, checkpoints, exact resume). CoMLRL's
 * DPO margin has no reference term (log π(y_w) − log π(y_l)); comlrl's is DPO's, against the
 * frozen reference.
 */
import { planMinibatches } from '../../src/buffer/replay.js';
import type { AdamW } from '../../src/optim/adamw.js';
import type { EvalEpisode } from '../core/eval.js';
import { encodePrompt, generateGroup, type CompletionGroup } from '../core/generation.js';
import { takeJointActions } from '../core/joint-step.js';
import { policyGradientStep } from '../core/loss.js';
import { drainAgentWindows, turnKey, type MetricRecord, type UpdateWindow } from '../core/metrics.js';
import { referenceOf, type ReferencePolicy } from '../core/reference-kl.js';
import type { TrainerState } from '../core/state.js';
import { assertFiniteReward, TrainerBase, type OnePathEvalResult, type TrainerInputs } from '../core/trainer.js';
import { hasZeroSpread, mean } from '../magrpo/advantage.js';
import { magrpoEvalEarlyTermination } from '../magrpo/config.js';
import { madpoCandidates, parseMADPOConfig, type MADPOConfig, type MADPOConfigInput } from './config.js';
import { agentDpoRows, agentMargins, dpoStats, scoredCompletionIds, selectPreferencePairs, type PairLogProbs, type PreferencePair } from './preference.js';

/** MADPO's trainer-specific resume data. */
export interface MADPOStateExtra {
  /** Pairs waiting for an update. */
  readonly buffer: PreferencePair[];
  /** Sums for the epoch-end metrics. */
  readonly epochStats: { items: number; rewardSum: number };
}

/** A MADPO trainer snapshot. */
export type MADPOTrainerState = TrainerState<MADPOStateExtra>;

/** Constructor arguments of {@link MADPOTrainer}. */
export interface MADPOTrainerOptions<T, S> extends TrainerInputs<T, S> {
  /** CoMLRL `MADPOConfig` fields (snake_case) plus comlrl extras; see ./config.ts. */
  config?: MADPOConfigInput;
}

/** One evaluation's results. */
export type MADPOEvalResult<T, S> = OnePathEvalResult<T, S>;

/** What one item's rollout produced (for its metrics). */
interface ItemRollout {
  readonly rewards: number[];
  readonly pairs: number;
}

/** DPO statistics since the last log (sums over minibatches, per pair where noted). */
interface DpoWindow {
  minibatches: number;
  pairs: number;
  lossSum: number;
  accuracySum: number;
  chosenSum: number;
  rejectedSum: number;
  rewardGapSum: number;
  logpChosenSum: number;
  logpRejectedSum: number;
}

/**
 * Σ_t log p of each completion under `scorer` (a policy or a reference); a completion with no
 * scored token sums to 0 without a pass (score_last_token: false on a one-token completion).
 */
async function sequenceLogProbSums(scorer: { tokenLogProbs(p: number[][], c: number[][]): Promise<number[][]> }, prompts: number[][], completions: number[][]): Promise<number[]> {
  const rows = completions.flatMap((c, i) => (c.length > 0 ? [i] : []));
  const sums = completions.map(() => 0);
  if (rows.length === 0) return sums;
  const lps = await scorer.tokenLogProbs(rows.map((i) => prompts[i]), rows.map((i) => completions[i]));
  rows.forEach((i, r) => {
    sums[i] = lps[r].reduce((a, b) => a + b, 0);
  });
  return sums;
}

const emptyDpoWindow = (): DpoWindow => ({ minibatches: 0, pairs: 0, lossSum: 0, accuracySum: 0, chosenSum: 0, rejectedSum: 0, rewardGapSum: 0, logpChosenSum: 0, logpRejectedSum: 0 });

/**
 * Trains n LLM agents with multi-agent DPO on a single-turn LLM Dec-POMDP, the preferences coming
 * from the environment's joint reward.
 *
 * ```ts
 * const trainer = new MADPOTrainer({ agents, env, trainTasks, config: { num_generations: 4, dpo_beta: 0.1 } });
 * await trainer.train();
 * ```
 */
export class MADPOTrainer<T, S> extends TrainerBase<T, S, MADPOConfig> {
  /** One AdamW per agent. */
  readonly optimizers: readonly AdamW[];
  /** Each agent's frozen reference policy. */
  readonly references: readonly ReferencePolicy[];

  /** K: candidates per agent and prompt. */
  private readonly k: number;
  private buffer: PreferencePair[] = [];
  private epochStats = { items: 0, rewardSum: 0 };
  private tokensWindow: number[];
  private completionsWindow: number[];
  private updateWindow: UpdateWindow[];
  private dpoWindow = emptyDpoWindow();

  constructor(options: MADPOTrainerOptions<T, S>) {
    super({ className: 'MADPOTrainer', label: 'MADPO', stateTag: 'madpo' }, parseMADPOConfig(options.config ?? {}), options);
    const { agents, config } = this;
    this.k = madpoCandidates(config);
    this.optimizers = agents.map((a, i) => this.adamW(a.model.trainableVariables(), config.agent_learning_rate, { kind: 'agent', index: i }));
    this.tokensWindow = agents.map(() => 0);
    this.completionsWindow = agents.map(() => 0);
    this.updateWindow = agents.map(() => ({ steps: 0, lossSum: 0, gradNormSum: 0 }));
    // Built before any update: a frozen copy must hold the starting weights.
    this.references = agents.map((a) => referenceOf(a));
  }

  // -------------------------------------------------------------------------------------------
  // Training loop (the epochs and the eval schedule are in core/trainer.ts).
  // -------------------------------------------------------------------------------------------

  /** One task: K joint candidates, their pairs into the buffer, an update per full buffer. */
  protected async trainOn(task: T): Promise<void> {
    const { pairs, rewards } = await this.preferencePairs(task);
    for (const pair of pairs) {
      this.buffer.push(pair);
      if (this.buffer.length >= this.config.rollout_buffer_size) await this.update();
    }
    this.epochStats.items++;
    this.epochStats.rewardSum += mean(rewards);
    await this.maybeLogTrain({ rewards, pairs: pairs.length });
  }

  /** Epoch end: the pairs left in the buffer are trained on too. */
  protected async endEpoch(): Promise<void> {
    if (this.buffer.length > 0) await this.update();
    const { items, rewardSum } = this.epochStats;
    this.epochStats = { items: 0, rewardSum: 0 };
    if (items > 0) await this.logger?.log(this.envStep, { [turnKey(0, 'epoch_reward_mean')]: rewardSum / items, [turnKey(0, 'epoch_avg_return')]: rewardSum / items });
  }

  // -------------------------------------------------------------------------------------------
  // 1–3. Candidates, joint rewards, pairs.
  // -------------------------------------------------------------------------------------------

  /** Steps 1–3 for one task: its preference pairs and the K joint candidates' rewards. */
  async preferencePairs(task: T): Promise<{ pairs: PreferencePair[]; rewards: number[] }> {
    const { agents, env, k, config } = this;
    const state = env.initialState(task);
    const groups: CompletionGroup[] = [];
    for (let i = 0; i < agents.length; i++) {
      const promptIds = encodePrompt(agents[i], env.observe(state, i), env.rendering?.(state, i));
      const group = await this.timer.time('generation', () => generateGroup(agents[i], promptIds, k, this.settings, this.samplingRng, this.completionSource(i)));
      this.tokensWindow[i] += group.ids.reduce((s, c) => s + c.length, 0);
      this.completionsWindow[i] += group.ids.length;
      groups.push(group);
    }
    // Index-aligned joint candidates: (y_{0,k}, …, y_{n−1,k}).
    const actions = Array.from({ length: k }, (_, c) => groups.map((g) => g.texts[c]));
    const steps = await takeJointActions(env, state, actions, (rewards) => rewards.map(() => false), (r) => assertFiniteReward(this.names.label, env.name, r, 0), this.timer);
    const rewards = steps.map((s) => s.reward);
    if (!config.use_environment_step) this.envStep += k;

    const chosen = selectPreferencePairs(rewards, config.pair_selection, config.preference_pairs_per_sample, this.minibatchRng);
    if (chosen.length === 0) return { pairs: [], rewards };
    // The tokens each candidate is scored on (score_last_token: false drops CoMLRL's last one).
    const scored = groups.map((g, i) => g.ids.map((ids) => scoredCompletionIds(ids, agents[i].tokenizer.padTokenId, config.score_last_token)));
    // Each agent's reference scores the candidates the pairs use, once.
    const used = [...new Set(chosen.flatMap((p) => [p.winner, p.loser]))].sort((a, b) => a - b);
    const ref: Map<number, number>[] = [];
    for (let i = 0; i < agents.length; i++) {
      const g = groups[i];
      const sums = await this.timer.time('reference', () => sequenceLogProbSums(this.references[i], used.map(() => [...g.promptIds]), used.map((c) => scored[i][c])));
      ref.push(new Map(used.map((c, u) => [c, sums[u]])));
    }
    const candidateRewardMean = mean(rewards);
    const refSum = (i: number, c: number): number => ref[i].get(c) ?? Number.NaN;
    const pairs = chosen.map(
      (p): PreferencePair => ({
        promptIds: groups.map((g) => [...g.promptIds]),
        winnerIds: scored.map((rows) => [...rows[p.winner]]),
        loserIds: scored.map((rows) => [...rows[p.loser]]),
        refWinner: groups.map((_, i) => refSum(i, p.winner)),
        refLoser: groups.map((_, i) => refSum(i, p.loser)),
        winnerReward: rewards[p.winner],
        loserReward: rewards[p.loser],
        candidateRewardMean,
      }),
    );
    return { pairs, rewards };
  }

  // -------------------------------------------------------------------------------------------
  // 4. Buffer → minibatches → one AdamW step per agent each.
  // -------------------------------------------------------------------------------------------

  /** The current policies' log-probs of every pair's winner and loser completions (tape-free). */
  async pairLogProbs(pairs: readonly PreferencePair[]): Promise<PairLogProbs[]> {
    const winner = pairs.map(() => [] as number[]);
    const loser = pairs.map(() => [] as number[]);
    for (let i = 0; i < this.agents.length; i++) {
      const prompts = pairs.flatMap((p) => [[...p.promptIds[i]], [...p.promptIds[i]]]);
      const completions = pairs.flatMap((p) => [[...p.winnerIds[i]], [...p.loserIds[i]]]);
      const sums = await sequenceLogProbSums(this.agents[i].model, prompts, completions);
      pairs.forEach((_, p) => {
        winner[p].push(sums[2 * p]);
        loser[p].push(sums[2 * p + 1]);
      });
    }
    return pairs.map((_, p) => ({ winner: winner[p], loser: loser[p] }));
  }

  /** Consumes the buffer: shuffled minibatches, each one DPO step per agent. */
  private async update(): Promise<void> {
    const buffer = this.buffer;
    this.buffer = [];
    const beta = this.config.dpo_beta;
    const plan = planMinibatches(buffer.map(() => 0), { batchSize: this.trainBatchSize, epochs: 1, rng: this.minibatchRng });
    for (const { indices } of plan) {
      const minibatch = indices.map((i) => buffer[i]);
      // Every agent's margin at the weights before this minibatch's steps.
      const logProbs = await this.timer.time('training', () => this.pairLogProbs(minibatch));
      const margins = minibatch.map((pair, p) => agentMargins(pair, logProbs[p]));
      const stats = dpoStats(margins, beta);
      for (let a = 0; a < this.agents.length; a++) {
        const options = { maxGradNorm: this.config.max_grad_norm, chunkSize: this.config.scoring_batch_size, label: `${this.names.label} agent ${a} ('${this.agents[a].name}')` };
        const result = await this.timer.time('training', () => policyGradientStep(this.agents[a].model, this.optimizers[a], agentDpoRows(minibatch, stats.z, a, beta), options));
        this.optimizerSteps++;
        const w = this.updateWindow[a];
        w.steps++;
        // The agent's loss is the joint one (its surrogate's value is not): measured before any agent stepped.
        w.lossSum += stats.loss;
        w.gradNormSum += result.gradNorm;
      }
      if (this.config.use_environment_step) this.envStep += this.config.environment_steps_per_pair * minibatch.length;
      this.recordDpo(minibatch, logProbs, stats.loss, stats.accuracy);
    }
  }

  /** Adds a minibatch to the DPO window (TRL's implicit rewards: β · log-ratio, summed over the agents). */
  private recordDpo(minibatch: readonly PreferencePair[], logProbs: readonly PairLogProbs[], loss: number, accuracy: number): void {
    const beta = this.config.dpo_beta;
    const d = this.dpoWindow;
    d.minibatches++;
    d.lossSum += loss;
    d.accuracySum += accuracy;
    minibatch.forEach((pair, p) => {
      const lp = logProbs[p];
      d.pairs++;
      d.chosenSum += beta * lp.winner.reduce((s, v, i) => s + v - pair.refWinner[i], 0);
      d.rejectedSum += beta * lp.loser.reduce((s, v, i) => s + v - pair.refLoser[i], 0);
      d.rewardGapSum += pair.winnerReward - pair.loserReward;
      d.logpChosenSum += lp.winner.reduce((a, b) => a + b, 0);
      d.logpRejectedSum += lp.loser.reduce((a, b) => a + b, 0);
    });
  }

  // -------------------------------------------------------------------------------------------
  // Evaluation.
  // -------------------------------------------------------------------------------------------

  /** Plays the first `eval_num_samples` eval tasks, one completion per agent, as MAGRPO's evaluation. */
  async evaluate(): Promise<MADPOEvalResult<T, S>> {
    return this.evaluateOnePath(magrpoEvalEarlyTermination(this.config));
  }

  // -------------------------------------------------------------------------------------------
  // Metrics.
  // -------------------------------------------------------------------------------------------

  /**
   * The item's reward metrics (MAGRPO's names), the agents' updates and the DPO statistics since
   * the last log — CoMLRL's `dpo/*` and TRL's `rewards/*`, `logps/*` — throttled by `logging_steps`.
   */
  private async maybeLogTrain(item: ItemRollout): Promise<void> {
    if (!this.trainLogDue()) return;
    const m: MetricRecord = {
      epoch: this.cursor.epoch,
      optimizer_steps: this.optimizerSteps,
      ...this.learningRateMetrics(),
      [turnKey(0, 'reward_mean')]: mean(item.rewards),
      [turnKey(0, 'expected_return')]: mean(item.rewards),
      // All K rewards equal: no pair, no learning signal.
      [turnKey(0, 'zero_reward_spread_frac')]: hasZeroSpread(item.rewards) ? 1 : 0,
      [turnKey(0, 'nodes')]: 1,
      'dpo/pairs_selected': item.pairs,
    };
    drainAgentWindows(m, this.updateWindow, this.tokensWindow, this.completionsWindow);
    const d = this.dpoWindow;
    if (d.minibatches > 0) {
      Object.assign(m, {
        loss: d.lossSum / d.minibatches,
        'dpo/loss': d.lossSum / d.minibatches,
        'dpo/accuracy': d.accuracySum / d.minibatches,
        'dpo/joint_delta_mean': (d.chosenSum - d.rejectedSum) / this.config.dpo_beta / d.pairs,
        'dpo/reward_gap_mean': d.rewardGapSum / d.pairs,
        'dpo/num_pairs': d.pairs,
        'rewards/chosen': d.chosenSum / d.pairs,
        'rewards/rejected': d.rejectedSum / d.pairs,
        'rewards/margins': (d.chosenSum - d.rejectedSum) / d.pairs,
        'rewards/accuracies': d.accuracySum / d.minibatches,
        'logps/chosen': d.logpChosenSum / d.pairs,
        'logps/rejected': d.logpRejectedSum / d.pairs,
      });
    }
    this.dpoWindow = emptyDpoWindow();
    Object.assign(m, this.timer.drain('time/'));
    await this.logger?.log(this.envStep, m);
  }

  // -------------------------------------------------------------------------------------------
  // Saving and resuming.
  // -------------------------------------------------------------------------------------------

  /** Everything besides the weights needed to resume exactly: counters, cursor, streams, AdamW moments, buffered pairs. */
  exportState(): MADPOTrainerState {
    return this.snapshot(this.optimizers, { buffer: this.buffer.map((p) => structuredClone(p)), epochStats: { ...this.epochStats } });
  }

  /**
   * Restores a snapshot from {@link MADPOTrainer.exportState} (load the saved weights into the
   * agents first). The references are not in it: give full fine-tuning agents their starting
   * weights as `Agent.reference` (the CLI does), else the reference is a copy of the resumed weights.
   */
  importState(state: MADPOTrainerState): void {
    this.restoreSnapshot(state, this.optimizers, (extra) => {
      for (const p of extra.buffer) {
        if (p.promptIds.length !== this.agents.length) throw new Error(`importState: a buffered pair has ${p.promptIds.length} agents' completions for ${this.agents.length} agents`);
      }
    });
    this.buffer = state.extra.buffer.map((p) => structuredClone(p));
    this.epochStats = { ...state.extra.epochStats };
  }

  /** Frees the optimizers' moments and the frozen reference copies (the agents' models stay with the caller). */
  dispose(): void {
    for (const o of this.optimizers) o.dispose();
    for (const r of this.references) r.dispose();
  }
}
