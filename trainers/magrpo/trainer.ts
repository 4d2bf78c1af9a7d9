/**
 * MAGRPO — Multi-Agent Group Relative Policy Optimization (MAGRPO paper; CoMLRL's MAGRPOTrainer,
 * checked update for update against CoMLRL's own by scripts/comlrl-parity.mjs).
 *
 * For each training task:
 *   1. Expand a rollout tree. At a node (state s, turn t) every agent i observes o_i = observe(s, i)
 *      and samples K completions. Joint actions are the K aligned tuples (k-th with k-th) or, in
 *      cross mode, all K^n combinations; each gets the joint reward r_j. Unless the node's mean
 *      reward exceeds the early-termination threshold (or t is the last turn), each joint action's
 *      next state becomes a child node that samples a fresh K per agent.
 *   2. Returns, bottom-up: R_j = r_j + γ · mean(returns of child j)  (leaf: R_j = r_j).
 *   3. Every node gives each agent one sample: its K completions with their returns (cross mode:
 *      for completion m of agent i, the sum of R_j over the joint actions that used it).
 *   4. Samples go to the agent's rollout buffer; a full buffer is consumed by turn group, shuffled
 *      into minibatches; per minibatch one AdamW step on
 *        loss = mean_samples mean_k [ −A_k · Σ_t log π(token_t of completion k) ],
 *      with A the group-relative advantage (mean / raw / max / rloo, then optionally z-scored).
 *
 * Deliberate differences from CoMLRL (docs/differences.md): every generated token is scored (EOS
 * included, padding never; `score_last_token: false` gives CoMLRL's scoring of the padded rows
 * minus their last position), γ applies when set below 1 (CoMLRL's returns are undiscounted),
 * joint_mode is 'aligned' | 'cross' only, evaluation ends episodes early as training does,
 * non-finite losses raise, random streams are seeded.
 */
import { planMinibatches } from '../../src/buffer/replay.js';
import type { JointLoraPasses } from '../../src/model/lora/joint.js';
import type { AdamW } from '../../src/optim/adamw.js';
import { groupAdvantages, hasZeroSpread, mean, type AdvantageMode } from './advantage.js';
import type { EvalEpisode } from '../core/eval.js';
import { encodePrompt, generateRound, type CompletionGroup } from '../core/generation.js';
import { takeJointActions } from '../core/joint-step.js';
import { jointStepOnSequenceLoss, linearPolicyLoss, stepOnSequenceLoss, type JointAgentLoss, type PolicyGradientResult, type PolicyGradientRow, type SequenceLoss } from '../core/loss.js';
import { groupKl, klMetrics, klPolicyObjective, referenceOf, type GroupKl, type KlPolicyGradientRow, type ReferencePolicy } from '../core/reference-kl.js';
import { drainAgentWindows, turnKey, type MetricRecord, type UpdateWindow } from '../core/metrics.js';
import type { TrainerState } from '../core/state.js';
import { assertFiniteReward, TrainerBase, type OnePathEvalResult, type TrainerInputs, type TrainerNames, type TrainOptions } from '../core/trainer.js';
import { magrpoEvalEarlyTermination, parseMAGRPOConfig, type JointMode, type MAGRPOConfig, type MAGRPOConfigInput } from './config.js';

// ---------------------------------------------------------------------------------------------
// The algorithm's pure pieces (exported so they can be checked by hand).
// ---------------------------------------------------------------------------------------------

/**
 * Joint actions of a node as completion indices per agent. Aligned: (k, k, …, k) for k < K.
 * Cross: the Cartesian product in itertools.product order (last agent varies fastest). One agent:
 * aligned.
 */
export function jointActions(numAgents: number, k: number, mode: JointMode): number[][] {
  if (mode === 'aligned' || numAgents === 1) return Array.from({ length: k }, (_, i) => Array<number>(numAgents).fill(i));
  let tuples: number[][] = [[]];
  for (let a = 0; a < numAgents; a++) tuples = tuples.flatMap((t) => Array.from({ length: k }, (_, i) => [...t, i]));
  return tuples;
}

