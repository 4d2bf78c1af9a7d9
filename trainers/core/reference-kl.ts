/**
 * Reference-model KL (CoMLRL 1.3.8's `reference_kl_*`): how far each agent's policy has moved from
 * a frozen reference, measured on the completions it samples, and the two ways a trainer uses it.
 *
 * Per completion y of prompt x the estimate is Schulman's k3 summed over y's tokens:
 *   KL(y) = Σ_t [ exp(d_t) − d_t − 1 ],  d_t = log p_ref(y_t | x, y_<t) − log p(y_t | x, y_<t),
 * non-negative per token and unbiased for KL(p ‖ p_ref) under samples of p.
 * - `kl_mode: reward` (CoMLRL's form): the penalty `reference_kl_coef · KL(y)` is taken off what the
 *   completion learns from, before advantages (MAGRPO: its return; CoLLM: the turn's joint reward,
 *   with the KL of the joint policy Σ_i KL_i). Nothing is differentiated through the KL.
 * - `kl_mode: loss` (TRL's `beta` form): `reference_kl_coef · Σ_t k3_t` joins the loss with the same
 *   weight as the completion's policy-gradient term (MAGRPO's and the CoLLM actors'), and its
 *   gradient flows into the policy; the reference log-probs are stored with the samples.
 *
 * The reference of an agent is, by what the agent is:
 * - LoRA on a frozen base: the base with the adapter switched off (`withAdaptersOff`); nothing is
 *   copied, so it costs no weight memory. It equals the initial policy because a fresh adapter
 *   starts at B = 0.
 * - full fine-tuning: a frozen copy of the weights the trainer starts from (the CLI loads
 *   `model.reference_model`, else the agent's own starting checkpoint, once per directory).
 * - an explicit one: `Agent.reference`.
 */
import * as tf from '@tensorflow/tfjs';
import { z } from 'zod';
import type { JointTransition } from '../../src/buffer/replay.js';
import type { Agent } from '../../src/decpomdp/agent.js';
import { REFERENCE_KL_DEFAULTS } from '../../src/config/trainers.js';
import { TfCausalLM } from '../../src/model/causal-lm.js';
import type { CausalLM, CompletionScores } from '../../src/model/types.js';
import type { AdamW } from '../../src/optim/adamw.js';
import { tokenizerDifference } from '../../src/tokenizer/check.js';
import { boolField, enumField, finiteNumber } from './config.js';
import { deviceSpecField } from './devices.js';
import { linearPolicyLoss, stepOnSequenceLoss, type PolicyGradientOptions, type PolicyGradientResult, type PolicyGradientRow, type SequenceLoss } from './loss.js';
import { agentKey, turnKey } from './metrics.js';

/** Where the KL enters training (see the module comment). */
export const KL_MODES = ['reward', 'loss'] as const;
/** See {@link KL_MODES}. */
export type KLMode = (typeof KL_MODES)[number];

/**
 * The reference-KL fields of a trainer config (spread into its schema): CoMLRL's names and
 * defaults (`reference_kl_enabled` false, `reference_kl_coef` 0.1, `reference_devices` null) plus
 * comlrl's `kl_mode`.
 */
export function referenceKlFields() {
  return {
    /** Penalise the policy's KL to its reference (CoMLRL 1.3.8; off by default). */
    reference_kl_enabled: boolField('reference_kl_enabled').default(REFERENCE_KL_DEFAULTS.reference_kl_enabled),
    /** β: the penalty is β · KL (summed over the completion's tokens). */
    reference_kl_coef: finiteNumber('reference_kl_coef', { min: 0 }).default(REFERENCE_KL_DEFAULTS.reference_kl_coef),
    /**
     * CoMLRL's devices for the reference models: a torch device (cpu, cuda, cuda:N) for all, or one
     * per agent. Checked only when references are loaded; today every device must be the run's one
     * device (a LoRA reference is the agent's own base anyway).
     */
    reference_devices: deviceSpecField('reference_devices').default(REFERENCE_KL_DEFAULTS.reference_devices),
    /** 'reward': penalty on the returns (CoMLRL); 'loss': a loss term with gradient (TRL's beta). */
    kl_mode: enumField('kl_mode', KL_MODES).default(REFERENCE_KL_DEFAULTS.kl_mode),
  };
}

/** The reference-KL settings of a parsed trainer config. */
export interface ReferenceKlSettings {
  readonly reference_kl_enabled: boolean;
  readonly reference_kl_coef: number;
  readonly kl_mode: KLMode;
}

