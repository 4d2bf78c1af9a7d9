/**
 * Summary statistics shared by the trainers, the replay buffer and the task metrics: one home, so
 * two callers cannot drift apart. Behaviour on empty input is explicit because callers differ: a
 * metric of no episodes is NaN (nothing measured), an advantage baseline of no samples is 0.
 */

/**
 * Arithmetic mean, summed left to right from 0. `onEmpty` is returned for an empty list
 * (default NaN: a metric over nothing is not a number).
 */
export function mean(values: readonly number[], onEmpty = Number.NaN): number {
  if (values.length === 0) return onEmpty;
  let s = 0;
  for (const v of values) s += v;
  return s / values.length;
}

/** Population standard deviation (divides by n, as torch's `unbiased=False`); 0 for an empty list. */
export function stdPop(values: readonly number[]): number {
  if (values.length === 0) return 0;
  const m = mean(values);
  let s = 0;
  for (const v of values) s += (v - m) * (v - m);
  return Math.sqrt(s / values.length);
}

/**
 * (x − mean) / max(std_pop, floor): a constant group maps to zeros instead of dividing by ~0. The
 * floor is the caller's (both trainer families use CoMLRL's 1e-6 today; each passes its own).
 */
export function zScore(values: readonly number[], floor: number): number[] {
  const m = mean(values, 0);
  const sd = Math.max(stdPop(values), floor);
  return values.map((v) => (v - m) / sd);
}

/**
 * Groups items by turn, groups in ascending turn order, items in input order inside a group (the
 * order both trainer families consume a buffer in).
 */
export function groupItemsByTurn<T>(items: readonly T[], turnOf: (item: T) => number): { turn: number; items: T[] }[] {
  const groups = new Map<number, T[]>();
  for (const item of items) {
    const t = turnOf(item);
    const g = groups.get(t);
    if (g) g.push(item);
    else groups.set(t, [item]);
  }
  return [...groups.entries()].sort((a, b) => a[0] - b[0]).map(([turn, group]) => ({ turn, items: group }));
}

/** {@link mean} with 0 for an empty list: what the trainers' baselines and per-turn logs use. */
export function meanOrZero(values: readonly number[]): number {
  return mean(values, 0);
}

/**
 * Whether a list is constant up to double rounding: its spread is at most 1e-12 of its largest
 * magnitude. Values computed as differences (δ = y − V) or sums of equal terms can differ in the
 * last bits where they are equal in exact arithmetic, and a statistic that divides by their
 * variance would turn that noise into a number; float32 model outputs differ by far more (≈1e-7).
 */
export function isConstant(values: readonly number[]): boolean {
  if (values.length === 0) return true;
  let lo = values[0];
  let hi = values[0];
  let scale = 0;
  for (const v of values) {
    if (v < lo) lo = v;
    if (v > hi) hi = v;
    scale = Math.max(scale, Math.abs(v));
  }
  return hi - lo <= 1e-12 * scale;
}

/**
 * Pearson correlation of two equally long lists (population moments). NaN when it is undefined:
 * fewer than 2 pairs, or either list constant ({@link isConstant}).
 */
export function pearsonCorrelation(xs: readonly number[], ys: readonly number[]): number {
  if (xs.length !== ys.length) throw new Error(`pearsonCorrelation: ${xs.length} x values but ${ys.length} y values`);
  const n = xs.length;
  if (n < 2 || isConstant(xs) || isConstant(ys)) return Number.NaN;
  const mx = mean(xs);
  const my = mean(ys);
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < n; i++) {
    const dx = xs[i] - mx;
    const dy = ys[i] - my;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  if (sxx === 0 || syy === 0) return Number.NaN;
  return sxy / Math.sqrt(sxx * syy);
}
