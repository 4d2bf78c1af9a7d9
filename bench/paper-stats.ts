/**
 * Statistics of the paper bench (bench/paper.ts): bootstrap intervals over seeds, the training
 * items at which every method is evaluated (equal fractions of its own budget), and the area under
 * a learning curve.
 */
import { createRng } from '../src/util/rng.js';
import { mean } from '../src/util/stats.js';

/** A mean with its bootstrap interval. */
export interface Interval {
  readonly mean: number;
  readonly lo: number;
  readonly hi: number;
}

/**
 * Mean of `xs` and its percentile-bootstrap 95% interval: `resamples` resamples of `xs` with
 * replacement (a seeded stream, so the figures repeat), the 2.5th and 97.5th percentiles of their
 * means. One value gives a zero-width interval.
 */
export function bootstrapMean(xs: readonly number[], resamples = 2000, seed = 'paper-bootstrap'): Interval {
  if (xs.length === 0) throw new Error('bootstrapMean: no values');
  const rng = createRng(seed);
  const means: number[] = [];
  for (let r = 0; r < resamples; r++) {
    let s = 0;
    for (let i = 0; i < xs.length; i++) s += xs[rng.int(xs.length)];
    means.push(s / xs.length);
  }
  means.sort((a, b) => a - b);
  return { mean: mean(xs), lo: means[Math.floor(0.025 * resamples)], hi: means[Math.ceil(0.975 * resamples) - 1] };
}

/**
 * The training items after which a method with `items` items in all is evaluated: the item counts
 * nearest to the fractions 0, 1/s, …, 1 of its budget (s = `segments`), so methods with different
 * costs per item are compared at the same fractions of their budgets.
 */
export function evalItems(items: number, segments: number): number[] {
  if (!Number.isInteger(items) || items < 1) throw new Error(`evalItems: items must be a positive integer, got ${items}`);
  if (!Number.isInteger(segments) || segments < 1) throw new Error(`evalItems: segments must be a positive integer, got ${segments}`);
  return Array.from({ length: segments + 1 }, (_, i) => Math.round((i * items) / segments));
}

/** Area under a learning curve sampled at equal fractions of the budget, normalised to [0, 1] on x (trapezoids). */
export function curveArea(curve: readonly number[]): number {
  if (curve.length < 2) return curve[0] ?? 0;
  let s = 0;
  for (let i = 1; i < curve.length; i++) s += (curve[i - 1] + curve[i]) / 2;
  return s / (curve.length - 1);
}

/** ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms: ~1e-15 relative). */
function logGamma(x: number): number {
  const c = [0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7];
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  const z = x - 1;
  let a = c[0];
  const t = z + 7.5;
  for (let i = 1; i < 9; i++) a += c[i] / (z + i);
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(a);
}

/** The continued fraction of the regularized incomplete beta function (modified Lentz), valid for x < (a+1)/(a+b+2). */
function betaFraction(x: number, a: number, b: number): number {
  const tiny = 1e-300;
  let c = 1;
  let d = 1 - ((a + b) * x) / (a + 1);
  d = 1 / (Math.abs(d) < tiny ? tiny : d);
  let h = d;
  for (let m = 1; m <= 300; m++) {
    for (const num of [(m * (b - m) * x) / ((a + 2 * m - 1) * (a + 2 * m)), (-(a + m) * (a + b + m) * x) / ((a + 2 * m) * (a + 2 * m + 1))]) {
      d = 1 + num * d;
      d = 1 / (Math.abs(d) < tiny ? tiny : d);
      c = 1 + num / c;
      if (Math.abs(c) < tiny) c = tiny;
      h *= d * c;
    }
    if (Math.abs(d * c - 1) < 1e-15) break;
  }
  return h;
}

/** The regularized incomplete beta function I_x(a, b). */
function incompleteBeta(x: number, a: number, b: number): number {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const front = Math.exp(logGamma(a + b) - logGamma(a) - logGamma(b) + a * Math.log(x) + b * Math.log(1 - x));
  return x < (a + 1) / (a + b + 2) ? (front * betaFraction(x, a, b)) / a : 1 - (front * betaFraction(1 - x, b, a)) / b;
}

/** P(T ≤ t) for Student's t with `df` degrees of freedom. */
export function studentTCdf(t: number, df: number): number {
  const tail = 0.5 * incompleteBeta(df / (df + t * t), df / 2, 0.5);
  return t >= 0 ? 1 - tail : tail;
}

/** The `p` quantile of Student's t with `df` degrees of freedom (bisection on the CDF, to 1e-10). */
export function studentTQuantile(p: number, df: number): number {
  if (!(p > 0 && p < 1)) throw new Error(`studentTQuantile: p must be in (0, 1), got ${p}`);
  if (!(df > 0)) throw new Error(`studentTQuantile: df must be positive, got ${df}`);
  let lo = -1e4;
  let hi = 1e4;
  while (hi - lo > 1e-10) {
    const mid = (lo + hi) / 2;
    if (studentTCdf(mid, df) < p) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/** A mean of paired differences with its Student-t 95% interval over `n` pairs. */
export interface PairedInterval extends Interval {
  readonly n: number;
}

/**
 * The mean of the paired differences a_s − b_s over the seeds both maps hold, and its two-sided
 * Student-t 95% interval (mean ± t₀.₉₇₅,ₙ₋₁ · sd/√n). Null with fewer than 2 pairs (no interval).
 */
export function pairedTInterval(a: ReadonlyMap<number, number>, b: ReadonlyMap<number, number>): PairedInterval | null {
  const d = [...a.keys()].filter((s) => b.has(s)).map((s) => (a.get(s) as number) - (b.get(s) as number));
  const n = d.length;
  if (n < 2) return null;
  const m = mean(d);
  const sd = Math.sqrt(d.reduce((s, x) => s + (x - m) ** 2, 0) / (n - 1));
  const half = studentTQuantile(0.975, n - 1) * (sd / Math.sqrt(n));
  return { mean: m, lo: m - half, hi: m + half, n };
}
