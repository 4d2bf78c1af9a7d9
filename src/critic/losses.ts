/**
 * Critic losses (CoMLRL 1.3.6 §3.3): squared TD error, and for a shared head the clipped form
 * max((y − v)², (y − v_clip)²) with v_clip = v_old + clamp(v − v_old, −c, c).
 */
import * as tf from '@tensorflow/tfjs';

/**
 * Mean value loss over a batch. `clipRange` null/undefined: mean (y − v)². Otherwise the clipped
 * form around the values stored at rollout (`oldValues`), which must then be given.
 */
export function valueLoss(
  values: tf.Tensor1D,
  targets: readonly number[],
  options: { oldValues?: readonly number[]; clipRange?: number | null } = {},
): tf.Scalar {
  const n = values.shape[0];
  if (targets.length !== n) throw new Error(`valueLoss: ${targets.length} targets for ${n} values`);
  const { oldValues, clipRange } = options;
  return tf.tidy(() => {
    const y = tf.tensor1d(Float32Array.from(targets));
    const err = tf.square(tf.sub(y, values));
    if (clipRange === null || clipRange === undefined) return tf.mean(err) as tf.Scalar;
    if (!oldValues || oldValues.length !== n) throw new Error(`valueLoss: value clipping needs ${n} old values`);
    const old = tf.tensor1d(Float32Array.from(oldValues));
    const clipped = tf.add(old, tf.clipByValue(tf.sub(values, old), -clipRange, clipRange));
    const errClipped = tf.square(tf.sub(y, clipped));
    return tf.mean(tf.maximum(err, errClipped)) as tf.Scalar;
  });
}
