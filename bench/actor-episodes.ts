/**
 * Hidden-cue relay episodes (envs/hidden-cue/relay.ts) played by LLM actors, as the CoLLM trainers
 * play them (every agent samples one completion for its observation, the env takes the joint
 * action), but many episodes in lockstep: each turn, each agent samples for every unfinished
 * episode in one `generate` call. The critic-fit gate (bench/critic-fit.ts) plays its on-policy
 * histories and their continuations this way.
 */
import type { Agent } from '../src/decpomdp/agent.js';
import type { Rng } from '../src/util/rng.js';
import type { HiddenCueRelayEnv, RelayState } from '../envs/hidden-cue/relay.js';
import type { CriticView } from '../trainers/collm/critic-set.js';
import { encodePrompt, generateGroups, type CompletionGroup, type GenerationSettings } from '../trainers/core/generation.js';
import { discountedReturns } from '../src/buffer/targets.js';

/** One played turn: the joint step as the critics read it, and the joint reward. */
export interface ActorTurn {
  /** The state the turn was played from. */
  readonly state: RelayState;
  readonly view: CriticView;
  readonly reward: number;
}

/** Plays every episode from `starts` to its end with `agents`, in lockstep. Returns the turns played from each start. */
export async function playWithActors(env: HiddenCueRelayEnv, agents: readonly Agent[], starts: readonly RelayState[], settings: GenerationSettings, rng: Rng): Promise<ActorTurn[][]> {
  const played: ActorTurn[][] = starts.map(() => []);
  let live = starts.map((state, e) => ({ e, state })).filter((x) => !x.state.done);
  while (live.length > 0) {
    const observations = live.map((x) => agents.map((_, i) => env.observe(x.state, i)));
    const promptIds = live.map((_, j) => agents.map((a, i) => encodePrompt(a, observations[j][i])));
    const groups: CompletionGroup[][] = [];
    for (let i = 0; i < agents.length; i++) {
      groups.push(
        await generateGroups(
          agents[i],
          promptIds.map((p) => p[i]),
          1,
          settings,
          rng,
        ),
      );
    }
    const next: typeof live = [];
    for (let j = 0; j < live.length; j++) {
      const { e, state } = live[j];
      const actions = agents.map((_, i) => groups[i][j].texts[0]);
      const actionIds = agents.map((_, i) => groups[i][j].ids[0]);
      const r = await env.step(state, actions);
      const view: CriticView = { globalInfo: env.globalInfo(state), observations: observations[j], promptIds: (i) => promptIds[j][i], actions, actionIds };
      played[e].push({ state, view, reward: r.reward });
      if (!r.done) next.push({ e, state: r.next });
    }
    live = next;
  }
  return played;
}

/** A state's value estimate: the mean of its continuations' returns and that mean's sampling variance. */
export interface ValueEstimate {
  readonly value: number;
  /** Sample variance of the returns / count: the variance of `value` around the true value (0 for one continuation). */
  readonly noise: number;
}

/**
 * The value of each state in `states` under the actors, E[G | s] with G = Σ_k γ^k r_{t+k}: the mean
 * discounted return of `count` episodes played on from the state (all in lockstep).
 */
export async function continuationValues(
  env: HiddenCueRelayEnv,
  agents: readonly Agent[],
  states: readonly RelayState[],
  count: number,
  gamma: number,
  settings: GenerationSettings,
  rng: Rng,
): Promise<ValueEstimate[]> {
  const starts = states.flatMap((s) => Array.from({ length: count }, () => s));
  const played = await playWithActors(env, agents, starts, settings, rng);
  return states.map((_, q) => {
    const g = Array.from({ length: count }, (_, c) => discountedReturns(played[q * count + c].map((k) => k.reward), gamma)[0] ?? 0);
    const value = g.reduce((a, b) => a + b, 0) / count;
    const noise = count > 1 ? g.reduce((a, x) => a + (x - value) ** 2, 0) / (count - 1) / count : 0;
    return { value, noise };
  });
}
