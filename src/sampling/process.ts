import { kthLargest } from './topk.js';
import { resolveNextTokenOptions, type NextTokenOptions, type ResolvedNextTokenOptions } from './options.js';

/**
 * A processed next-token distribution in sparse form: the token ids that survive
 * temperature/top-k/top-p and their log-probabilities renormalised over that set.
 */
export interface CandidateDistribution {
  /** Surviving token ids. Ordered by probability (highest first) when top-p ran, else by id. */
  readonly indices: Int32Array;
  /** log p of each surviving token; `logsumexp(logProbs) = 0` up to rounding. */
  readonly logProbs: Float64Array;
}

/**
 * Applies temperature, then top-k, then top-p to one row of logits, as Hugging Face's
 * TemperatureLogitsWarper → TopKLogitsWarper → TopPLogitsWarper chain does:
 * - temperature divides the logits;
 * - top-k keeps every token whose logit is ≥ the k-th largest (ties at the boundary are kept);
 * - top-p, on the softmax of what top-k kept, keeps tokens in descending probability while the mass
 *   strictly before a token is < topP (the smallest prefix reaching topP; at least one token). This
 *   is HF's "drop where ascending cumulative ≤ 1 − topP" rule, evaluated in float64. Equal
 *   probabilities are ordered by lower token id first.
 * `greedy` is ignored here: this is the sampling distribution. Entries of -Infinity are never
 * kept; NaN or +Infinity, or a row with no finite logit, is an error.
 */
export function processRow(row: ArrayLike<number>, options: NextTokenOptions): CandidateDistribution {
  return processRowResolved(row, resolveNextTokenOptions(options));
}

/** {@link processRow} with options already checked (the per-row hot path). */
export function processRowResolved(row: ArrayLike<number>, options: ResolvedNextTokenOptions): CandidateDistribution {
  const V = row.length;
  const temperature = options.temperature;
  const topKOn = options.topK > 0 && options.topK < V;

  for (let i = 0; i < V; i++) {
    const v = row[i];
    if (Number.isNaN(v) || v === Infinity) throw new Error(`sampling: logits contain ${v} at token ${i}`);
  }
  // Top-k on raw logits: dividing by a positive temperature keeps the order.
  const thr = topKOn ? kthLargest(row, options.topK) : -Infinity;
  let count = 0;
  for (let i = 0; i < V; i++) if (row[i] >= thr && row[i] > -Infinity) count++;
  if (count === 0) throw new Error('sampling: a logits row has no finite entry (all -Infinity)');
  let cand: Int32Array = new Int32Array(count);
  let c = 0;
  for (let i = 0; i < V; i++) if (row[i] >= thr && row[i] > -Infinity) cand[c++] = i;

  if (options.topP < 1 && cand.length > 1) cand = nucleus(row, cand, temperature, options.topP);
  return normalise(row, cand, temperature);
}

/** log-softmax of `row[cand] / T` over `cand` only. */
function normalise(row: ArrayLike<number>, cand: Int32Array, temperature: number): CandidateDistribution {
  let max = -Infinity;
  for (let c = 0; c < cand.length; c++) {
    const x = row[cand[c]] / temperature;
    if (x > max) max = x;
  }
  let sum = 0;
  for (let c = 0; c < cand.length; c++) sum += Math.exp(row[cand[c]] / temperature - max);
  const shift = max + Math.log(sum);
  const logProbs = new Float64Array(cand.length);
  for (let c = 0; c < cand.length; c++) logProbs[c] = row[cand[c]] / temperature - shift;
  return { indices: cand, logProbs };
}

/**
 * Top-p over the candidates. Only tokens that can be in the nucleus are sorted: if the tokens with
 * p ≥ τ already hold ≥ topP of the mass, every token below τ has at least that mass before it and
 * is dropped, so the sort can skip them. τ starts at maxP/1024 and falls until that holds.
 */
function nucleus(row: ArrayLike<number>, cand: Int32Array, temperature: number, topP: number): Int32Array {
  const { logProbs } = normalise(row, cand, temperature);
  const n = cand.length;
  const probs = new Float64Array(n);
  let maxP = 0;
  for (let c = 0; c < n; c++) {
    probs[c] = Math.exp(logProbs[c]);
    if (probs[c] > maxP) maxP = probs[c];
  }
  let tau = maxP / 1024;
  let pool: number[] = [];
  for (;;) {
    pool = [];
    let mass = 0;
    for (let c = 0; c < n; c++) {
      if (probs[c] >= tau) {
        pool.push(c);
        mass += probs[c];
      }
    }
    if (mass >= topP || pool.length === n || tau === 0) break;
    tau = tau < 1e-300 ? 0 : tau / 1024;
  }
  // Candidates are in id order, so comparing positions breaks ties by lower token id.
  pool.sort((a, b) => probs[b] - probs[a] || a - b);
  let kept = 0;
  let before = 0;
  for (const c of pool) {
    if (kept > 0 && before >= topP) break;
    before += probs[c];
    kept++;
  }
  const out = new Int32Array(kept);
  for (let i = 0; i < kept; i++) out[i] = cand[pool[i]];
  return out;
}

/**
 * The processed log-distribution of one logits row as a dense vector of length `row.length`:
 * log p for tokens that survive temperature/top-k/top-p (renormalised), -Infinity elsewhere.
 */
export function processLogits(row: ArrayLike<number>, options: NextTokenOptions): Float64Array {
  const dist = processRow(row, options);
  const dense = new Float64Array(row.length).fill(-Infinity);
  for (let c = 0; c < dist.indices.length; c++) dense[dist.indices[c]] = dist.logProbs[c];
  return dense;
}
