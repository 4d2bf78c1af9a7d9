/**
 * Update pieces both actor-critic trainers (CoLLM-DC, CoLLM-CC) share: the actor objective with the
 * optional importance ratio and its clipping, the critic regression step, the joint step of a
 * shared head, and behaviour log-probs at rollout time.
 *
 * Actor objective per sample (A = normalized advantage, w = 1/|minibatch|):
 * - ratio off (CoMLRL 1.3.6):  −w · A · log π_θ(a|h)
 * - ratio on:  ρ = π_θ(a|h)/π_old(a|h) = exp(Σ_t log π_θ − Σ_t log π_old),
 *              −w · min(ρ·A, clip(ρ, 1−c, 1+c)·A)   (−w·ρ·A without a clip range)
 * log π is summed over the completion's tokens. While an actor has taken no optimizer step since it
 * produced a sample, π_θ is π_old by definition: the stored value is then replaced by the current
 * log-prob with its gradient stopped, so ρ is exactly 1 (no float noise from a different batch
 * layout) and its gradient is A·∇log π, the same as the ratio-free objective.
 */
import * as tf from '@tensorflow/tfjs';
import { stopGradient } from '../../src/backend/ops.js';
import { valueLoss } from '../../src/critic/losses.js';
import type { ValueModel } from '../../src/critic/value-model.js';
import { CRITIC_INPUT_KNOB } from '../../src/memory/errors.js';
import type { CausalLM } from '../../src/model/types.js';
import type { AdamW } from '../../src/optim/adamw.js';
import { accumulateGradients, applyGradients, sequenceLossGradients, type ScoredCompletion, type SequenceLoss } from '../core/loss.js';
import { klLossTerm, type KlTermRow } from '../core/reference-kl.js';

/** One actor sample of a minibatch (with the reference-KL loss term under `kl_mode: loss`). */
export interface ActorRow extends ScoredCompletion, KlTermRow {
  /** The (normalized) advantage. */
  readonly advantage: number;
  /** Stored Σ log π_old of the completion, or null when the actor has not changed since (ρ ≡ 1). */
  readonly oldLogProb: number | null;
  /** Loss weight (1/|minibatch| for CoMLRL's mean). */
  readonly weight: number;
}

/** How the actor objective uses the importance ratio. */
export interface RatioSettings {
  /** false: CoMLRL's −A·log π. */
  readonly useRatio: boolean;
  /** Clip ρ to [1−c, 1+c]; null: unclipped. Ignored when `useRatio` is false. */
  readonly clipRange: number | null;
}

/** Ratio values seen during one update (filled by the objective as it runs). */
export interface RatioRecorder {
  /** ρ of every row scored (exp of the log-ratio; 1 for rows with no stored log-prob). */
  ratios: number[];
}

// exp of a log-ratio beyond ±20 overflows nothing but means the sample is far off-policy; capping
// the exponent keeps the loss finite, and such rows are clipped anyway (zero gradient).
const LOG_RATIO_CAP = 20;

/**
 * The actor objective of the module comment as a {@link SequenceLoss} (additive over rows, so it
 * can be chunked). Records ρ per row into `recorder` when given.
 */
export function actorObjective(settings: RatioSettings, recorder?: RatioRecorder): SequenceLoss<ActorRow> {
  return (seqLogProbs, rows, scores) =>
    tf.tidy(() => {
      const adv = tf.tensor1d(rows.map((r) => r.advantage));
      const w = tf.tensor1d(rows.map((r) => r.weight));
      // Old log-probs: the stored value, or the current one with its gradient stopped (ρ = 1 exactly).
      const stored = tf.tensor1d(rows.map((r) => r.oldLogProb ?? 0));
      const isFresh = tf.tensor1d(rows.map((r) => (r.oldLogProb === null ? 1 : 0)));
      const old = tf.add(tf.mul(isFresh, stopGradient(seqLogProbs)), tf.mul(tf.sub(1, isFresh), stored));
      const logRatio = tf.clipByValue(tf.sub(seqLogProbs, old), -LOG_RATIO_CAP, LOG_RATIO_CAP);
      const ratio = tf.exp(logRatio);
      if (recorder) recorder.ratios.push(...(ratio.dataSync() as Float32Array));
      let surrogate: tf.Tensor1D;
      if (!settings.useRatio) {
        surrogate = tf.mul(seqLogProbs, adv);
      } else if (settings.clipRange === null) {
        surrogate = tf.mul(ratio, adv);
      } else {
        const c = settings.clipRange;
        surrogate = tf.minimum(tf.mul(ratio, adv), tf.mul(tf.clipByValue(ratio, 1 - c, 1 + c), adv));
      }
      const policy = tf.neg(tf.sum(tf.mul(surrogate, w))) as tf.Scalar;
      // The reference-KL loss term (`kl_mode: loss`), where the rows carry one.
      const kl = scores ? klLossTerm(scores, rows) : null;
      return kl ? (tf.add(policy, kl) as tf.Scalar) : policy;
    });
}

