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
