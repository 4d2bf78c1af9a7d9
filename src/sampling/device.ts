import * as tf from '@tensorflow/tfjs';
import type { Rng } from '../util/rng.js';
import { resolveNextTokenOptions, type NextTokenOptions } from './options.js';
import type { NextTokens } from './sample.js';

/**
 * {@link sampleNextTokens} with the logits left where they are: temperature, top-k, top-p and the
 * draw run as tensor ops on the backend (a GPU under torch), and only the chosen token ids and
 * their log-probs are read back, instead of the whole [B, V] logits.
 *
 * Same semantics and the same draws: one `rng.next()` per row, in row order (none when greedy);
 * candidates in the order the host path lists them (by token id, or by descending probability
 * under top-p), so a draw picks the same token as on the host except where float32 and float64
 * sums straddle the draw. Logits with NaN or +Infinity are refused as on the host.
 *
 * @param logits - [B, V] (not disposed).
 */
export async function sampleNextTokensOnDevice(logits: tf.Tensor2D, options: NextTokenOptions, rng?: Rng): Promise<NextTokens> {
  const resolved = resolveNextTokenOptions(options);
  if (!resolved.greedy && !rng) throw new Error('sampleNextTokens: an rng is required unless `greedy` is set');
  const [rows, vocab] = logits.shape;
  const draws = resolved.greedy ? null : Float32Array.from({ length: rows }, () => (rng as Rng).next());
  const [tokens, logProbs, bad] = tf.tidy(() => {
    const invalid = tf.any(tf.logicalOr(tf.isNaN(logits), tf.equal(logits, Infinity)));
    if (resolved.greedy) {
      // argmax (lowest id on ties), log p under the plain temperature-1 softmax.
      const lse = tf.logSumExp(logits, 1);
      return [tf.argMax(logits, 1), tf.sub(tf.max(logits, 1), lse), invalid] as const;
    }
    const u = tf.tensor1d(draws as Float32Array);
    let scaled: tf.Tensor2D = tf.div(logits, resolved.temperature);
    if (resolved.topK > 0 && resolved.topK < vocab) {
      const kth = tf.slice(tf.topk(scaled, resolved.topK).values, [0, resolved.topK - 1], [rows, 1]);
      scaled = tf.where(tf.greaterEqual(scaled, kth), scaled, tf.fill(scaled.shape, -Infinity));
    }
    // Candidate order: token ids, or by descending probability when top-p keeps a prefix.
    let order: tf.Tensor2D | null = null;
    if (resolved.topP < 1) {
      const sorted = tf.topk(scaled, vocab);
      order = sorted.indices;
      const p = tf.exp(tf.logSoftmax(sorted.values));
      // Keep while the mass before a candidate is under top-p (the first always stays).
      const before = tf.cumsum(p, 1, true);
      scaled = tf.where(tf.less(before, resolved.topP), sorted.values, tf.fill(scaled.shape, -Infinity));
    }
    const lp = tf.logSoftmax(scaled);
    const cdf = tf.cumsum(tf.exp(lp), 1);
    const total = tf.slice(cdf, [0, vocab - 1], [rows, 1]);
    // The first candidate whose cumulative mass passes u · total; never a zero-probability one.
    const below = tf.sum(tf.cast(tf.lessEqual(cdf, tf.mul(tf.reshape(u, [rows, 1]), total)), 'int32'), 1);
    // Past the end by rounding: the last candidate (the highest one that has probability).
    const candidate = tf.cast(tf.greater(lp, -Infinity), 'int32');
    const lastCandidate = tf.cast(tf.argMax(tf.mul(candidate, tf.range(1, vocab + 1, 1, 'int32')), 1), 'int32');
    const pos = tf.minimum(below, lastCandidate);
    const flat = tf.add(tf.mul(tf.range(0, rows, 1, 'int32'), tf.scalar(vocab, 'int32')), pos);
    const logProb = tf.gather(tf.reshape(lp, [-1]), flat);
    const token = order === null ? pos : tf.gather(tf.reshape(order, [-1]), flat);
    return [token, logProb, invalid] as const;
  });
  try {
    if ((await bad.data())[0] !== 0) throw new Error('sampling: logits contain NaN or Infinity');
    const ids = await tokens.data();
    const lps = await logProbs.data();
    return { tokens: Int32Array.from(ids), logProbs: Float32Array.from(lps) };
  } finally {
    tokens.dispose();
    logProbs.dispose();
    bad.dispose();
  }
}
