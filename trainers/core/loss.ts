/**
 * The policy-gradient update every trainer shares: teacher-force each completion after its prompt,
 * sum the log-probs of exactly its generated tokens (EOS included, padding never), form a loss from
 * those sums, and take one optimizer step on the summed gradients.
 */
import * as tf from '@tensorflow/tfjs';
import { sampleMemory } from '../../src/logging/memory.js';
import type { JointLoraPasses } from '../../src/model/lora/joint.js';
import type { CausalLM, CompletionScores, RowSize } from '../../src/model/types.js';
import type { AdamW } from '../../src/optim/adamw.js';
import { clipGradNorm, sumOfSquares } from '../../src/optim/clip.js';
import { currentPhaseParts } from './metrics.js';

/** A completion to score after its prompt (ids of the agent's own tokenizer). */
export interface ScoredCompletion {
  readonly promptIds: readonly number[];
  readonly completionIds: readonly number[];
}

/** A completion with its loss weight: the row adds −coef · Σ_t log p(token_t) to the loss. */
export interface PolicyGradientRow extends ScoredCompletion {
  readonly coef: number;
}

/**
 * Maps the summed completion log-probs of a chunk of rows ([rows.length], differentiable) to that
 * chunk's scalar loss. Must be additive over rows: the step sums the losses (and gradients) of the
 * chunks it splits the rows into. `scores` are the per-token log-probs the sums came from (for
 * token-level terms such as the reference KL).
 */
export type SequenceLoss<R extends ScoredCompletion> = (seqLogProbs: tf.Tensor1D, rows: readonly R[], scores?: CompletionScores) => tf.Scalar;

/** Options of {@link sequenceLossGradients}. */
export interface SequenceLossOptions<R extends ScoredCompletion> {
  /**
   * At most this many rows per forward/backward pass (gradients are summed over passes). Default:
   * as many as the memory budget allows (see `src/memory`).
   */
  chunkSize?: number | null;
  /** Rows that contribute nothing (e.g. zero advantage); they are not scored. */
  skip?: (row: R) => boolean;
  /** Prefix for error messages, e.g. `agent 1 (qwen3)`. */
  label?: string;
}

/** Gradients keyed by variable name plus what was computed. */
export interface SequenceLossGradients {
  /** One gradient per trainable variable the loss reaches, keyed by name. Caller disposes. */
  readonly grads: tf.NamedTensorMap;
  /** The loss value (sum over chunks). */
  readonly loss: number;
  readonly rowsScored: number;
  readonly tokensScored: number;
}

/**
 * Σ over `chunks` of `lossOf(chunk)` and its gradients w.r.t. `vars`: one forward/backward pass per
 * chunk, gradients summed as they come, so memory stays that of one chunk. A variable the loss does
 * not reach gets no gradient (torch's None: the optimizer leaves it alone); with no chunks, every
 * variable gets zeros. Caller disposes the gradients. Inside a timed phase the time goes to its
 * parts `forward` (the `lossOf` calls: the scoring passes) and `backward` (the rest: gradients and
 * their sums).
 * @throws Error with `nonFiniteMessage(loss, chunk size)` when a chunk's loss is NaN or infinite
 *   (nothing is left allocated).
 */
export function accumulateGradients<R>(
  vars: readonly tf.Variable[],
  chunks: readonly R[][],
  lossOf: (chunk: R[]) => tf.Scalar,
  nonFiniteMessage: (loss: number, chunkSize: number) => string,
): { grads: tf.NamedTensorMap; loss: number } {
  const parts = currentPhaseParts();
  const t0 = performance.now();
  let forward = 0;
  const timedLoss = (chunk: R[]): tf.Scalar => {
    const f0 = performance.now();
    try {
      return lossOf(chunk);
    } finally {
      forward += performance.now() - f0;
    }
  };
  const acc = new Map<string, tf.Tensor>();
  let total = 0;
  try {
    for (const chunk of chunks) {
      const { value, grads } = tf.variableGrads(() => tf.tidy(() => timedLoss(chunk)), [...vars]);
      sampleMemory();
      const v = value.dataSync()[0];
      value.dispose();
      if (!Number.isFinite(v)) {
        for (const g of Object.values(grads)) g.dispose();
        throw new Error(nonFiniteMessage(v, chunk.length));
      }
      total += v;
      addInto(acc, grads);
    }
    // torch: a parameter the loss never reaches keeps grad None, and AdamW leaves it alone (no
    // decay, no step) — e.g. a critic's unused LM head. With no chunk at all the loss was a
    // constant zero: every parameter gets a zero gradient, as backward() on it would give.
    const out: tf.NamedTensorMap = {};
    for (const v of vars) {
      const g = acc.get(v.name);
      if (g) out[v.name] = g;
      else if (chunks.length === 0) out[v.name] = tf.zerosLike(v);
    }
    parts?.add('forward', forward / 1000);
    parts?.add('backward', (performance.now() - t0 - forward) / 1000);
    return { grads: out, loss: total };
  } catch (err) {
    for (const g of acc.values()) g.dispose();
    throw err;
  }
}

