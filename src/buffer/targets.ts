/**
 * Targets and advantages for actor-critic (CoLLM-DC / CoLLM-CC, CoMLRL 1.3.6 §3.2–3.4).
 *
 * Along one agent's trajectory t = 0..L-1 with rewards r_t and the values V_t stored at rollout:
 *   y_t = r_t + γ·V_{t+1}   for t < L-1
 *   y_t = r_t               for the last step (end of horizon or early termination: no bootstrap)
 *   δ_t = y_t − V_t         (the advantage before normalization; no GAE, no λ)
 * That is the paper's and CoMLRL's one-step TD target (`td`). comlrl also offers longer targets
 * (config `critic_target`; {@link segmentTargets}): Monte-Carlo, n-step and TD(λ) returns, whose
 * advantage y_t − V_t is, for λ, the GAE sum Σ_k (γλ)^k δ_{t+k}.
 * The discounted Monte-Carlo return G_t = Σ_k γ^k r_{t+k} is kept for logging.
 */
import { isConstant, zScore } from '../util/stats.js';

/** The critic target families of config `critic_target` (`td`: the paper's Eq. 5). */
export const CRITIC_TARGETS = ['td', 'mc', 'nstep', 'lambda'] as const;

/**
 * What a critic regresses on, and what the actor's δ is measured against:
 * - `td`: y_t = r_t + γ·V(h_{t+1}) (the paper's Eq. 5, CoMLRL);
 * - `mc`: y_t = Σ_k γ^k r_{t+k} to the episode's end (TD(λ) with λ = 1);
 * - `nstep`: y_t = Σ_{k<n} γ^k r_{t+k} + γ^n·V(h_{t+n}), the sum stopping at the episode's end;
 * - `lambda`: the TD(λ) return y_t = r_t + γ·[(1 − λ)·V(h_{t+1}) + λ·y_{t+1}].
 */
export type CriticTarget = { readonly kind: 'td' } | { readonly kind: 'mc' } | { readonly kind: 'nstep'; readonly n: number } | { readonly kind: 'lambda'; readonly lambda: number };

/**
 * Consecutive stored steps of one episode, in turn order: the whole episode, or the part a buffer
 * flush holds when the flush cut it.
 */
export interface TrajectorySegment {
  /** r_t of each step. */
  readonly rewards: readonly number[];
  /** V(h_t) (or Q(h_t, a_t)) of each step. */
  readonly values: readonly number[];
  /**
   * The critic's value of the state after the last step, V(h_L), where the segment was cut before
   * the episode's end; null where the episode ended with its last step (horizon, done, early
   * termination): nothing follows, so nothing is bootstrapped.
   */
  readonly bootstrap: number | null;
}

/**
 * The targets y_t of one segment under `target` with discount `gamma` (see {@link CriticTarget}).
 * Every return that would run past the segment stops there and adds γ^k·`bootstrap` (0 when the
 * episode ended): `mc` over a cut segment is the λ = 1 return bootstrapped at the cut.
 */
export function segmentTargets(segment: TrajectorySegment, target: CriticTarget, gamma: number): number[] {
  const { rewards, values, bootstrap } = segment;
  if (rewards.length !== values.length) throw new Error(`segmentTargets: ${rewards.length} rewards but ${values.length} values`);
  const n = rewards.length;
  const end = bootstrap ?? 0;
  // V(h_t) for t = 0..L, with V(h_L) the bootstrap (0 after the episode's end).
  const valueAt = (t: number) => (t < n ? values[t] : end);
  switch (target.kind) {
    case 'td':
      return bootstrap === null ? tdTargets(rewards, values, gamma) : rewards.map((r, t) => r + gamma * valueAt(t + 1));
    case 'mc':
      return backward(rewards, end, (r, _t, later) => r + gamma * later);
    case 'lambda': {
      const { lambda } = target;
      if (!(lambda >= 0 && lambda <= 1)) throw new Error(`segmentTargets: λ must be in [0, 1] (got ${lambda})`);
      return backward(rewards, end, (r, t, later) => r + gamma * ((1 - lambda) * valueAt(t + 1) + lambda * later));
    }
    case 'nstep': {
      const steps = target.n;
      if (!Number.isInteger(steps) || steps < 1) throw new Error(`segmentTargets: n must be an integer >= 1 (got ${steps})`);
      return rewards.map((_, t) => {
        const m = Math.min(steps, n - t);
        let y = 0;
        let scale = 1;
        for (let k = 0; k < m; k++) {
          y += scale * rewards[t + k];
          scale *= gamma;
        }
        return y + scale * valueAt(t + m);
      });
    }
  }
}

/** y_t = step(r_t, t, y_{t+1}) from the last step back, with y_L = `last`. */
function backward(rewards: readonly number[], last: number, step: (r: number, t: number, later: number) => number): number[] {
  const out = new Array<number>(rewards.length);
  let later = last;
  for (let t = rewards.length - 1; t >= 0; t--) {
    later = step(rewards[t], t, later);
    out[t] = later;
  }
  return out;
}

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
 * variances). 1 is perfect, 0 is no better than a constant; NaN when the targets do not vary (or
 * there are none).
 */
export function explainedVariance(predictions: readonly number[], targets: readonly number[]): number {
  if (predictions.length !== targets.length || targets.length === 0) return Number.NaN;
  const n = targets.length;
  // Constant targets (up to rounding: their computed variance can be noise, not 0) explain nothing.
  if (isConstant(targets)) return Number.NaN;
  const my = targets.reduce((a, b) => a + b, 0) / n;
  const vy = targets.reduce((a, b) => a + (b - my) ** 2, 0) / n;
  if (vy === 0) return Number.NaN;
  const res = targets.map((y, i) => y - predictions[i]);
  const mr = res.reduce((a, b) => a + b, 0) / n;
  const vr = res.reduce((a, b) => a + (b - mr) ** 2, 0) / n;
  return 1 - vr / vy;
}
