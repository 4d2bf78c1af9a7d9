/**
 * The environment's side of a rollout, shared by every trainer: joint actions taken from one state.
 * A staged environment (src/decpomdp/staged.ts) pays its rewards first, so the (possibly costly:
 * sandbox runs, expert feedback) transitions run only for the joint actions whose episode goes on.
 */
import { isStaged } from '../../src/decpomdp/staged.js';
import type { LLMDecPOMDP } from '../../src/decpomdp/types.js';
import type { PhaseTimer } from './metrics.js';

/** What one joint action led to; `next` is null where a staged environment's transition was skipped (`done` is then true). */
export interface RolloutStep<S> {
  readonly reward: number;
  readonly next: S | null;
  readonly done: boolean;
  readonly info: Record<string, unknown>;
}

/**
 * Takes every joint action of `actions` from `state`, together (rewards timed as `reward`, staged
 * transitions as `transition`). `goesOn(rewards)` says, per joint action, whether its episode
 * continues: with a staged environment only those get a transition. `check` sees every reward
 * first (it throws on a non-finite one).
 */
export async function takeJointActions<T, S>(
  env: LLMDecPOMDP<T, S>,
  state: S,
  actions: readonly (readonly string[])[],
  goesOn: (rewards: readonly number[]) => readonly boolean[],
  check: (reward: number) => void,
  timer: PhaseTimer,
): Promise<RolloutStep<S>[]> {
  if (!isStaged(env)) {
    const steps = await timer.time('reward', () => Promise.all(actions.map((a) => env.step(state, a))));
    for (const s of steps) check(s.reward);
    return steps;
  }
  const joint = await timer.time('reward', () => Promise.all(actions.map((a) => env.rewardOf(state, a))));
  const rewards = joint.map((r) => r.reward);
  for (const r of rewards) check(r);
  const keep = goesOn(rewards);
  const ended = (j: number): RolloutStep<S> => ({ reward: rewards[j], next: null, done: true, info: { ...(joint[j].info ?? {}) } });
  if (!keep.some(Boolean)) return actions.map((_, j) => ended(j));
  return timer.time('transition', () => Promise.all(actions.map((a, j) => (keep[j] ? env.transition(state, a, joint[j]) : ended(j)))));
}