/** What a scoring pass holds of a row: its prompt and completion, and the completion's tokens scored. */
function scoredRowSize(r: ScoredCompletion): RowSize {
  return { width: r.promptIds.length + r.completionIds.length, scored: r.completionIds.length };
}

/** The error of a chunk whose loss is NaN or infinite. */
function nonFiniteLossMessage(label: string, loss: number, rows: number): string {
  return `${label}: the loss is ${loss} (non-finite) on a chunk of ${rows} completions; check rewards/advantages for NaN or Infinity, or lower the learning rate`;
}

/** Adds a pass's gradients into the running sums by variable name (the pass's tensors are taken over). */
function addInto(acc: Map<string, tf.Tensor>, grads: tf.NamedTensorMap): void {
  for (const [name, g] of Object.entries(grads)) {
    const prev = acc.get(name);
    if (prev) {
      acc.set(name, tf.add(prev, g));
      prev.dispose();
      g.dispose();
    } else acc.set(name, g);
  }
}

/**
 * Gradients of `loss` over `rows` w.r.t. the model's trainable variables, accumulated over chunks.
 * Every variable the loss reaches gets a gradient tensor (all of them zeros when nothing was
 * scored), so an optimizer step on them behaves like torch after `backward()` (moments advance;
 * unreached variables are left alone).
 * @throws Error when the loss of a chunk is NaN or infinite (CoMLRL MAGRPO silently zeroed it).
 */
export function sequenceLossGradients<R extends ScoredCompletion>(
  model: CausalLM,
  rows: readonly R[],
  loss: SequenceLoss<R>,
  options: SequenceLossOptions<R> = {},
): SequenceLossGradients {
  const label = options.label ?? 'policy update';
  const scored = options.skip ? rows.filter((r) => !options.skip?.(r)) : [...rows];
  for (const r of scored) {
    if (r.completionIds.length === 0) throw new Error(`${label}: an empty completion cannot be scored`);
  }
  const plan = model.planPasses(scored, scoredRowSize, {
    label: `${label}: scoring`,
    backward: true,
    maxRows: options.chunkSize,
  });
  const g = accumulateGradients(
    model.trainableVariables(),
    plan.batches,
    (chunk) => {
      const scores = model.scoreCompletions(
        chunk.map((r) => [...r.promptIds]),
        chunk.map((r) => [...r.completionIds]),
        plan.pass,
      );
      // Masked positions hold 0, so the row sum is exactly Σ over the completion's own tokens.
      const seq = tf.sum(scores.tokenLogProbs, 1) as tf.Tensor1D;
      return loss(seq, chunk, scores);
    },
    (v, n) => nonFiniteLossMessage(label, v, n),
  );
  const tokens = scored.reduce((a, r) => a + r.completionIds.length, 0);
  return { grads: g.grads, loss: g.loss, rowsScored: scored.length, tokensScored: tokens };
}

/** Result of {@link applyGradients}. */
export interface AppliedGradients {
  /** Global L2 norm of the gradients before clipping. */
  readonly gradNorm: number;
  /** Whether clipping scaled them. */
  readonly clipped: boolean;
}

/**
 * Optionally clips `grads` to a global norm, then takes one optimizer step. Disposes `grads`.
 * Inside a timed phase its time goes to the phase's part `optimizer`.
 * @throws Error when the gradient norm is non-finite (the step is not taken).
 */
export function applyGradients(
  optimizer: AdamW,
  grads: tf.NamedTensorMap,
  maxGradNorm: number | null | undefined,
  label = 'policy update',
): AppliedGradients {
  const parts = currentPhaseParts();
  const t0 = performance.now();
  try {
    let gradNorm: number;
    let clipped = false;
    if (maxGradNorm !== null && maxGradNorm !== undefined) {
      const c = clipGradNorm(grads, maxGradNorm);
      gradNorm = c.totalNorm;
      if (!Number.isFinite(gradNorm)) throw new Error(`${label}: the gradient norm is ${gradNorm} (non-finite)`);
      clipped = c.clipped;
      optimizer.step(c.grads);
      if (c.clipped) for (const g of Object.values(c.grads)) g.dispose();
    } else {
      gradNorm = Math.sqrt(Object.values(grads).reduce((a, g) => a + sumOfSquares(g), 0));
      if (!Number.isFinite(gradNorm)) throw new Error(`${label}: the gradient norm is ${gradNorm} (non-finite)`);
      optimizer.step(grads);
    }
    return { gradNorm, clipped };
  } finally {
    for (const g of Object.values(grads)) g.dispose();
    parts?.add('optimizer', (performance.now() - t0) / 1000);
  }
}

