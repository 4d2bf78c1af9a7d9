import type { LLMDecPOMDP, StepResult } from './types.js';

/** A joint reward before and after the reward processor. */
export interface JointReward {
  /** What the task's reward function returned. */
  raw: number;
  /** After the reward processor (scale/shift); this is r_t. */
  reward: number;
  /** Task details of the reward (breakdowns), merged into the step's info. */
  info?: Record<string, unknown>;
}

/**
 * An environment whose step splits into reward and transition, so a trainer that decides on
 * early termination over a group of siblings (MAGRPO) can skip costly feedback (sandbox runs,
 * expert calls) for nodes it will not expand. `step(s, a)` equals
 * `transition(s, a, await rewardOf(s, a))`.
 */
export interface StagedLLMDecPOMDP<T, S> extends LLMDecPOMDP<T, S> {
  rewardOf(state: S, jointAction: readonly string[]): Promise<JointReward>;
  transition(state: S, jointAction: readonly string[], reward: JointReward): Promise<StepResult<S>>;
}

/** Whether an environment offers {@link StagedLLMDecPOMDP}'s split step. */
export function isStaged<T, S>(env: LLMDecPOMDP<T, S>): env is StagedLLMDecPOMDP<T, S> {
  const e = env as Partial<StagedLLMDecPOMDP<T, S>>;
  return typeof e.rewardOf === 'function' && typeof e.transition === 'function';
}