/** Early termination: a node stops expanding when its mean reward is strictly greater than the threshold. */
export function terminatesEarly(rewards: readonly number[], threshold: number | null): boolean {
  return threshold !== null && mean(rewards) > threshold;
}

/** R_j = r_j + γ · mean(child j's returns), or r_j where joint action j has no child. */
export function nodeReturns(
  rewards: readonly number[],
  childReturns: readonly (readonly number[] | null)[],
  discount: number,
): number[] {
  return rewards.map((r, j) => {
    const c = childReturns[j];
    return c && c.length > 0 ? r + discount * mean(c) : r;
  });
}

/**
 * The K returns one agent learns from at a node. Aligned: the joint returns themselves. Cross: for
 * each of the agent's completions m, the sum of the joint returns whose tuple used m (CoMLRL sums;
 * under the default z-score this equals the mean).
 */
export function agentGroupReturns(
  returns: readonly number[],
  joints: readonly (readonly number[])[],
  agent: number,
  k: number,
  mode: JointMode,
): number[] {
  if (mode === 'aligned' || joints.length === k) return [...returns];
  const out = new Array<number>(k).fill(0);
  joints.forEach((tuple, j) => {
    out[tuple[agent]] += returns[j];
  });
  return out;
}

/**
 * Step 4's loss rows of one minibatch: every completion k of every sample with its coefficient, so
 * that Σ coef · (−Σ_t log π) is loss = (1/|minibatch|) Σ_samples (1/K) Σ_k −A_k · Σ_t log π(token_t),
 * A being the group-relative advantages of the sample's K returns.
 */
export function minibatchRows(minibatch: readonly NodeSample[], mode: AdvantageMode, normalize: boolean, klCoef = 0, padded: PaddedScoring | null = null): PolicyGradientRow[] {
  return minibatch.flatMap((sample) => {
    const adv = groupAdvantages(effectiveReturns(sample, klCoef), mode, normalize);
    const k = sample.completionIds.length;
    const scored = scoredCompletions(sample.completionIds, padded);
    // A row left with no token scores nothing (CoMLRL: a log-prob sum over no tokens, 0).
    return scored.flatMap((completionIds, c) => (completionIds.length === 0 ? [] : [{ promptIds: sample.promptIds, completionIds, coef: adv[c] / (k * minibatch.length) }]));
  });
}

/** CoMLRL's scoring of a node's K completions (`score_last_token: false`): the pad id to pad them with. */
export interface PaddedScoring {
  readonly padId: number;
}

/**
 * The token ids the loss scores for each of a node's K completions: the completions themselves, or
 * under CoMLRL's scoring ({@link PaddedScoring}) each padded with the pad id to the longest of the
 * K and cut before its last position (`generate`'s padded rows minus the last column).
 */
export function scoredCompletions(completionIds: readonly (readonly number[])[], padded: PaddedScoring | null): number[][] {
  if (padded === null) return completionIds.map((c) => [...c]);
  const width = Math.max(...completionIds.map((c) => c.length));
  return completionIds.map((c) => [...c, ...Array<number>(width - c.length).fill(padded.padId)].slice(0, width - 1));
}

/**
 * The returns a sample's advantages come from: R_k − β · KL(y_k) under the reference-KL penalty
 * (`kl_mode: reward`, CoMLRL 1.3.8: applied to each node's returns right before the advantages,
 * so it does not propagate to the parents' returns), else R_k.
 */
export function effectiveReturns(sample: NodeSample, klCoef: number): number[] {
  const kls = sample.referenceKls;
  if (!kls || klCoef === 0) return [...sample.returns];
  return sample.returns.map((r, k) => r - klCoef * kls[k]);
}

/**
 * `kl_mode: loss`: {@link minibatchRows} with each completion's KL term, weighted like its
 * policy-gradient term: β / (K · |minibatch|) · Σ_t k3.
 */