// ---------------------------------------------------------------------------------------------
// The estimator.
// ---------------------------------------------------------------------------------------------

/** k3 of one token: exp(d) − d − 1 with d = log p_ref − log p (expm1 keeps small d exact). */
export function k3(policyLogProb: number, referenceLogProb: number): number {
  const d = referenceLogProb - policyLogProb;
  return Math.expm1(d) - d;
}

/** Σ_t k3 over a completion's tokens (0 for an empty completion). */
export function sequenceK3(policy: readonly number[], reference: readonly number[]): number {
  if (policy.length !== reference.length) throw new Error(`sequenceK3: ${policy.length} policy but ${reference.length} reference log-probs`);
  let s = 0;
  for (let t = 0; t < policy.length; t++) s += k3(policy[t], reference[t]);
  return s;
}

// ---------------------------------------------------------------------------------------------
// The reference policies.
// ---------------------------------------------------------------------------------------------

/** How an agent's reference is realised. */
export type ReferenceKind = 'adapters-off' | 'frozen-copy' | 'given';

/** An agent's frozen reference policy: it only scores completions. */
export interface ReferencePolicy {
  readonly kind: ReferenceKind;
  /** Teacher-forced log p_ref of every completion token (as {@link CausalLM.tokenLogProbs}). */
  tokenLogProbs(promptIds: number[][], completionIds: number[][]): Promise<number[][]>;
  /** Frees what the reference owns (a frozen copy); a no-op otherwise. */
  dispose(): void;
}

/**
 * The reference of `agent` (see the module comment): `agent.reference` when given, else its base
 * with the adapter off under LoRA, else a frozen copy of its current weights (call this before
 * any update). The trainer owns and disposes a frozen copy; a given reference stays the caller's.
 * @throws Error for a full fine-tuning model that can be neither run without adapters nor copied,
 * and for a given reference that does not share the agent's tokenizer ({@link checkReferenceTokenizer}).
 */
export function referenceOf(agent: Agent): ReferencePolicy {
  const given = agent.reference;
  if (given) {
    checkReferenceTokenizer(agent, given);
    return { kind: 'given', tokenLogProbs: (p, c) => given.tokenLogProbs(p, c), dispose: () => {} };
  }
  const model = agent.model;
  if (model.loraInfo && model.withAdaptersOff) {
    const off = model.withAdaptersOff.bind(model);
    return { kind: 'adapters-off', tokenLogProbs: (p, c) => off(() => model.tokenLogProbs(p, c)), dispose: () => {} };
  }
  if (model instanceof TfCausalLM) {
    const copy = model.frozenCopy();
    return { kind: 'frozen-copy', tokenLogProbs: (p, c) => copy.tokenLogProbs(p, c), dispose: () => copy.dispose() };
  }
  throw new Error(`agent '${agent.name}': reference KL needs a reference model (set Agent.reference): the model has no LoRA base and cannot be copied`);
}

/**
 * Refuses a given reference that cannot mean by the agent's token ids what the agent means: one
 * with fewer ids (config.json `vocab_size`) than the agent's tokenizer has, which fails at the
 * first completion that uses them, and, when `agent.referenceTokenizer` is given, one whose
 * tokenizer differs from the agent's (its log-probs would score other tokens: a KL or DPO margin
 * without meaning).
 * @throws Error naming the agent and the difference
 */
export function checkReferenceTokenizer(agent: Agent, reference: CausalLM): void {
  const fix = 'give a reference model that shares the agent\'s tokenizer (vocabulary and ids)';
  if (agent.referenceTokenizer) {
    const diff = tokenizerDifference(agent.tokenizer, agent.referenceTokenizer);
    if (diff !== undefined) throw new Error(`agent '${agent.name}': its reference model has another tokenizer than the agent (${diff}); ${fix}`);
  }
  if (reference.vocabSize < agent.tokenizer.vocabSize) {
    throw new Error(
      `agent '${agent.name}': its reference model has ${reference.vocabSize} token ids (config.json vocab_size) but the agent's tokenizer has ${agent.tokenizer.vocabSize}, so the reference cannot score the agent's tokens (another tokenizer?); ${fix}`,
    );
  }
}

/** What the KL of one group of completions came to. */
export interface GroupKl {
  /** KL(y_k): Σ_t k3 per completion. */
  readonly kls: number[];
  /** log p_ref per completion token (what `kl_mode: loss` needs at update time). */
  readonly referenceLogProbs: number[][];
}

