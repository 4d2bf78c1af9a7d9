/**
 * MADPO's pure pieces: which (winner, loser) pairs a prompt's joint candidates make, and the DPO
 * loss factorised over agents with the weights each agent's update gives its own completions.
 *
 * For a pair p with winner joint candidate w and loser l, agent i's log-ratio margin is
 *   Δ_{p,i} = (log π_i(y_{w,i}) − log π_ref,i(y_{w,i})) − (log π_i(y_{l,i}) − log π_ref,i(y_{l,i})),
 * log-probs summed over the completion's tokens. The joint policy factorises over the agents, so
 * the pair's implicit reward margin is z_p = β Σ_i Δ_{p,i} and its loss −log σ(z_p); a minibatch's
 * loss is the mean over its P pairs. Agent i differentiates it through its own log-probs only (the
 * other agents' Δ enter as constants):
 *   ∂L/∂log π_i(y_{w,i}) = −β σ(−z_p) / P,   ∂L/∂log π_i(y_{l,i}) = +β σ(−z_p) / P.
 * So agent i's gradient at the current weights is that of the linear loss
 *   −Σ_p (β σ(−z_p)/P) · (log π_i(y_{w,i}) − log π_i(y_{l,i})),
 * with z_p evaluated (tape-free) at those weights: the policy-gradient step's rows with weights
 * +β σ(−z_p)/P (winner) and −β σ(−z_p)/P (loser).
 */
import type { Rng } from '../../src/util/rng.js';
import type { PolicyGradientRow } from '../core/loss.js';
import type { PairSelection } from './config.js';

/** A chosen pair: indices of the winner and loser joint candidates and their reward gap (> 0). */
export interface CandidatePair {
  readonly winner: number;
  readonly loser: number;
  readonly gap: number;
}

/**
 * The pairs of a prompt's joint candidates (CoMLRL's selection): every ordered (i, j) with
 * reward_i > reward_j — equal rewards make no pair — enumerated i-major; then
 * - 'reward_gap': sorted by gap, largest first (stable: ties keep the enumeration order),
 * - 'all': in enumeration order,
 * - 'random': shuffled with `rng`;
 * and, except under 'all' (which keeps every pair, as CoMLRL), cut to the first `limit` (null: all of them).
 */
export function selectPreferencePairs(rewards: readonly number[], mode: PairSelection, limit: number | null, rng: Rng): CandidatePair[] {
  const pairs: CandidatePair[] = [];
  for (let i = 0; i < rewards.length; i++) {
    for (let j = 0; j < rewards.length; j++) {
      const gap = rewards[i] - rewards[j];
      if (i !== j && gap > 0) pairs.push({ winner: i, loser: j, gap });
    }
  }
  // Nothing to choose from: the random stream is left untouched, as CoMLRL returns before shuffling.
  if (pairs.length === 0) return [];
  if (mode === 'reward_gap') pairs.sort((a, b) => b.gap - a.gap);
  else if (mode === 'random') rng.shuffle(pairs);
  return limit === null || mode === 'all' ? pairs : pairs.slice(0, limit);
}

/**
 * The completion tokens MADPO scores: all of them (`score_last_token`, comlrl), or CoMLRL's: the
 * completion cut at its first `padId` (where CoMLRL's padded row ends; an EOS when the tokenizer
 * pads with it), without its last remaining token. May be empty (then it scores 0).
 */
export function scoredCompletionIds(ids: readonly number[], padId: number, scoreLastToken: boolean): number[] {
  if (scoreLastToken) return [...ids];
  const pad = ids.indexOf(padId);
  const kept = pad < 0 ? ids : ids.slice(0, pad);
  return kept.slice(0, Math.max(0, kept.length - 1));
}

/**
 * One training pair of an item, JSON-able (it is buffered and checkpointed): per agent the prompt,
 * the winner's and loser's completion ids and their reference log-probs (summed over tokens,
 * computed once at rollout: the reference is frozen).
 */
export interface PreferencePair {
  /** promptIds[i]: agent i's prompt. */
  readonly promptIds: number[][];
  /** The scored tokens of agent i's winner / loser completion (see {@link scoredCompletionIds}). */
  readonly winnerIds: number[][];
  readonly loserIds: number[][];
  /** Σ_t log π_ref,i of agent i's winner / loser completion. */
  readonly refWinner: number[];
  readonly refLoser: number[];
  readonly winnerReward: number;
  readonly loserReward: number;
  /** Mean reward of the item's K joint candidates. */
  readonly candidateRewardMean: number;
}

/** The current policies' log-probs of a pair (per agent, summed over tokens; tape-free). */
export interface PairLogProbs {
  readonly winner: readonly number[];
  readonly loser: readonly number[];
}

/** Δ_{p,i} for every agent of one pair (see the module comment). */
export function agentMargins(pair: PreferencePair, logProbs: PairLogProbs): number[] {
  return logProbs.winner.map((w, i) => w - pair.refWinner[i] - (logProbs.loser[i] - pair.refLoser[i]));
}

/** −log σ(z) = log(1 + e^{−z}), stable for large |z|. */
export function negLogSigmoid(z: number): number {
  return z >= 0 ? Math.log1p(Math.exp(-z)) : -z + Math.log1p(Math.exp(z));
}

/** σ(x), stable for large |x|. */
export function sigmoid(x: number): number {
  if (x >= 0) return 1 / (1 + Math.exp(-x));
  const e = Math.exp(x);
  return e / (1 + e);
}

/** What a minibatch's DPO loss comes to, from the agents' margins `margins[p][i]`. */
export interface DpoStats {
  /** mean_p −log σ(z_p). */
  readonly loss: number;
  /** z_p = β Σ_i Δ_{p,i}: each pair's implicit reward margin. */
  readonly z: number[];
  /** Fraction of pairs whose implicit rewards rank the winner first (z_p > 0). */
  readonly accuracy: number;
}

/** The joint DPO loss of a minibatch (see the module comment). */
export function dpoStats(margins: readonly (readonly number[])[], beta: number): DpoStats {
  const z = margins.map((row) => beta * row.reduce((a, b) => a + b, 0));
  const n = Math.max(z.length, 1);
  return { loss: z.reduce((s, v) => s + negLogSigmoid(v), 0) / n, z, accuracy: z.filter((v) => v > 0).length / n };
}

/**
 * Agent `agent`'s policy-gradient rows of a minibatch: its winner completion with weight
 * β σ(−z_p)/P and its loser with −β σ(−z_p)/P, so that the step's gradient is that of the joint DPO
 * loss through this agent's log-probs alone (see the module comment).
 */
export function agentDpoRows(pairs: readonly PreferencePair[], z: readonly number[], agent: number, beta: number): PolicyGradientRow[] {
  return pairs.flatMap((pair, p) => {
    const w = (beta * sigmoid(-z[p])) / pairs.length;
    // A completion with no scored token (score_last_token: false on a one-token completion) adds nothing.
    return [
      { promptIds: pair.promptIds[agent], completionIds: pair.winnerIds[agent], coef: w },
      { promptIds: pair.promptIds[agent], completionIds: pair.loserIds[agent], coef: -w },
    ].filter((row) => row.completionIds.length > 0);
  });
}
