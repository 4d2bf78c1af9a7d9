import type { Rng } from '../util/rng.js';
import { resolveNextTokenOptions, type NextTokenOptions } from './options.js';
import { processRowResolved, type CandidateDistribution } from './process.js';

/** One token per row and its log-probability under the distribution it was drawn from. */
export interface NextTokens {
  /** Chosen token id per row, [B]. */
  readonly tokens: Int32Array;
  /** log p of each chosen token, [B] (see {@link sampleNextTokens} for which distribution). */
  readonly logProbs: Float32Array;
}

/**
 * Draws one token from a processed distribution with one uniform draw from `rng` (inverse CDF over
 * the candidates in their listed order).
 */
export function sampleFromDistribution(dist: CandidateDistribution, rng: Rng): { token: number; logProb: number } {
  const n = dist.indices.length;
  const probs = new Float64Array(n);
  let total = 0;
  for (let c = 0; c < n; c++) {
    probs[c] = Math.exp(dist.logProbs[c]);
    total += probs[c];
  }
  // Scaling u by the actual total keeps rounding in the normaliser from biasing the last candidate.
  const u = rng.next() * total;
  let acc = 0;
  for (let c = 0; c < n; c++) {
    acc += probs[c];
    if (u < acc) return { token: dist.indices[c], logProb: dist.logProbs[c] };
  }
  // u landed in the rounding gap above the accumulated sum: the last candidate with mass.
  let last = n - 1;
  while (last > 0 && probs[last] === 0) last--;
  return { token: dist.indices[last], logProb: dist.logProbs[last] };
}

/**
 * Argmax of one row (lowest id on ties, like torch.argmax) and its log-probability under the
 * temperature-1 softmax over the whole row.
 */
export function greedyToken(row: ArrayLike<number>): { token: number; logProb: number } {
  let best = -1;
  let max = -Infinity;
  for (let i = 0; i < row.length; i++) {
    const v = row[i];
    if (Number.isNaN(v) || v === Infinity) throw new Error(`sampling: logits contain ${v} at token ${i}`);
    if (v > max) {
      max = v;
      best = i;
    }
  }
  if (best < 0) throw new Error('sampling: a logits row has no finite entry (all -Infinity)');
  let sum = 0;
  for (let i = 0; i < row.length; i++) sum += Math.exp(row[i] - max);
  return { token: best, logProb: -Math.log(sum) };
}

/**
 * Picks the next token for each of B rows of logits.
 *
 * @param logits - [B·V] row-major (e.g. the last-position logits of a batch, from `tensor.data()`).
 * @param vocabSize - V.
 * @param options - HF semantics: temperature divides the logits, then top-k, then top-p (see
 *   {@link processRow}). temperature ≤ 0 is an error; pass `greedy: true` for argmax decoding.
 * @param rng - the sampling stream; required unless `greedy`. Exactly one `rng.next()` is drawn per
 *   row, in row order, so a seeded stream gives the same tokens every time.
 * @returns tokens and their log-probs. Sampling: log p under the distribution actually sampled from
 *   (after temperature, top-k and top-p, renormalised) — the behaviour policy. Greedy: argmax, with
 *   log p under the plain temperature-1 softmax of the full row (the model's own probability of that
 *   token), since the point mass greedy "samples" from would always give 0.
 */
export function sampleNextTokens(
  logits: Float32Array,
  vocabSize: number,
  options: NextTokenOptions,
  rng?: Rng,
): NextTokens {
  if (!Number.isInteger(vocabSize) || vocabSize < 1) {
    throw new Error(`sampleNextTokens: vocabSize must be a positive integer, got ${vocabSize}`);
  }
  if (logits.length % vocabSize !== 0) {
    throw new Error(`sampleNextTokens: logits length ${logits.length} is not a multiple of vocabSize ${vocabSize}`);
  }
  const resolved = resolveNextTokenOptions(options);
  if (!resolved.greedy && !rng) throw new Error('sampleNextTokens: an rng is required unless `greedy` is set');
  const B = logits.length / vocabSize;
  const tokens = new Int32Array(B);
  const logProbs = new Float32Array(B);
  for (let b = 0; b < B; b++) {
    const row = logits.subarray(b * vocabSize, (b + 1) * vocabSize);
    const pick = resolved.greedy ? greedyToken(row) : sampleFromDistribution(processRowResolved(row, resolved), rng as Rng);
    tokens[b] = pick.token;
    logProbs[b] = pick.logProb;
  }
  return { tokens, logProbs };
}
