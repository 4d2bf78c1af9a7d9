/**
 * Per-flush diagnostics of each critic that say whether it predicts the return, not only its own
 * target: a critic trained on one-step TD targets can score well against them (they are built
 * from its own values) while it knows nothing of a sparse reward that comes turns later.
 *
 * Per critic slot, per turn t (`…/turn_{t+1}`, as CoLLM's 1-based turn names) and pooled over
 * the flush (no turn suffix), from the critic's estimates at the flush's start:
 * - `ev_mc`: explained variance of V(h_t) for the Monte-Carlo return G_t;
 * - `ev_target`: explained variance of V(h_t) for its training target y_t (`critic_target`);
 * - `delta_reward_corr`: Pearson correlation of δ_t (the advantage before normalization) with the
 *   turn's own reward r_t — where δ carries no more than the turn's reward, the critic adds
 *   nothing to the actor's credit.
 *
 * Names: the centralized critic's under `critic/` (`critic/ev_mc/turn_2`, `critic/ev_mc`), as its
 * `critic/value_loss`; a critic an agent owns (CoLLM-DC) under `agent_i/critic_` (`agent_0/critic_ev_mc/turn_2`),
 * as its `agent_i/critic_grad_norm`. A value that is undefined (fewer than 2 rows, or a constant
 * return, target, δ or reward) is left out, never NaN.
 */
import type { JointTransition } from '../../src/buffer/replay.js';
import { explainedVariance } from '../../src/buffer/targets.js';
import { pearsonCorrelation } from '../../src/util/stats.js';
import { agentKey, type MetricRecord } from '../core/metrics.js';
import type { CriticEstimates } from './run.js';

/** The diagnostics' names (see the module comment). */
export const CRITIC_DIAGNOSTICS = ['ev_mc', 'ev_target', 'delta_reward_corr'] as const;

/** The metric name of diagnostic `name` of a critic owned by `owner` (null: the centralized critic), pooled or at a 0-based turn. */
export function criticDiagnosticKey(owner: number | null, name: (typeof CRITIC_DIAGNOSTICS)[number], turn: number | null = null): string {
  const base = owner === null ? `critic/${name}` : agentKey(owner, `critic_${name}`);
  return turn === null ? base : `${base}/turn_${turn + 1}`;
}

/**
 * The diagnostics of one critic over a flush. `estimates` are its values, targets and raw
 * advantages at the flush's start, index-aligned with `transitions`. G_t is each transition's
 * stored `return`: the discounted return of its whole episode from turn t, computed when the
 * episode was played, so for an episode the buffer cut it still counts the rewards after the cut
 * (which a flush of the cut part alone does not hold).
 */
export function criticDiagnostics(transitions: readonly JointTransition[], estimates: CriticEstimates, owner: number | null): MetricRecord {
  const out: MetricRecord = {};
  const put = (key: string, x: number) => {
    if (Number.isFinite(x)) out[key] = x;
  };
  const measure = (idx: readonly number[], turn: number | null) => {
    const values = idx.map((j) => estimates.values[j]);
    put(criticDiagnosticKey(owner, 'ev_mc', turn), explainedVariance(values, idx.map((j) => returnOf(transitions[j]))));
    put(criticDiagnosticKey(owner, 'ev_target', turn), explainedVariance(values, idx.map((j) => estimates.targets[j])));
    put(
      criticDiagnosticKey(owner, 'delta_reward_corr', turn),
      pearsonCorrelation(
        idx.map((j) => estimates.advantagesRaw[j]),
        idx.map((j) => transitions[j].reward),
      ),
    );
  };
  const turns = [...new Set(transitions.map((t) => t.turn))].sort((a, b) => a - b);
  for (const turn of turns) measure(transitions.flatMap((t, j) => (t.turn === turn ? [j] : [])), turn);
  measure(transitions.map((_, j) => j), null);
  return out;
}

/** G_t of a joint transition (the reward is joint, so every agent's stored return is the same). */
function returnOf(tr: JointTransition): number {
  const step = tr.agents[0];
  if (!step) throw new Error(`critic diagnostics: transition of episode ${tr.episode} turn ${tr.turn + 1} has no agents`);
  return step.return;
}