export function minibatchKlRows(minibatch: readonly NodeSample[], mode: AdvantageMode, normalize: boolean, klCoef: number): KlPolicyGradientRow[] {
  const rows = minibatchRows(minibatch, mode, normalize);
  let r = 0;
  return minibatch.flatMap((sample) => {
    const refs = sample.referenceLogProbs;
    if (!refs) throw new Error(`agent ${sample.agent}: kl_mode 'loss' needs the reference log-probs of every buffered sample`);
    const k = sample.completionIds.length;
    return sample.completionIds.map((_, c) => ({ ...rows[r++], refLogProbs: refs[c], klWeight: klCoef / (k * minibatch.length) }));
  });
}

// ---------------------------------------------------------------------------------------------
// Data the trainer keeps.
// ---------------------------------------------------------------------------------------------

/** One node of the rollout tree. */
export interface RolloutNode<S> {
  /** 0-based turn. */
  readonly turn: number;
  readonly state: S;
  /** observations[i]: agent i's prompt text. */
  readonly observations: string[];
  /** groups[i]: agent i's K completions. */
  readonly groups: CompletionGroup[];
  /** joints[j][i]: which of agent i's completions joint action j uses. */
  readonly joints: number[][];
  /** r_j per joint action. */
  readonly rewards: number[];
  /** The child each joint action led to (null: leaf branch). */
  readonly children: (RolloutNode<S> | null)[];
  /** R_j per joint action. */
  readonly returns: number[];
  /** kl[i]: agent i's reference KL per completion (reference KL on), else null or absent. */
  readonly kl?: GroupKl[] | null;
  /** env_step after this node's rewards were counted (CoMLRL's node ordering key). */
  readonly envStep: number;
}

/** What one agent learns from at one node: its K completions and their returns. JSON-able. */
export interface NodeSample {
  readonly agent: number;
  readonly turn: number;
  readonly envStep: number;
  readonly promptIds: number[];
  readonly completionIds: number[][];
  /** Per-completion return (aggregated over combinations in cross mode). */
  readonly returns: number[];
  readonly nodeMeanReward: number;
  readonly nodeMeanReturn: number;
  /** Reference KL per completion (reference KL on). */
  readonly referenceKls?: number[];
  /** log p_ref per completion token (`kl_mode: loss`). */
  readonly referenceLogProbs?: number[][];
}

/** Per-agent samples of a tree, each list ordered by env_step (pre-order: parents first). */
export function treeSamples<S>(root: RolloutNode<S>, numAgents: number, k: number, mode: JointMode): NodeSample[][] {
  const out: NodeSample[][] = Array.from({ length: numAgents }, () => []);
  const visit = (node: RolloutNode<S>): void => {
    for (const child of node.children) if (child) visit(child);
    for (let a = 0; a < numAgents; a++) {
      out[a].push({
        agent: a,
        turn: node.turn,
        envStep: node.envStep,
        promptIds: node.groups[a].promptIds,
        completionIds: node.groups[a].ids,
        returns: agentGroupReturns(node.returns, node.joints, a, k, mode),
        nodeMeanReward: mean(node.rewards),
        nodeMeanReturn: mean(node.returns),
        ...klFields(node.kl?.[a]),
      });
    }
  };
  visit(root);
  for (const list of out) list.sort((x, y) => x.envStep - y.envStep);
  return out;
}

/** A sample's KL fields: the KLs, and the reference log-probs when they were kept (loss mode). */
function klFields(kl: GroupKl | undefined): Pick<NodeSample, 'referenceKls' | 'referenceLogProbs'> {
  if (!kl) return {};
  return kl.referenceLogProbs.length > 0 ? { referenceKls: kl.kls, referenceLogProbs: kl.referenceLogProbs } : { referenceKls: kl.kls };
}

/** Every node of a tree, pre-order. */
export function treeNodes<S>(root: RolloutNode<S>): RolloutNode<S>[] {
  const out: RolloutNode<S>[] = [];
  const visit = (n: RolloutNode<S>): void => {
    out.push(n);
    for (const c of n.children) if (c) visit(c);
  };
  visit(root);
  return out;
}