/** Mean, min, max of ρ and the fraction with |ρ − 1| > c (0 without a clip range). */
export function ratioStats(ratios: readonly number[], clipRange: number | null): { mean: number; min: number; max: number; clipFraction: number } {
  if (ratios.length === 0) return { mean: 1, min: 1, max: 1, clipFraction: 0 };
  let sum = 0;
  let min = Infinity;
  let max = -Infinity;
  let clipped = 0;
  for (const r of ratios) {
    sum += r;
    min = Math.min(min, r);
    max = Math.max(max, r);
    if (clipRange !== null && Math.abs(r - 1) > clipRange) clipped++;
  }
  return { mean: sum / ratios.length, min, max, clipFraction: clipped / ratios.length };
}

/** What one actor or critic step did. */
export interface UpdateStepResult {
  /** Loss value (actor: the objective; critic: the unscaled value loss). */
  readonly loss: number;
  /** Global gradient norm before clipping. */
  readonly gradNorm: number;
}

/** Options of the update steps. */
export interface UpdateStepOptions {
  /** Clip the global gradient norm to this before stepping; null: no clipping. */
  readonly maxGradNorm: number | null;
  /** Rows per forward/backward pass (gradients summed); null: all at once. */
  readonly chunkSize: number | null;
  /** Prefix for error messages. */
  readonly label: string;
}

/** One actor optimizer step on {@link actorObjective}. */
export function actorStep(
  model: CausalLM,
  optimizer: AdamW,
  rows: readonly ActorRow[],
  settings: RatioSettings,
  options: UpdateStepOptions,
  recorder?: RatioRecorder,
): UpdateStepResult {
  checkActorRows(rows, options.label);
  const g = sequenceLossGradients(model, rows, actorObjective(settings, recorder), { chunkSize: options.chunkSize, label: options.label });
  const applied = applyGradients(optimizer, g.grads, options.maxGradNorm, options.label);
  return { loss: g.loss, gradNorm: applied.gradNorm };
}

/** Refuses actor rows with a non-finite advantage or behaviour log-prob, naming `label`. */
export function checkActorRows(rows: readonly ActorRow[], label: string): void {
  for (const r of rows) {
    if (!Number.isFinite(r.advantage)) throw new Error(`${label}: non-finite advantage (${r.advantage})`);
    if (r.oldLogProb !== null && !Number.isFinite(r.oldLogProb)) throw new Error(`${label}: non-finite behaviour log-prob (${r.oldLogProb})`);
  }
}

/** One critic regression sample. */
export interface ValueRow {
  /** Critic input ids (value read at the last one). */
  readonly criticIds: readonly number[];
  /** The TD target y. */
  readonly target: number;
  /** The value stored at rollout (for value clipping). */
  readonly oldValue: number;
  /** Numeric m_t beside `criticIds`, for a head that reads it (config `critic_global_features`). */
  readonly features?: readonly number[];
}

/** The rows' feature vectors when the critic's head reads them, else null; a missing vector is refused by name. */
function rowFeatures(critic: ValueModel, rows: readonly ValueRow[], label: string): (readonly number[])[] | null {
  if (critic.featureSize === 0) return null;
  return rows.map((r, i) => {
    if (r.features === undefined) throw new Error(`${label}: the value head reads ${critic.featureSize} global features, row ${i} has none`);
    return r.features;
  });
}