/** Options of {@link policyGradientStep}. */
export interface PolicyGradientOptions {
  /** Clip the global gradient norm to this before stepping; null/undefined: no clipping. */
  maxGradNorm?: number | null;
  /** Rows per forward/backward pass; null: all at once. */
  chunkSize?: number | null;
  /** Prefix for error messages. */
  label?: string;
}

/** What one {@link policyGradientStep} did. */
export interface PolicyGradientResult {
  /** −Σ coef · Σ_t log p over the rows. */
  readonly loss: number;
  readonly gradNorm: number;
  readonly clipped: boolean;
  readonly rowsScored: number;
  readonly tokensScored: number;
  /** Seconds in teacher-forced scoring plus backward. */
  readonly gradientSeconds: number;
  /** Seconds in clipping plus the optimizer step. */
  readonly optimizerSeconds: number;
}

/** −Σ_rows coef · seqLogProb: the REINFORCE surrogate whose gradient is −Σ coef·∇log π(completion). */
export function linearPolicyLoss(seqLogProbs: tf.Tensor1D, rows: readonly PolicyGradientRow[]): tf.Scalar {
  return tf.tidy(() => tf.neg(tf.sum(tf.mul(seqLogProbs, tf.tensor1d(rows.map((r) => r.coef))))) as tf.Scalar);
}

/**
 * One optimizer step on loss = −Σ_rows coef · Σ_t log p(completion token t | prompt, earlier tokens).
 * Each trainer folds its averaging into `coef` (MAGRPO: A_k / (K · minibatch size)). Rows with
 * coef 0 are not scored (their gradient is zero). Every token of each completion is scored, EOS
 * included; padding never is.
 */
export function policyGradientStep(
  model: CausalLM,
  optimizer: AdamW,
  rows: readonly PolicyGradientRow[],
  options: PolicyGradientOptions = {},
): PolicyGradientResult {
  for (const r of rows) {
    if (!Number.isFinite(r.coef)) throw new Error(`${options.label ?? 'policy update'}: a row has a non-finite weight (${r.coef})`);
  }
  return stepOnSequenceLoss(model, optimizer, rows, linearPolicyLoss, { ...options, skip: (r) => r.coef === 0 });
}

/**
 * One optimizer step on any sequence loss: its gradients over the scored rows
 * ({@link sequenceLossGradients}), clipped and applied ({@link applyGradients}), with the timings.
 */
export function stepOnSequenceLoss<R extends ScoredCompletion>(
  model: CausalLM,
  optimizer: AdamW,
  rows: readonly R[],
  loss: SequenceLoss<R>,
  options: PolicyGradientOptions & { readonly skip?: (row: R) => boolean },
): PolicyGradientResult {
  const t0 = performance.now();
  const g = sequenceLossGradients(model, rows, loss, { chunkSize: options.chunkSize ?? null, skip: options.skip, label: options.label });
  const t1 = performance.now();
  const applied = applyGradients(optimizer, g.grads, options.maxGradNorm, options.label);
  const t2 = performance.now();
  return {
    loss: g.loss,
    gradNorm: applied.gradNorm,
    clipped: applied.clipped,
    rowsScored: g.rowsScored,
    tokensScored: g.tokensScored,
    gradientSeconds: (t1 - t0) / 1000,
    optimizerSeconds: (t2 - t1) / 1000,
  };
}

/** One agent's part of a {@link jointStepOnSequenceLoss}. */
export interface JointAgentLoss<R extends ScoredCompletion> {
  readonly rows: readonly R[];
  readonly loss: SequenceLoss<R>;
  /** Rows that contribute nothing; they are not scored. */
  readonly skip?: (row: R) => boolean;
  readonly optimizer: AdamW;
  /** Prefix for this agent's error messages. */
  readonly label: string;
}

/**
 * One optimizer step for each agent of a joint pass (LoRA agents on one base), each on its own
 * sequence loss: every forward/backward pass scores rows of all agents together, and since an
 * agent's loss reaches only its own adapter, the gradient of the summed loss is each agent's own.
 * The result equals a {@link stepOnSequenceLoss} per agent (up to float summation order).
 * @throws Error naming the agent when its loss or gradient norm is non-finite (no step is taken
 *   for it or for the agents after it).
 */
