/**
 * MAGRPO's group-relative advantages (§2.3 of the reference): one group = the K completions one agent
 * sampled at one tree node, each with its (aggregated) return.
 */
import { mean as statsMean, stdPop, zScore as statsZScore } from '../../src/util/stats.js';

/** How the raw advantage is formed from a group's returns before the optional z-score. */
export type AdvantageMode = 'mean' | 'raw' | 'max' | 'rloo';

/** The advantage modes, in CoMLRL's order. */
export const ADVANTAGE_MODES = ['mean', 'raw', 'max', 'rloo'] as const;

/** Smallest std used by the z-score, so a near-constant group does not blow up. */
export const STD_FLOOR = 1e-6;

/** Population mean; 0 for an empty group (a baseline of no samples). One home: src/util/stats.ts. */
export function mean(values: readonly number[]): number {
  return statsMean(values, 0);
}

/** Population standard deviation (divides by n, as torch's `unbiased=False`); see src/util/stats.ts. */
export { stdPop };

/** (x − mean) / max(std_pop, floor). A constant group maps to zeros. */
export function zScore(values: readonly number[], floor = STD_FLOOR): number[] {
  return statsZScore(values, floor);
}

/**
 * Advantages of one group of returns R (length K):
 * - mean: R − mean(R); raw: R; max: R − max(R); rloo: (K·R − ΣR)/(K − 1), i.e. R minus the mean of
 *   the other K − 1 returns;
 * - then, if `normalize` and K > 1, the z-score of the result (population std, floor 1e-6).
 * With normalization on, all four modes give the same z-score of R (a known CoMLRL property).
 */
export function groupAdvantages(returns: readonly number[], mode: AdvantageMode, normalize: boolean): number[] {
  const k = returns.length;
  let adv: number[];
  switch (mode) {
    case 'mean': {
      const m = mean(returns);
      adv = returns.map((r) => r - m);
      break;
    }
    case 'raw':
      adv = [...returns];
      break;
    case 'max': {
      const mx = Math.max(...returns);
      adv = returns.map((r) => r - mx);
      break;
    }
    case 'rloo': {
      // A lone sample has no others to compare with: no signal.
      if (k < 2) return returns.map(() => 0);
      const sum = returns.reduce((a, b) => a + b, 0);
      adv = returns.map((r) => (k * r - sum) / (k - 1));
      break;
    }
  }
  return normalize && k > 1 ? zScore(adv) : adv;
}

/** True when every value equals the first (a group that yields no learning signal). */
export function hasZeroSpread(values: readonly number[]): boolean {
  return values.every((v) => v === values[0]);
}
