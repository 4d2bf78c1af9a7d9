import type { AgentHistory, JointHistory } from './types.js';

/**
 * Immutable updates of per-agent and joint histories. Every helper returns a new value and never
 * touches its input, so a rollout tree can share a parent's history between its children.
 */

/** h_{i,0} before the first observation. */
export function emptyAgentHistory(): AgentHistory {
  return { observations: [], actions: [] };
}

/** A joint history for `numAgents` agents with no turns yet. */
export function emptyJointHistory(numAgents: number): JointHistory {
  return { agents: Array.from({ length: numAgents }, emptyAgentHistory), rewards: [] };
}

/** Adds o_{i,t}: the history now ends with an observation awaiting its action. */
export function appendObservation(history: AgentHistory, observation: string): AgentHistory {
  if (history.observations.length !== history.actions.length) {
    throw new Error(
      `appendObservation: the history already ends with an observation (${history.observations.length} observations, ${history.actions.length} actions)`,
    );
  }
  return { observations: [...history.observations, observation], actions: [...history.actions] };
}

/** Adds a_{i,t} after the pending observation. */
export function appendAction(history: AgentHistory, action: string): AgentHistory {
  if (history.observations.length !== history.actions.length + 1) {
    throw new Error(
      `appendAction: no pending observation (${history.observations.length} observations, ${history.actions.length} actions)`,
    );
  }
  return { observations: [...history.observations], actions: [...history.actions, action] };
}

/** Adds a whole turn (o_{i,t}, a_{i,t}) to a history that has no pending observation. */
export function appendTurn(history: AgentHistory, observation: string, action: string): AgentHistory {
  return appendAction(appendObservation(history, observation), action);
}

/**
 * Adds one joint turn: each agent's action (after its pending observation, or with the given
 * observation when `observations` is passed) and the joint reward.
 */
export function appendJointTurn(
  history: JointHistory,
  actions: readonly string[],
  reward: number,
  observations?: readonly string[],
): JointHistory {
  if (actions.length !== history.agents.length) {
    throw new Error(`appendJointTurn: ${actions.length} actions for ${history.agents.length} agents`);
  }
  if (observations !== undefined && observations.length !== history.agents.length) {
    throw new Error(`appendJointTurn: ${observations.length} observations for ${history.agents.length} agents`);
  }
  const agents = history.agents.map((h, i) =>
    observations === undefined ? appendAction(h, actions[i]) : appendTurn(h, observations[i], actions[i]),
  );
  return { agents, rewards: [...history.rewards, reward] };
}

/** Adds o_{i,t+1} for every agent (the observations that follow a joint step). */
export function appendJointObservations(history: JointHistory, observations: readonly string[]): JointHistory {
  if (observations.length !== history.agents.length) {
    throw new Error(`appendJointObservations: ${observations.length} observations for ${history.agents.length} agents`);
  }
  return { agents: history.agents.map((h, i) => appendObservation(h, observations[i])), rewards: [...history.rewards] };
}
