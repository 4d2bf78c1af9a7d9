import type { AgentHistory, JointHistory, LLMDecPOMDP, StepResult } from './types.js';

/**
 * Steps several states at once (one joint action each). Rewards such as CoopHE's run in a
 * process pool, so issuing the steps together lets them overlap; results keep the input order.
 */
export async function stepMany<T, S>(
  env: LLMDecPOMDP<T, S>,
  states: readonly S[],
  jointActions: readonly (readonly string[])[],
): Promise<StepResult<S>[]> {
  if (states.length !== jointActions.length) {
    throw new Error(`stepMany: ${states.length} states but ${jointActions.length} joint actions`);
  }
  return Promise.all(states.map((s, i) => env.step(s, jointActions[i])));
}

/** A joint policy for {@link runEpisode}: the N observations of a turn → N actions. */
export type JointPolicy<S> = (observations: readonly string[], state: S, turn: number) => readonly string[] | Promise<readonly string[]>;

/** What {@link runEpisode} returns. */
export interface Episode<S> {
  /** Per-agent histories (o_0, a_0, …) and the rewards r_0 … r_{T-1}. */
  history: JointHistory;
  /** s_0 … s_T (the last is terminal). */
  states: S[];
  /** The step results in order. */
  steps: StepResult<S>[];
  /** Undiscounted sum of rewards. */
  totalReward: number;
}

/** Plays one episode of `task` to termination (horizon or early stop) with a scripted or model policy. */
export async function runEpisode<T, S>(env: LLMDecPOMDP<T, S>, task: T, policy: JointPolicy<S>): Promise<Episode<S>> {
  let state = env.initialState(task);
  const states: S[] = [state];
  const steps: StepResult<S>[] = [];
  const agents: AgentHistory[] = Array.from({ length: env.numAgents }, () => ({ observations: [], actions: [] }));
  const rewards: number[] = [];
  for (let turn = 0; turn < env.horizon; turn++) {
    const observations = Array.from({ length: env.numAgents }, (_, i) => env.observe(state, i));
    const actions = await policy(observations, state, turn);
    if (actions.length !== env.numAgents) {
      throw new Error(`runEpisode: the policy returned ${actions.length} actions for ${env.numAgents} agents`);
    }
    const result = await env.step(state, actions);
    agents.forEach((h, i) => {
      h.observations.push(observations[i]);
      h.actions.push(actions[i]);
    });
    rewards.push(result.reward);
    steps.push(result);
    states.push(result.next);
    state = result.next;
    if (result.done) break;
  }
  return { history: { agents, rewards }, states, steps, totalReward: rewards.reduce((a, b) => a + b, 0) };
}