/**
 * KL of each of `completions` (sampled by `model` after `promptIds`) to `reference`: both score
 * the completions teacher-forced, tape-free, with the current (pre-update) policy.
 */
export async function groupKl(model: CausalLM, reference: ReferencePolicy, promptIds: readonly number[], completions: readonly (readonly number[])[]): Promise<GroupKl> {
  const prompts = completions.map(() => [...promptIds]);
  const ids = completions.map((c) => [...c]);
  const policy = await model.tokenLogProbs(prompts, ids);
  const ref = await reference.tokenLogProbs(prompts, ids);
  return { kls: policy.map((p, k) => sequenceK3(p, ref[k])), referenceLogProbs: ref };
}

// ---------------------------------------------------------------------------------------------
// kl_mode: loss — the KL as a loss term.
// ---------------------------------------------------------------------------------------------

/** A policy-gradient row with its KL term: adds `klWeight · Σ_t k3(log p_t, refLogProbs_t)` to the loss. */
export interface KlPolicyGradientRow extends PolicyGradientRow {
  readonly refLogProbs: readonly number[];
  readonly klWeight: number;
}

/** A row's optional KL term (rows without `refLogProbs` add nothing). */
export interface KlTermRow {
  readonly refLogProbs?: readonly number[];
  readonly klWeight?: number;
}

/**
 * Σ_rows klWeight · Σ_t (exp(r_t − log p_t) − (r_t − log p_t) − 1) over a chunk's scores, with
 * its gradient; null when no row of the chunk has a KL term. Padding counts 0 (masked).
 */
export function klLossTerm(scores: CompletionScores, rows: readonly KlTermRow[]): tf.Scalar | null {
  if (!rows.some((r) => r.refLogProbs !== undefined && (r.klWeight ?? 0) !== 0)) return null;
  return tf.tidy(() => {
    const [b, width] = scores.tokenLogProbs.shape;
    const ref = new Float32Array(b * width);
    rows.forEach((r, i) => {
      if (r.refLogProbs) ref.set(r.refLogProbs, i * width);
    });
    const d = tf.sub(tf.tensor2d(ref, [b, width]), scores.tokenLogProbs);
    const tokenKl = tf.mul(tf.sub(tf.sub(tf.exp(d), d), 1), scores.mask);
    const weights = tf.tensor1d(rows.map((r) => (r.refLogProbs ? (r.klWeight ?? 0) : 0)));
    return tf.sum(tf.mul(tf.sum(tokenKl, 1), weights)) as tf.Scalar;
  });
}

/**
 * One optimizer step on
 *   loss = Σ_rows [ −coef · Σ_t log p_t + klWeight · Σ_t (exp(r_t − log p_t) − (r_t − log p_t) − 1) ]
 * with r_t the reference log-probs stored at rollout: the policy-gradient step of core/loss.ts
 * plus the k3 KL with its gradient. Rows whose coef and klWeight are both 0 are not scored.
 * The returned `loss` is the whole loss; `klLoss` its KL part.
 */
export function klPolicyGradientStep(
  model: CausalLM,
  optimizer: AdamW,
  rows: readonly KlPolicyGradientRow[],
  options: PolicyGradientOptions = {},
): PolicyGradientResult & { readonly klLoss: number } {
  const label = options.label ?? 'policy update';
  const objective = klPolicyObjective(rows, label);
  const result = stepOnSequenceLoss(model, optimizer, rows, objective.loss, { ...options, label, skip: objective.skip });
  return { ...result, klLoss: objective.klLoss() };
}

/**
 * The loss of {@link klPolicyGradientStep} over `rows` (checked here), which rows it skips, and the
 * KL part of the loss summed over the passes it ran in.
 */
export function klPolicyObjective(
  rows: readonly KlPolicyGradientRow[],
  label: string,
): { loss: SequenceLoss<KlPolicyGradientRow>; skip: (r: KlPolicyGradientRow) => boolean; klLoss: () => number } {
  for (const r of rows) {
    if (!Number.isFinite(r.coef) || !Number.isFinite(r.klWeight)) throw new Error(`${label}: a row has a non-finite weight (${r.coef}, KL ${r.klWeight})`);
    if (r.refLogProbs.length !== r.completionIds.length) throw new Error(`${label}: ${r.refLogProbs.length} reference log-probs for ${r.completionIds.length} tokens`);
    if (r.completionIds.length === 0) throw new Error(`${label}: an empty completion cannot be scored`);
  }
  let klLoss = 0;
  const loss: SequenceLoss<KlPolicyGradientRow> = (seq, chunk, scores) => {
    const kl = (scores && klLossTerm(scores, chunk)) ?? tf.scalar(0);
    klLoss += kl.dataSync()[0];
    return tf.add(linearPolicyLoss(seq, chunk), kl) as tf.Scalar;
  };
  return { loss, skip: (r) => r.coef === 0 && r.klWeight === 0, klLoss: () => klLoss };
}

