/**
 * The unbiased pass@k estimator of Chen et al. (2021, "Evaluating Large Language Models Trained on
 * Code"): with n samples of which c pass, pass@k = 1 − C(n−c, k) / C(n, k), the probability that
 * at least one of k samples drawn without replacement from the n passes.
 */

function checkCount(name: string, value: number): void {
  if (!Number.isInteger(value) || value < 0) throw new Error(`passAtK: ${name} must be an integer >= 0, got ${value}`);
}

/**
 * pass@k for one problem with `n` samples of which `c` are correct.
 *
 * Computed as 1 − Π_{i=n−c+1}^{n} (1 − k/i), which equals 1 − C(n−c,k)/C(n,k) without forming the
 * binomials (they overflow doubles already for n around 1000).
 *
 * @throws when the counts are not integers, c > n, k < 1 or k > n (an estimate needs k ≤ n samples).
 */
export function passAtK(n: number, c: number, k: number): number {
  checkCount('n', n);
  checkCount('c', c);
  checkCount('k', k);
  if (c > n) throw new Error(`passAtK: c (${c}) must not exceed n (${n})`);
  if (k < 1) throw new Error(`passAtK: k must be >= 1, got ${k}`);
  if (k > n) throw new Error(`passAtK: k (${k}) must not exceed the number of samples n (${n})`);
  // Fewer failures than k: every draw of k contains a pass.
  if (n - c < k) return 1;
  let prodFail = 1;
  for (let i = n - c + 1; i <= n; i++) prodFail *= 1 - k / i;
  return 1 - prodFail;
}

/** One problem's sample counts for {@link meanPassAtK}. */
export interface PassCounts {
  /** Samples drawn. */
  readonly n: number;
  /** Samples that passed. */
  readonly c: number;
}

/** Mean pass@k over problems (the figure papers report). Problems with n < k are an error. */
export function meanPassAtK(problems: readonly PassCounts[], k: number): number {
  if (problems.length === 0) throw new Error('meanPassAtK: no problems');
  let sum = 0;
  for (const p of problems) sum += passAtK(p.n, p.c, k);
  return sum / problems.length;
}