/**
 * {@link accumulateGradients} over chunks of `rows`; `lossOf` may also report named scalars (e.g.
 * the policy and value parts of a joint loss), which are summed over the chunks.
 */
function accumulate<R>(
  vars: readonly tf.Variable[],
  batches: readonly R[][],
  lossOf: (chunk: R[], report: (name: string, value: tf.Tensor) => void) => tf.Scalar,
  label: string,
): { grads: tf.NamedTensorMap; loss: number; reports: Map<string, number> } {
  const reports = new Map<string, number>();
  const report = (name: string, t: tf.Tensor) => {
    reports.set(name, (reports.get(name) ?? 0) + t.dataSync()[0]);
  };
  const g = accumulateGradients(
    vars,
    batches,
    (chunk) => lossOf(chunk, report),
    (v, n) => `${label}: the loss is ${v} (non-finite) on a chunk of ${n} samples; check rewards and values for NaN/Infinity or lower the learning rate`,
  );
  return { ...g, reports };
}

/**
 * One critic optimizer step on coef · mean (y − V)² (CoMLRL: backward(value_loss_coef ·
 * value_loss) on a separate critic), with value clipping around the stored values when
 * `clipRange` is set. Returns the unscaled value loss and the predictions made before the step.
 */
export function criticStep(
  critic: ValueModel,
  optimizer: AdamW,
  rows: readonly ValueRow[],
  coef: number,
  clipRange: number | null,
  options: UpdateStepOptions,
): UpdateStepResult & { predictions: number[] } {
  for (const r of rows) {
    if (!Number.isFinite(r.target)) throw new Error(`${options.label}: non-finite value target (${r.target})`);
  }
  const n = rows.length;
  const predictions: number[] = [];
  const plan = critic.backbone.planPasses(rows, (r) => ({ width: r.criticIds.length, scored: 0 }), {
    label: `${options.label}: critic values`,
    backward: true,
    knobs: [CRITIC_INPUT_KNOB],
    maxRows: options.chunkSize,
    extraTrainable: critic.head.trainableVariables(),
  });
  const g = accumulate(
    critic.ownVariables(),
    plan.batches,
    (chunk, report) => {
      const v = critic.values(chunk.map((r) => [...r.criticIds]), plan.pass, rowFeatures(critic, chunk, options.label));
      predictions.push(...(v.dataSync() as Float32Array));
      const l = valueLoss(
        v,
        chunk.map((r) => r.target),
        { oldValues: chunk.map((r) => r.oldValue), clipRange },
      );
      // The loss is a mean over the whole minibatch: each chunk carries its share.
      const share = tf.mul(l, chunk.length / n) as tf.Scalar;
      report('value_loss', share);
      return tf.mul(share, coef) as tf.Scalar;
    },
    options.label,
  );
  const applied = applyGradients(optimizer, g.grads, options.maxGradNorm, options.label);
  return { loss: g.reports.get('value_loss') ?? 0, gradNorm: applied.gradNorm, predictions };
}

/**
 * One joint step of an actor with a value head on its own backbone (CoMLRL shared-head IAC):
 * loss = actor objective + coef · value loss (clipped when `clipRange` is set), one backward, one
 * optimizer step over the backbone and head together.
 */