export function jointStepOnSequenceLoss<R extends ScoredCompletion>(
  joint: JointLoraPasses,
  agents: readonly JointAgentLoss<R>[],
  options: { readonly maxGradNorm: number | null | undefined; readonly chunkSize: number | null | undefined },
): PolicyGradientResult[] {
  if (agents.length !== joint.models.length) throw new Error(`joint update: ${agents.length} agents' losses for ${joint.models.length} models`);
  const t0 = performance.now();
  const scored = agents.map((a) => (a.skip ? a.rows.filter((r) => !a.skip?.(r)) : [...a.rows]));
  scored.forEach((rows, i) => {
    for (const r of rows) if (r.completionIds.length === 0) throw new Error(`${agents[i].label}: an empty completion cannot be scored`);
  });
  const order = scored.flatMap((rows, agent) => rows.map((row) => ({ agent, row })));
  const plan = joint.planPasses(order, ({ row }) => scoredRowSize(row), {
    label: `${agents.map((a) => a.label).join(' + ')}: joint scoring`,
    backward: true,
    maxRows: options.chunkSize,
  });
  const acc = new Map<string, tf.Tensor>();
  const losses = agents.map(() => 0);
  const parts = currentPhaseParts();
  let forward = 0;
  try {
    for (const chunk of plan.batches) {
      const parts = agents.map((_, agent) => chunk.filter((c) => c.agent === agent).map((c) => c.row));
      const values: (tf.Scalar | null)[] = [];
      const { value, grads } = tf.variableGrads(
        () =>
          tf.tidy(() => {
            const f0 = performance.now();
            const scores = joint.scoreCompletions(
              parts.map((rows) => ({ promptIds: rows.map((r) => [...r.promptIds]), completionIds: rows.map((r) => [...r.completionIds]) })),
              plan.pass,
            );
            const terms = parts.map((rows, a) => {
              if (rows.length === 0) return null;
              // Masked positions hold 0, so the row sum is exactly Σ over the completion's own tokens.
              const l = agents[a].loss(tf.sum(scores[a].tokenLogProbs, 1) as tf.Tensor1D, rows, scores[a]);
              values.push(tf.keep(l.clone()));
              return l;
            });
            const present = terms.filter((t): t is tf.Scalar => t !== null);
            forward += performance.now() - f0;
            return (present.length === 1 ? present[0] : tf.addN(present)) as tf.Scalar;
          }),
        joint.trainableVariables(),
      );
      sampleMemory();
      value.dispose();
      let k = 0;
      let bad: string | null = null;
      parts.forEach((rows, a) => {
        if (rows.length === 0) return;
        const v = values[k++]!.dataSync()[0];
        if (!Number.isFinite(v) && bad === null) bad = nonFiniteLossMessage(agents[a].label, v, rows.length);
        losses[a] += v;
      });
      tf.dispose(values.filter((t): t is tf.Scalar => t !== null));
      if (bad !== null) {
        tf.dispose(Object.values(grads));
        throw new Error(bad);
      }
      addInto(acc, grads);
    }
  } catch (err) {
    for (const g of acc.values()) g.dispose();
    throw err;
  }
  const t1 = performance.now();
  // As in accumulateGradients: the scoring passes are the phase's forward part, the rest its backward.
  parts?.add('forward', forward / 1000);
  parts?.add('backward', (t1 - t0 - forward) / 1000);
  const gradsOf = joint.models.map((m, a) => {
    const out: tf.NamedTensorMap = {};
    for (const v of m.trainableVariables()) {
      const g = acc.get(v.name);
      acc.delete(v.name);
      // As alone: an agent with nothing scored had a constant zero loss (zero gradients); one that
      // scored rows has a gradient for each variable its loss reached.
      if (g) out[v.name] = g;
      else if (scored[a].length === 0) out[v.name] = tf.zerosLike(v);
    }
    return out;
  });
  for (const g of acc.values()) g.dispose();
  const gradientSeconds = (t1 - t0) / 1000;
  const results: PolicyGradientResult[] = [];
  for (let a = 0; a < agents.length; a++) {
    const s0 = performance.now();
    let applied: AppliedGradients;
    try {
      applied = applyGradients(agents[a].optimizer, gradsOf[a], options.maxGradNorm, agents[a].label);
    } catch (err) {
      for (const g of gradsOf.slice(a + 1)) tf.dispose(Object.values(g));
      throw err;
    }
    results.push({
      loss: losses[a],
      gradNorm: applied.gradNorm,
      clipped: applied.clipped,
      rowsScored: scored[a].length,
      tokensScored: scored[a].reduce((n, r) => n + r.completionIds.length, 0),
      // The joint pass's time, shared out by rows scored.
      gradientSeconds: order.length > 0 ? (gradientSeconds * scored[a].length) / order.length : 0,
      optimizerSeconds: (performance.now() - s0) / 1000,
    });
  }
  return results;
}
