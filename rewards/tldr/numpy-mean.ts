/**
 * `np.mean` of float64 values, bit for bit: numpy sums a contiguous float64 array with pairwise
 * summation (8 interleaved accumulators in blocks of at most 128, halves above that) and then
 * divides by the count. A left-to-right sum gives different last bits.
 */

const BLOCK = 128;

/** numpy's `pairwise_sum_DOUBLE` over `values[start, start + n)`. */
export function numpyPairwiseSum(values: readonly number[], start = 0, n = values.length - start): number {
  if (n < 8) {
    let res = 0.0;
    for (let i = 0; i < n; i++) res += values[start + i];
    return res;
  }
  if (n <= BLOCK) {
    const r = values.slice(start, start + 8);
    let i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (let j = 0; j < 8; j++) r[j] += values[start + i + j];
    }
    let res = r[0] + r[1] + (r[2] + r[3]) + (r[4] + r[5] + (r[6] + r[7]));
    for (; i < n; i++) res += values[start + i];
    return res;
  }
  let n2 = Math.floor(n / 2);
  n2 -= n2 % 8;
  return numpyPairwiseSum(values, start, n2) + numpyPairwiseSum(values, start + n2, n - n2);
}

/** `float(np.mean(values))`; NaN for an empty list, as numpy returns (with a warning). */
export function numpyMean(values: readonly number[]): number {
  return numpyPairwiseSum(values) / values.length;
}
