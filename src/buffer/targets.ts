/**
 * Targets and advantages for one-step actor-critic (CoLLM-DC / CoLLM-CC, CoMLRL 1.3.6 §3.2–3.4).
 *
 * Along one agent's trajectory t = 0..L-1 with rewards r_t and the values V_t stored at rollout:
 *   y_t = r_t + γ·V_{t+1}   for t < L-1
 *   y_t = r_t               for the last step (end of horizon or early termination: no bootstrap)
 *   δ_t = y_t − V_t         (the advantage before normalization; no GAE, no λ)
 * The discounted Monte-Carlo return G_t = Σ_k γ^k r_{t+k} is kept for logging only.
 */
import { zScore } from '../util/stats.js';

/** One-step TD targets y_t for a finished trajectory (see module comment). */
export function tdTargets(rewards: readonly number[], values: readonly number[], gamma: number): number[] {
  if (rewards.length !== values.length) {
    throw new Error(`tdTargets: ${rewards.length} rewards but ${values.length} values`);
  }
  const n = rewards.length;
  return rewards.map((r, t) => (t < n - 1 ? r + gamma * values[t + 1] : r));
}

/** Discounted returns G_t = r_t + γ·G_{t+1}, G_{L-1} = r_{L-1}. */
export function discountedReturns(rewards: readonly number[], gamma: number): number[] {
  const out = new Array<number>(rewards.length);
  let g = 0;
  for (let t = rewards.length - 1; t >= 0; t--) {
    g = rewards[t] + gamma * g;
    out[t] = g;
  }
  return out;
}

/** Smallest standard deviation used when z-scoring advantages (CoMLRL's floor). */
export const ADVANTAGE_STD_FLOOR = 1e-6;

/**
 * z-scores a group of advantages with the population std floored at 1e-6; a group of one is
 * returned unchanged (CoMLRL normalizes only groups of more than one sample).
 */
export function normalizeAdvantages(adv: readonly number[]): number[] {
  return adv.length <= 1 ? [...adv] : zScore(adv, ADVANTAGE_STD_FLOOR);
}

/**
 * Explained variance 1 − Var(y − v)/Var(y) of predictions `v` for targets `y` (population
 * variances). 1 is perfect, 0 is no better than a constant; NaN when the targets do not vary.
 */
export function explainedVariance(predictions: readonly number[], targets: readonly number[]): number {
  if (predictions.length !== targets.length || targets.length === 0) return Number.NaN;
  const n = targets.length;
  const my = targets.reduce((a, b) => a + b, 0) / n;
  const vy = targets.reduce((a, b) => a + (b - my) ** 2, 0) / n;
  if (vy === 0) return Number.NaN;
  const res = targets.map((y, i) => y - predictions[i]);
  const mr = res.reduce((a, b) => a + b, 0) / n;
  const vr = res.reduce((a, b) => a + (b - mr) ** 2, 0) / n;
  return 1 - vr / vy;
}