// ---------------------------------------------------------------------------------------------
// Metrics.
// ---------------------------------------------------------------------------------------------

/** One measured KL: agent, 0-based turn, value. */
export interface KlSample {
  readonly agent: number;
  readonly turn: number;
  readonly kl: number;
}

/**
 * `agent_i/turn_k/kl/mean`: the mean KL per completion of each agent at each turn, and under
 * `kl_mode: reward` `agent_i/turn_k/kl/penalty_mean` = β · that mean. Computed from what a log
 * covers (MAGRPO: the item's tree; CoLLM: the flushed transitions), so resumed runs log the same.
 */
export function klMetrics(samples: readonly KlSample[], settings: ReferenceKlSettings): Record<string, number> {
  const sums = new Map<string, { n: number; kl: number }>();
  for (const s of samples) {
    const key = agentKey(s.agent, turnKey(s.turn, 'kl'));
    const acc = sums.get(key) ?? { n: 0, kl: 0 };
    acc.n++;
    acc.kl += s.kl;
    sums.set(key, acc);
  }
  const out: Record<string, number> = {};
  for (const [key, s] of [...sums.entries()].sort(([a], [b]) => (a < b ? -1 : 1))) {
    out[`${key}/mean`] = s.kl / s.n;
    if (settings.kl_mode === 'reward') out[`${key}/penalty_mean`] = (settings.reference_kl_coef * s.kl) / s.n;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The actor-critic trainers' side: KL per turn and the shaped joint reward.
// ---------------------------------------------------------------------------------------------

/**
 * The reference KL of a CoLLM trainer: each agent's reference, the KL of every sampled completion,
 * and the penalty on the joint reward (`kl_mode: reward`) or the reference log-probs the actor's
 * loss term needs (`kl_mode: loss`). Built before any update.
 */
export class ReferenceKlTracker {
  private constructor(
    private readonly settings: ReferenceKlSettings,
    private readonly agents: readonly Agent[],
    private readonly references: readonly ReferencePolicy[],
  ) {}

  /** The tracker of a config, or null when reference KL is off. */
  static of(settings: ReferenceKlSettings, agents: readonly Agent[]): ReferenceKlTracker | null {
    if (!settings.reference_kl_enabled) return null;
    return new ReferenceKlTracker(settings, agents, agents.map((a) => referenceOf(a)));
  }

  /** Whether the penalty goes on the reward (`kl_mode: reward`); else it is a loss term of the actors. */
  get shapesReward(): boolean {
    return this.settings.kl_mode === 'reward';
  }

  /**
   * kl[i][k]: agent i's KL of its k-th completion; under `kl_mode: loss` also the reference
   * log-probs per token, referenceLogProbs[i][k][t].
   */
  async turnKls(
    promptIds: readonly (readonly number[])[],
    completions: readonly (readonly (readonly number[])[])[],
  ): Promise<{ kl: number[][]; referenceLogProbs: number[][][] | null }> {
    const groups: GroupKl[] = [];
    for (let i = 0; i < this.agents.length; i++) groups.push(await groupKl(this.agents[i].model, this.references[i], promptIds[i], completions[i]));
    return { kl: groups.map((g) => g.kls), referenceLogProbs: this.shapesReward ? null : groups.map((g) => g.referenceLogProbs) };
  }

  /**
   * The joint reward of joint sample k less the penalty: r − β · Σ_i KL_i(y_{i,k}), the KL of the
   * joint policy (it factorises over the agents).
   */
  shapedReward(reward: number, kl: readonly (readonly number[])[], k: number): number {
    let total = 0;
    for (const row of kl) total += row[k];
    return reward - this.settings.reference_kl_coef * total;
  }

  /** The KL metrics of a buffer flush (see {@link klMetrics}). */
  flushMetrics(transitions: readonly JointTransition[]): Record<string, number> {
    return klMetrics(
      transitions.flatMap((tr) => tr.agents.flatMap((a, agent) => (a.referenceKl === undefined ? [] : [{ agent, turn: tr.turn, kl: a.referenceKl }]))),
      this.settings,
    );
  }

  /** Frees the frozen copies it made. */
  dispose(): void {
    for (const r of this.references) r.dispose();
  }
}