/** MAGRPO's trainer-specific resume data. */
export interface MAGRPOStateExtra {
  /** Pending node samples per agent. */
  readonly buffers: NodeSample[][];
  /** Per-turn sums for the epoch-end metrics. */
  readonly epochTurnStats: { turn: number; nodes: number; rewardSum: number; returnSum: number }[];
}

/** A MAGRPO trainer snapshot. */
export type MAGRPOTrainerState = TrainerState<MAGRPOStateExtra>;

/** Constructor arguments of {@link MAGRPOTrainer}. */
export interface MAGRPOTrainerOptions<T, S> extends TrainerInputs<T, S> {
  /** CoMLRL MAGRPOConfig fields (snake_case) plus comlrl extras; see magrpo-config.ts. */
  config?: MAGRPOConfigInput;
}

/** Options of {@link MAGRPOTrainer.train}. */
export type MAGRPOTrainOptions = TrainOptions;

/**
 * What a trainer built on MAGRPO's algorithm changes: its names (in errors and its saved state) and
 * how its config section parses (the REINFORCE family: other `advantage_mode` defaults).
 */
export interface MAGRPOVariant {
  readonly names: TrainerNames;
  parse(input: MAGRPOConfigInput): MAGRPOConfig;
}

/** MAGRPO itself. */
const MAGRPO_VARIANT: MAGRPOVariant = { names: { className: 'MAGRPOTrainer', label: 'MAGRPO', stateTag: 'magrpo' }, parse: parseMAGRPOConfig };

/** One evaluation's results. */
export type MAGRPOEvalResult<T, S> = OnePathEvalResult<T, S>;

/**
 * Trains n LLM agents with MAGRPO on an LLM Dec-POMDP.
 *
 * ```ts
 * const trainer = new MAGRPOTrainer({ agents, env, trainTasks, evalTasks, config: { num_turns: 1, num_generations: 4 } });
 * await trainer.train();
 * await trainer.save('out');
 * ```
 */
export class MAGRPOTrainer<T, S> extends TrainerBase<T, S, MAGRPOConfig> {
  /** One AdamW per agent. */
  readonly optimizers: readonly AdamW[];

  /** K: completions per agent at every node. */
  private readonly k: number;
  private buffers: NodeSample[][];
  private epochTurnStats = new Map<number, { nodes: number; rewardSum: number; returnSum: number }>();
  private tokensWindow: number[];
  private completionsWindow: number[];
  private updateWindow: UpdateWindow[];
  /** Each agent's frozen reference (reference KL on), else null. */
  private readonly references: readonly ReferencePolicy[] | null;

  constructor(options: MAGRPOTrainerOptions<T, S>, variant: MAGRPOVariant = MAGRPO_VARIANT) {
    super(variant.names, variant.parse(options.config ?? {}), options);
    const { agents, config } = this;
    this.k = config.num_generations;
    this.optimizers = agents.map((a, i) => this.adamW(a.model.trainableVariables(), config.agent_learning_rate, { kind: 'agent', index: i }));
    this.buffers = agents.map(() => []);
    this.tokensWindow = agents.map(() => 0);
    this.completionsWindow = agents.map(() => 0);
    this.updateWindow = agents.map(() => ({ steps: 0, lossSum: 0, gradNormSum: 0 }));
    if (config.score_last_token === false && config.reference_kl_enabled && config.kl_mode === 'loss') {
      throw new Error(`${variant.names.className}: score_last_token false (CoMLRL's padded scoring) cannot be combined with kl_mode 'loss', whose per-token terms cover the generated tokens only; use kl_mode 'reward' or score_last_token true`);
    }
    // Built before any update: a frozen copy must hold the starting weights.
    this.references = config.reference_kl_enabled ? agents.map((a) => referenceOf(a)) : null;
  }

  // -------------------------------------------------------------------------------------------
  // Training loop (the epochs and the eval schedule are in core/trainer.ts).
  // -------------------------------------------------------------------------------------------

