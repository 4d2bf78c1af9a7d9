/**
 * Embedding rows of a table that lives on and takes no gradient (a frozen LoRA base's, tied to
 * its head), looked up off the gradient tape.
 *
 * Why: tfjs's Gather kernel saves its inputs for a gradient whenever a tape records, and saving
 * clones them. wasm's clone is a copy, so a plain `tf.gather` in a training pass copied Qwen's
 * whole 151,936 × 1,024 table (594 MiB) and kept the copy for the whole pass, although no gradient
 * of a frozen table is ever taken (a 721-token LoRA backward pass on `--like qwen3-0.6b` peaked at
 * 1,378 MiB of tensors with the copy, 785 MiB without it).
 */
import * as tf from '@tensorflow/tfjs';
import { custom } from '../../backend/ops.js';

/**
 * `table[ids[i]]` as [N, hidden]. Not differentiable in the table; the lookup runs inside a
 * custom gradient, where tfjs records no kernel, so nothing is saved.
 */
export function frozenEmbedding(table: tf.Tensor2D, ids: Int32Array): tf.Tensor2D {
  const lookup = custom(([idx]: [tf.Tensor1D]) => ({
    value: tf.gather(table, idx),
    // Ids are integers: no gradient flows to them (never called: no trainable input).
    gradFunc: () => tf.zerosLike(idx),
  }));
  return tf.tidy(() => lookup(tf.tensor1d(ids, 'int32')));
}
