/**
 * Episodes of the hidden-cue relay (envs/hidden-cue/relay.ts) played by a fixed behaviour policy,
 * as the critic reads them: the paper bench pretrains its critics on their text (next-token
 * prediction, bench/critic-pretrain.ts). No model is involved: the words are drawn directly. (The
 * critic-fit gate plays the run's own actors instead, bench/actor-episodes.ts.)
 *
 * Behaviour policy, per agent and turn: with probability 0.6 it answers its own cue, in the agreed
 * slot with probability 0.8 once a slot is agreed (else either slot); otherwise one of the 9 words
 * uniformly. It earns roughly half the maximum, so returns vary in every turn.
 */
import { centralizedCriticText, decentralizedCriticText, type JointHistoryTurn } from '../src/critic/inputs.js';
import type { GlobalInfo } from '../src/decpomdp/types.js';
import type { Rng } from '../src/util/rng.js';
import { hiddenCueAnswers, hiddenCueWords } from '../envs/hidden-cue/index.js';
import type { HiddenCueRelayEnv, RelayState, RelayTask } from '../envs/hidden-cue/relay.js';

/** One turn of a played episode. */
export interface RelayTurn {
  readonly state: RelayState;
  readonly observations: readonly string[];
  readonly globalInfo: GlobalInfo;
  readonly actions: readonly string[];
  readonly reward: number;
}

/** A word of the behaviour policy (module comment). */
export function behaviourWord(rng: Rng, state: RelayState, agent: number): string {
  if (rng.next() < 0.6) {
    const answers = hiddenCueAnswers[state.task.cues[state.turn][agent]];
    const slot = state.agreed !== null && rng.next() < 0.8 ? state.agreed : rng.int(2);
    return answers[slot];
  }
  return hiddenCueWords[rng.int(hiddenCueWords.length)];
}

/** Plays the rest of an episode from `state` with the behaviour policy. */
export async function playRelay(env: HiddenCueRelayEnv, state: RelayState, rng: Rng): Promise<RelayTurn[]> {
  const turns: RelayTurn[] = [];
  let s = state;
  while (!s.done) {
    const observations = [env.observe(s, 0), env.observe(s, 1)];
    const actions = [behaviourWord(rng, s, 0), behaviourWord(rng, s, 1)];
    const r = await env.step(s, actions);
    turns.push({ state: s, observations, globalInfo: env.globalInfo(s), actions, reward: r.reward });
    s = r.next;
  }
  return turns;
}

/** Discounted return from each turn: G_t = r_t + γ·G_{t+1}. */
export function returnsOf(rewards: readonly number[], gamma: number): number[] {
  const out = new Array<number>(rewards.length);
  let g = 0;
  for (let t = rewards.length - 1; t >= 0; t--) out[t] = g = rewards[t] + gamma * g;
  return out;
}

/** The centralized critic's text at turn `t` of an episode (joint history, m_t), as CoLLM-CC builds it. */
export function ccCriticText(turns: readonly RelayTurn[], t: number): string {
  const history: JointHistoryTurn[] = turns.slice(0, t).map((k) => ({ observations: k.observations, actions: k.actions }));
  return centralizedCriticText({ observations: turns[t].observations, globalInfo: turns[t].globalInfo, history });
}

/** Agent `agent`'s decentralized critic text at turn `t` (its own history, m_t), as CoLLM-DC builds it. */
export function dcCriticText(turns: readonly RelayTurn[], t: number, agent: number): string {
  const history = turns.slice(0, t).map((k) => ({ observation: k.observations[agent], action: k.actions[agent] }));
  return decentralizedCriticText({ prompt: turns[t].observations[agent], globalInfo: turns[t].globalInfo, history });
}

/** A task drawn from `tasks` and a full behaviour episode on it. */
export async function randomEpisode(env: HiddenCueRelayEnv, tasks: readonly RelayTask[], rng: Rng): Promise<RelayTurn[]> {
  return playRelay(env, env.initialState(tasks[rng.int(tasks.length)]), rng);
}