  /** One task: expand its rollout tree, buffer every agent's samples and update each full buffer. */
  protected async trainOn(task: T): Promise<void> {
    const root = await this.rolloutTree(task);
    const samples = treeSamples(root, this.agents.length, this.k, this.config.joint_mode);
    const updates: PendingUpdate[] = [];
    for (let a = 0; a < this.agents.length; a++) {
      for (const sample of samples[a]) {
        this.buffers[a].push(sample);
        if (this.buffers[a].length >= this.config.rollout_buffer_size) updates.push(this.takeBuffer(a));
      }
    }
    await this.runUpdates(updates);
    this.recordTree(root);
    await this.maybeLogTrain(root);
  }

  /** Epoch end: whatever is left in the buffers is trained on too. */
  protected async endEpoch(): Promise<void> {
    const updates: PendingUpdate[] = [];
    for (let a = 0; a < this.agents.length; a++) if (this.buffers[a].length > 0) updates.push(this.takeBuffer(a));
    await this.runUpdates(updates);
    await this.logEpochEnd();
  }

  // -------------------------------------------------------------------------------------------
  // 1–2. The rollout tree and its returns.
  // -------------------------------------------------------------------------------------------

  /** Expands the full rollout tree of one task (sampling with the training settings). */
  async rolloutTree(task: T): Promise<RolloutNode<S>> {
    return this.expandNode(this.env.initialState(task), 0);
  }

  private async expandNode(state: S, turn: number): Promise<RolloutNode<S>> {
    const { agents, env, k } = this;
    const { joint_mode: mode, num_turns: numTurns, discount } = this.config;

    // Every agent observes the state and samples K completions (LoRA agents on one base: in one joint pass).
    const observations = agents.map((_, i) => env.observe(state, i));
    const prompts = agents.map((agent, i) => encodePrompt(agent, observations[i], env.rendering?.(state, i)));
    const groups = await this.timer.time('generation', () => generateRound(agents, prompts, k, this.settings, this.samplingRng, this.jointPasses, this.sampler));
    groups.forEach((group, i) => {
      this.tokensWindow[i] += group.ids.reduce((s, c) => s + c.length, 0);
      this.completionsWindow[i] += group.ids.length;
    });
    const kl = await this.referenceKl(groups);

    // Joint actions (aligned: K, cross: K^n) and their joint rewards.
    const joints = jointActions(agents.length, k, mode);
    const actions = joints.map((tuple) => tuple.map((c, i) => groups[i].texts[c]));
    // Rewards first; with a staged env the (possibly costly) transitions only for nodes that will have children.
    const expand = (rewards: readonly number[]) => turn + 1 < numTurns && !terminatesEarly(rewards, this.config.early_termination_threshold);
    const steps = await takeJointActions(env, state, actions, (rewards) => rewards.map(() => expand(rewards)), (r) => assertFiniteReward(this.names.label, env.name, r, turn), this.timer);
    const rewards = steps.map((s) => s.reward);
    this.envStep += joints.length;
    const envStep = this.envStep;

    // Children: each joint action's next state is expanded with a fresh K per agent.
    const children: (RolloutNode<S> | null)[] = [];
    const grow = expand(rewards);
    for (let j = 0; j < joints.length; j++) {
      const step = steps[j];
      children.push(grow && step.next !== null && !step.done ? await this.expandNode(step.next, turn + 1) : null);
    }

    // Returns bottom-up: R_j = r_j + γ·mean(child j's returns).
    const returns = nodeReturns(rewards, children.map((c) => c?.returns ?? null), discount);
    return { turn, state, observations, groups, joints, rewards, children, returns, kl, envStep };
  }