export function sharedStep(
  critic: ValueModel,
  optimizer: AdamW,
  rows: readonly (ActorRow & ValueRow)[],
  settings: RatioSettings,
  coef: number,
  clipRange: number | null,
  options: UpdateStepOptions,
  recorder?: RatioRecorder,
): { policyLoss: number; valueLoss: number; gradNorm: number; predictions: number[] } {
  if (!critic.sharesBackbone) throw new Error(`${options.label}: sharedStep needs a head on the actor's backbone`);
  for (const r of rows) {
    if (!Number.isFinite(r.advantage)) throw new Error(`${options.label}: non-finite advantage (${r.advantage})`);
    if (!Number.isFinite(r.target)) throw new Error(`${options.label}: non-finite value target (${r.target})`);
  }
  const n = rows.length;
  const objective = actorObjective(settings, recorder);
  const predictions: number[] = [];
  const model = critic.backbone;
  for (const r of rows) if (r.completionIds.length === 0) throw new Error(`${options.label}: an empty completion cannot be scored`);
  // Both passes of a row run on the one backbone: the wider input bounds the row.
  const plan = model.planPasses(rows, (r) => ({ width: Math.max(r.promptIds.length + r.completionIds.length, r.criticIds.length) * 2, scored: r.completionIds.length }), {
    label: `${options.label}: scoring and critic values`,
    knobs: [CRITIC_INPUT_KNOB],
    backward: true,
    maxRows: options.chunkSize,
    extraTrainable: critic.head.trainableVariables(),
  });
  const g = accumulate(
    [...model.trainableVariables(), ...critic.head.trainableVariables()],
    plan.batches,
    (chunk, report) => {
      const scores = model.scoreCompletions(
        chunk.map((r) => [...r.promptIds]),
        chunk.map((r) => [...r.completionIds]),
        plan.pass,
      );
      const seq = tf.sum(scores.tokenLogProbs, 1) as tf.Tensor1D;
      const pl = objective(seq, chunk, scores);
      const v = critic.values(chunk.map((r) => [...r.criticIds]), plan.pass, rowFeatures(critic, chunk, options.label));
      predictions.push(...(v.dataSync() as Float32Array));
      const vl = tf.mul(
        valueLoss(
          v,
          chunk.map((r) => r.target),
          { oldValues: chunk.map((r) => r.oldValue), clipRange },
        ),
        chunk.length / n,
      ) as tf.Scalar;
      report('policy_loss', pl);
      report('value_loss', vl);
      return tf.add(pl, tf.mul(vl, coef)) as tf.Scalar;
    },
    options.label,
  );
  const applied = applyGradients(optimizer, g.grads, options.maxGradNorm, options.label);
  return {
    policyLoss: g.reports.get('policy_loss') ?? 0,
    valueLoss: g.reports.get('value_loss') ?? 0,
    gradNorm: applied.gradNorm,
    predictions,
  };
}

/**
 * Σ_t log π(a_t | h, a_<t) of each completion under the model's current weights (teacher-forced,
 * no gradient): the behaviour log-probs stored with a sample (CoMLRL's `old_logprob`).
 */
export async function behaviourLogProbs(
  model: CausalLM,
  prompts: readonly (readonly number[])[],
  completions: readonly (readonly number[])[],
): Promise<number[]> {
  if (prompts.length === 0) return [];
  const per = await model.tokenLogProbs(
    prompts.map((p) => [...p]),
    completions.map((c) => [...c]),
  );
  return behaviourSums(per);
}

/** Σ of each completion's token log-probs: its behaviour log-prob, refused when non-finite. */
export function behaviourSums(tokenLogProbs: readonly (readonly number[])[]): number[] {
  return tokenLogProbs.map((lp, i) => {
    const s = lp.reduce((a, b) => a + b, 0);
    if (!Number.isFinite(s)) throw new Error(`behaviour log-prob of completion ${i} is ${s} (non-finite)`);
    return s;
  });
}

/**
 * An actor sample from an agent's part of a transition, weighted 1/|minibatch| (CoMLRL's mean).
 * While the actor is the one that sampled it (`policyVersion` unchanged), π_old is π_θ and the
 * stored log-prob is not used, so ρ is exactly 1.
 */
export function actorRow(
  step: { promptIds: readonly number[]; completionIds: readonly number[]; behaviourLogProb: number; policyVersion: number; referenceLogProbs?: readonly number[] },
  advantage: number,
  currentVersion: number,
  minibatchSize: number,
  klCoef = 0,
): ActorRow {
  return {
    promptIds: step.promptIds,
    completionIds: step.completionIds,
    advantage,
    oldLogProb: step.policyVersion === currentVersion ? null : step.behaviourLogProb,
    weight: 1 / minibatchSize,
    // `kl_mode: loss`: β · Σ_t k3 with the policy term's weight (the sample stored the reference log-probs).
    ...(step.referenceLogProbs && klCoef !== 0 ? { refLogProbs: step.referenceLogProbs, klWeight: klCoef / minibatchSize } : {}),
  };
}
