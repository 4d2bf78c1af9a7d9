/**
 * Explained variance per turn, and the summary statistics of the critic-fit gate
 * (bench/critic-gate.ts).
 *
 * Why per turn: a value's pooled explained variance over every turn credits a critic for knowing
 * the turn index, since returns differ by turn (a sparse return is discounted by γ^(H−1−t)); on the
 * relay a per-turn constant alone scored 0.241 pooled. Within a turn the history is what there is
 * to read.
 */
import { explainedVariance } from '../src/buffer/targets.js';

/** Rows of predictions against targets, each at a turn. */
export interface TurnRows {
  readonly turns: readonly number[];
  readonly targets: readonly number[];
  readonly predictions: readonly number[];
}

function byTurn(rows: TurnRows): Map<number, number[]> {
  const out = new Map<number, number[]>();
  rows.turns.forEach((t, j) => out.set(t, [...(out.get(t) ?? []), j]));
  return new Map([...out].sort((a, b) => a[0] - b[0]));
}

/** 1 − Var_t(y − V)/Var_t(y) of each turn t, in turn order (NaN for a turn whose targets do not vary). */
export function perTurnExplainedVariance(rows: TurnRows): Map<number, number> {
  const out = new Map<number, number>();
  for (const [t, idx] of byTurn(rows)) out.set(t, explainedVariance(idx.map((j) => rows.predictions[j]), idx.map((j) => rows.targets[j])));
  return out;
}

/**
 * The gate's figure: explained variance within turns, pooled over the turns t ≥ `fromTurn`,
 * 1 − Σ_t n_t·Var_t(y − V) / Σ_t n_t·Var_t(y). Each turn's mean is removed from the targets and
 * from the errors before pooling, so a per-turn constant scores exactly 0 and only what the critic
 * reads within a turn counts. Pooled sums rather than the mean of the per-turn figures: that mean
 * lets a turn whose targets barely vary (where a small error is a large fraction) outweigh the
 * rest; the pooled figure weighs each turn by the variance there is to explain. NaN when no
 * target varies.
 */
export function withinTurnExplainedVariance(rows: TurnRows, fromTurn = 1): number {
  let residual = 0;
  let total = 0;
  for (const [t, idx] of byTurn(rows)) {
    if (t < fromTurn) continue;
    const y = idx.map((j) => rows.targets[j]);
    const e = idx.map((j) => rows.targets[j] - rows.predictions[j]);
    total += sumSquaredDeviations(y);
    residual += sumSquaredDeviations(e);
  }
  return total === 0 ? Number.NaN : 1 - residual / total;
}

function sumSquaredDeviations(xs: readonly number[]): number {
  const m = xs.reduce((a, b) => a + b, 0) / xs.length;
  return xs.reduce((a, x) => a + (x - m) ** 2, 0);
}

/** The mean of figures with its standard error (sample SD / √n) and range. */
export interface Spread {
  readonly n: number;
  readonly mean: number;
  /** 0 for one figure. */
  readonly se: number;
  readonly min: number;
  readonly max: number;
}

/** {@link Spread} of `xs` (at least one). */
export function spreadOf(xs: readonly number[]): Spread {
  if (xs.length === 0) throw new Error('spreadOf: no values');
  const n = xs.length;
  const mean = xs.reduce((a, b) => a + b, 0) / n;
  const sd = n > 1 ? Math.sqrt(xs.reduce((a, x) => a + (x - mean) ** 2, 0) / (n - 1)) : 0;
  return { n, mean, se: sd / Math.sqrt(n), min: Math.min(...xs), max: Math.max(...xs) };
}