  /** Every agent's reference KL of its K completions at a node (null when reference KL is off). */
  private async referenceKl(groups: readonly CompletionGroup[]): Promise<GroupKl[] | null> {
    const references = this.references;
    if (!references) return null;
    const out: GroupKl[] = [];
    for (let i = 0; i < groups.length; i++) {
      const g = groups[i];
      const kl = await this.timer.time('reference_kl', () => groupKl(this.agents[i].model, references[i], g.promptIds, g.ids));
      // The per-token reference log-probs are kept only where the loss needs them.
      out.push(this.config.kl_mode === 'loss' ? kl : { kls: kl.kls, referenceLogProbs: [] });
    }
    return out;
  }

  // -------------------------------------------------------------------------------------------
  // 3–4. Buffers → minibatches → one AdamW step each.
  // -------------------------------------------------------------------------------------------

  /**
   * Empties agent a's buffer into an update: by turn group (ascending), each shuffled and cut into
   * minibatches (the plan the actor-critic trainers use, one pass). Plans are drawn in the order
   * the buffers fill, whether the updates then run one agent at a time or jointly.
   */
  private takeBuffer(a: number): PendingUpdate {
    const buffer = this.buffers[a];
    this.buffers[a] = [];
    const plan = planMinibatches(buffer.map((s) => s.turn), { batchSize: this.trainBatchSize, epochs: 1, rng: this.minibatchRng });
    return { agent: a, minibatches: plan.map(({ turn, indices }) => ({ turn, samples: indices.map((i) => buffer[i]) })) };
  }

  /**
   * Runs the updates: LoRA agents on one base (joint passes on, no dropout) step together, the
   * j-th update of every agent in one joint pass per minibatch, when all agents have one of the
   * same shape; any other update runs alone. Each agent's steps are its own either way.
   */
  private async runUpdates(updates: readonly PendingUpdate[]): Promise<void> {
    const joint = this.joint?.trainable ? this.joint : null;
    const byAgent = this.agents.map((_, a) => updates.filter((u) => u.agent === a));
    const together = new Set<PendingUpdate>();
    if (joint) {
      for (let j = 0; j < byAgent[0].length; j++) {
        const round = byAgent.map((list) => list[j]);
        if (!round.every((u) => u !== undefined && sameShape(u, round[0]))) continue;
        for (const u of round) together.add(u);
        await this.updateJointly(joint, round);
      }
    }
    for (const u of updates) if (!together.has(u)) await this.updateAgent(u);
  }

  /** The rows and loss of agent a's step on one minibatch. */
  private agentLoss(a: number, minibatch: readonly NodeSample[], turn: number): JointAgentLoss<PolicyGradientRow> & { label: string } {
    const { advantage_mode: mode, advantage_normalization: normalize, reference_kl_enabled: klOn, reference_kl_coef: klCoef, kl_mode: klMode } = this.config;
    const agent = this.agents[a];
    const label = `${this.names.label} agent ${a} ('${agent.name}'), turn ${turn + 1}`;
    if (klOn && klMode === 'loss') {
      const rows = minibatchKlRows(minibatch, mode, normalize, klCoef);
      const objective = klPolicyObjective(rows, label);
      return { rows, loss: objective.loss as SequenceLoss<PolicyGradientRow>, skip: objective.skip as (r: PolicyGradientRow) => boolean, optimizer: this.optimizers[a], label };
    }
    const padded = this.config.score_last_token === false ? { padId: agent.tokenizer.padTokenId } : null;
    const rows = minibatchRows(minibatch, mode, normalize, klOn ? klCoef : 0, padded);
    for (const r of rows) if (!Number.isFinite(r.coef)) throw new Error(`${label}: a row has a non-finite weight (${r.coef})`);
    return { rows, loss: linearPolicyLoss, skip: (r) => r.coef === 0, optimizer: this.optimizers[a], label };
  }

  /** One agent's update: one optimizer step per minibatch. */
  private async updateAgent(update: PendingUpdate): Promise<void> {
    const a = update.agent;
    const model = this.agents[a].model;
    for (const { turn, samples } of update.minibatches) {
      this.traceAdvantages(samples, this.paddedScoring(a));
      const part = this.agentLoss(a, samples, turn);
      const options = { maxGradNorm: this.config.max_grad_norm, chunkSize: this.config.scoring_batch_size, label: part.label, skip: part.skip };
      const result = await this.timer.time('training', () => stepOnSequenceLoss(model, part.optimizer, part.rows, part.loss, options));
      this.recordStep(a, turn, result);
    }
  }

