import * as tf from '@tensorflow/tfjs';

/** Result of {@link clipGradNorm}. */
export interface ClippedGradients<G> {
  /** The gradients to apply: new tensors when `clipped`, else the inputs themselves. */
  readonly grads: G;
  /** Global L2 norm of the input gradients (before clipping). */
  readonly totalNorm: number;
  /** Whether the gradients were scaled (new tensors the caller must dispose). */
  readonly clipped: boolean;
}

/** Options of {@link clipGradNorm}. */
export interface ClipGradNormOptions {
  /** Throw when the total norm is NaN or infinite (torch's `error_if_nonfinite`). Default false. */
  errorIfNonfinite?: boolean;
}

/**
 * Global-norm gradient clipping with torch.nn.utils.clip_grad_norm_ semantics: total = ‖all grads‖₂;
 * coefficient = maxNorm / (total + 1e-6), clamped to ≤ 1; gradients are scaled when it is < 1.
 * Each tensor's sum of squares is reduced in chunks on the device and the chunks are summed in float64
 * here, which keeps the norm accurate where a single float32 reduction over millions of entries
 * drifts (see backend-findings). Never disposes the inputs.
 */
export function clipGradNorm<G extends ReadonlyArray<tf.Tensor | null | undefined> | tf.NamedTensorMap>(
  grads: G,
  maxNorm: number,
  options: ClipGradNormOptions = {},
): ClippedGradients<G> {
  if (!(maxNorm >= 0) || !Number.isFinite(maxNorm)) throw new Error(`clipGradNorm: maxNorm must be a finite number >= 0, got ${maxNorm}`);
  const list: tf.Tensor[] = (Array.isArray(grads) ? [...grads] : Object.values(grads as tf.NamedTensorMap)).filter(
    (g): g is tf.Tensor => g !== null && g !== undefined,
  );
  const totalNorm = Math.sqrt(list.reduce((acc, g) => acc + sumOfSquares(g), 0));
  if (options.errorIfNonfinite && !Number.isFinite(totalNorm)) {
    throw new Error(`clipGradNorm: the total gradient norm is ${totalNorm}`);
  }
  const coef = maxNorm / (totalNorm + 1e-6);
  // NaN coef (NaN norm) is "not < 1" in JS; torch would multiply by NaN. Scale so NaN propagates the same way.
  if (!(coef < 1) && !Number.isNaN(coef)) return { grads, totalNorm, clipped: false };
  const scale = (g: tf.Tensor | null | undefined) => (g ? tf.tidy(() => tf.mul(g, coef)) : g);
  const scaled = Array.isArray(grads)
    ? grads.map(scale)
    : Object.fromEntries(Object.entries(grads as tf.NamedTensorMap).map(([k, g]) => [k, scale(g) as tf.Tensor]));
  return { grads: scaled as unknown as G, totalNorm, clipped: true };
}

const CHUNK = 1024;

/** Σ g² in float64 from float32 partial sums over chunks of 1024 entries. */
export function sumOfSquares(g: tf.Tensor): number {
  const partial = tf.tidy(() => {
    const x = tf.reshape(g.dtype === 'float32' ? g : tf.cast(g, 'float32'), [-1]);
    const sq = tf.square(x);
    if (x.size <= CHUNK) return tf.sum(sq);
    const padded = x.size % CHUNK === 0 ? sq : tf.pad(sq, [[0, CHUNK - (x.size % CHUNK)]]);
    return tf.sum(tf.reshape(padded, [-1, CHUNK]), 1);
  });
  const data = partial.dataSync();
  partial.dispose();
  let acc = 0;
  for (let i = 0; i < data.length; i++) acc += data[i];
  return acc;
}