  /** The j-th update of every agent, minibatch by minibatch, in joint passes. */
  private async updateJointly(joint: JointLoraPasses, round: readonly PendingUpdate[]): Promise<void> {
    for (let m = 0; m < round[0].minibatches.length; m++) {
      const turn = round[0].minibatches[m].turn;
      const parts = round.map((u) => {
        this.traceAdvantages(u.minibatches[m].samples, this.paddedScoring(u.agent));
        return this.agentLoss(u.agent, u.minibatches[m].samples, turn);
      });
      const results = await this.timer.time('training', () =>
        jointStepOnSequenceLoss(joint, parts, { maxGradNorm: this.config.max_grad_norm, chunkSize: this.config.scoring_batch_size }),
      );
      results.forEach((r, a) => this.recordStep(a, turn, r));
    }
  }

  private paddedScoring(a: number): PaddedScoring | null {
    return this.config.score_last_token === false ? { padId: this.agents[a].tokenizer.padTokenId } : null;
  }

  private recordStep(a: number, turn: number, result: PolicyGradientResult): void {
    this.optimizerSteps++;
    this.trace?.({ kind: 'policy_step', agent: a, turn, loss: result.loss, gradNorm: result.gradNorm });
    const w = this.updateWindow[a];
    w.steps++;
    w.lossSum += result.loss;
    w.gradNormSum += result.gradNorm;
  }

  /** Sends each sample's returns and advantages to the trace (when one was given). */
  private traceAdvantages(minibatch: readonly NodeSample[], padded: PaddedScoring | null): void {
    const trace = this.trace;
    if (!trace) return;
    const { advantage_mode: mode, advantage_normalization: normalize, reference_kl_enabled: klOn, reference_kl_coef: klCoef } = this.config;
    for (const sample of minibatch) {
      const returns = effectiveReturns(sample, klOn ? klCoef : 0);
      trace({
        kind: 'group_advantages',
        agent: sample.agent,
        turn: sample.turn,
        envStep: sample.envStep,
        promptIds: sample.promptIds,
        completionIds: scoredCompletions(sample.completionIds, padded),
        returns,
        advantagesRaw: groupAdvantages(returns, mode, false),
        advantages: groupAdvantages(returns, mode, normalize),
      });
    }
  }

  // -------------------------------------------------------------------------------------------
  // Evaluation.
  // -------------------------------------------------------------------------------------------

  /**
   * Plays the first `eval_num_samples` eval tasks along one path (one completion per agent per turn),
   * greedy if `eval_greedy`. An episode ends after a turn whose reward is strictly greater than
   * `early_termination_threshold`, as in training and in the actor-critic trainers' evaluation;
   * `eval_early_termination: false` plays every turn (CoMLRL 1.3.6). The eval sampling stream
   * restarts from the seed at every evaluation, so successive evaluations differ only by the weights.
   */
  async evaluate(): Promise<MAGRPOEvalResult<T, S>> {
    return this.evaluateOnePath(magrpoEvalEarlyTermination(this.config));
  }

  // -------------------------------------------------------------------------------------------
  // Metrics.
  // -------------------------------------------------------------------------------------------

  private recordTree(root: RolloutNode<S>): void {
    for (const node of treeNodes(root)) {
      const s = this.epochTurnStats.get(node.turn) ?? { nodes: 0, rewardSum: 0, returnSum: 0 };
      s.nodes++;
      s.rewardSum += mean(node.rewards);
      s.returnSum += mean(node.returns);
      this.epochTurnStats.set(node.turn, s);
    }
  }

  /** Train metrics of the latest tree plus the window since the last log, throttled by `logging_steps`. */
  private async maybeLogTrain(root: RolloutNode<S>): Promise<void> {
    if (!this.trainLogDue()) return;
    const m: MetricRecord = { epoch: this.cursor.epoch, optimizer_steps: this.optimizerSteps, ...this.learningRateMetrics() };
    const byTurn = new Map<number, RolloutNode<S>[]>();
    for (const node of treeNodes(root)) byTurn.set(node.turn, [...(byTurn.get(node.turn) ?? []), node]);
    for (const [turn, nodes] of [...byTurn.entries()].sort((x, y) => x[0] - y[0])) {
      m[turnKey(turn, 'reward_mean')] = mean(nodes.map((n) => mean(n.rewards)));
      m[turnKey(turn, 'expected_return')] = mean(nodes.map((n) => mean(n.returns)));
      // Groups whose K rewards are all equal give zero advantage: no learning signal.
      m[turnKey(turn, 'zero_reward_spread_frac')] = mean(nodes.map((n) => (hasZeroSpread(n.rewards) ? 1 : 0)));
      m[turnKey(turn, 'nodes')] = nodes.length;
    }
    drainAgentWindows(m, this.updateWindow, this.tokensWindow, this.completionsWindow);
    // The item's tree, as the turn metrics above.
    if (this.references) {
      const samples = treeNodes(root).flatMap((n) => (n.kl ?? []).flatMap((g, agent) => g.kls.map((kl) => ({ agent, turn: n.turn, kl }))));
      Object.assign(m, klMetrics(samples, this.config));
    }
    Object.assign(m, this.timer.drain('time/'));
    await this.logger?.log(this.envStep, m);
  }

  private async logEpochEnd(): Promise<void> {
    const m: MetricRecord = {};
    for (const [turn, s] of [...this.epochTurnStats.entries()].sort((x, y) => x[0] - y[0])) {
      m[turnKey(turn, 'epoch_reward_mean')] = s.rewardSum / s.nodes;
      m[turnKey(turn, 'epoch_avg_return')] = s.returnSum / s.nodes;
    }
    this.epochTurnStats = new Map();
    await this.logger?.log(this.envStep, m);
  }

  // -------------------------------------------------------------------------------------------
  // Saving and resuming.
  // -------------------------------------------------------------------------------------------

  /** Everything besides the weights needed to resume exactly: counters, cursor, streams, AdamW moments, buffers. */
  exportState(): MAGRPOTrainerState {
    return this.snapshot(this.optimizers, {
      buffers: this.buffers.map((b) => b.map((s) => structuredClone(s))),
      epochTurnStats: [...this.epochTurnStats.entries()].map(([turn, s]) => ({ turn, ...s })),
    });
  }

  /** Restores a snapshot from {@link MAGRPOTrainer.exportState} (load the saved weights into the agents first). */
  importState(state: MAGRPOTrainerState): void {
    this.restoreSnapshot(state, this.optimizers, (extra) => {
      if (extra.buffers.length !== this.agents.length) {
        throw new Error(`importState: ${extra.buffers.length} rollout buffers for ${this.agents.length} agents`);
      }
    });
    this.buffers = state.extra.buffers.map((b) => b.map((s) => structuredClone(s)));
    this.epochTurnStats = new Map(state.extra.epochTurnStats.map(({ turn, ...s }) => [turn, s]));
  }

  /** Frees the optimizers' moment tensors (the agents' models stay with the caller). */
  dispose(): void {
    for (const o of this.optimizers) o.dispose();
    for (const r of this.references ?? []) r.dispose();
  }
}

/** An agent's buffer, emptied into minibatches (by turn group, shuffled), waiting to be trained on. */
interface PendingUpdate {
  readonly agent: number;
  readonly minibatches: readonly { readonly turn: number; readonly samples: readonly NodeSample[] }[];
}

/** Whether two updates have the same minibatches' turns and sizes (so they can step jointly). */
function sameShape(a: PendingUpdate, b: PendingUpdate): boolean {
  return a.minibatches.length === b.minibatches.length && a.minibatches.every((m, i) => m.turn === b.minibatches[i].turn && m.samples.length === b.minibatches[i].samples.length);
}
