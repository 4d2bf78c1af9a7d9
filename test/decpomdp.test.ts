import { describe, expect, it } from 'vitest';
import {
  appendAction,
  appendJointObservations,
  appendJointTurn,
  appendObservation,
  appendTurn,
  emptyAgentHistory,
  emptyJointHistory,
  fromCoMLRL,
  globalFeaturesOf,
  isStaged,
  runEpisode,
  scaleShift,
  stepMany,
  type ExternalTransitionArgs,
} from '../src/decpomdp/index.js';

interface Item {
  prompt: string;
  id: number;
}
const item: Item = { prompt: 'P', id: 7 };

describe('history helpers', () => {
  it('append immutably and keep o/a alternation', () => {
    const h0 = emptyAgentHistory();
    const h1 = appendObservation(h0, 'o0');
    const h2 = appendAction(h1, 'a0');
    const h3 = appendTurn(h2, 'o1', 'a1');
    expect(h0).toEqual({ observations: [], actions: [] });
    expect(h1).toEqual({ observations: ['o0'], actions: [] });
    expect(h3).toEqual({ observations: ['o0', 'o1'], actions: ['a0', 'a1'] });
    expect(() => appendObservation(h1, 'x')).toThrow(/already ends with an observation/);
    expect(() => appendAction(h2, 'x')).toThrow(/no pending observation/);
  });

  it('joint turns add one action per agent and the reward', () => {
    const j0 = emptyJointHistory(2);
    const j1 = appendJointObservations(j0, ['p0', 'q0']);
    const j2 = appendJointTurn(j1, ['a', 'b'], 0.5);
    const j3 = appendJointTurn(j2, ['c', 'd'], 1, ['p1', 'q1']);
    expect(j1.rewards).toEqual([]);
    expect(j3).toEqual({
      agents: [
        { observations: ['p0', 'p1'], actions: ['a', 'c'] },
        { observations: ['q0', 'q1'], actions: ['b', 'd'] },
      ],
      rewards: [0.5, 1],
    });
    expect(j2.agents[0]).toEqual({ observations: ['p0'], actions: ['a'] });
    expect(() => appendJointTurn(j1, ['a'], 0)).toThrow(/1 actions for 2 agents/);
  });
});

/** Records every transition call so the tests can check CoMLRL's arguments. */
function recordingTransition(calls: ExternalTransitionArgs<Item>[]) {
  return (args: ExternalTransitionArgs<Item>) => {
    calls.push(args);
    const t = args.promptHistoryPerAgent[0].length; // turns played, as CoMLRL's feedback counts them
    return args.agentCompletions.map((c, i) => `fb${i} t${t} ${args.agentCompletions.join('+')}`);
  };
}

describe('CoMLRL adapter', () => {
  const formatters = [
    (it: Item, ext?: string) => `A0[${it.prompt}|${ext ?? '-'}]`,
    (it: Item, ext?: string) => `A1[${it.prompt}|${ext ?? '-'}]`,
  ];

  it('re-formats external prompts (passthrough off): item.prompt replaced, external prompt passed', async () => {
    const calls: ExternalTransitionArgs<Item>[] = [];
    const env = fromCoMLRL<Item>({
      numAgents: 2,
      numTurns: 3,
      formatters,
      rewardFunc: ([a, b]) => (a[0] === b[0] ? 1 : 0),
      externalTransition: recordingTransition(calls),
    });
    const s0 = env.initialState(item);
    expect([env.observe(s0, 0), env.observe(s0, 1)]).toEqual(['A0[P|-]', 'A1[P|-]']);

    const r1 = await env.step(s0, ['x', 'y']);
    expect(r1).toMatchObject({ reward: 0, done: false });
    // Hand-derived: the transition returned 'fb0 t1 x+y'; formatter 0 sees it as prompt and as ext.
    expect(env.observe(r1.next, 0)).toBe('A0[fb0 t1 x+y|fb0 t1 x+y]');
    expect(env.observe(r1.next, 1)).toBe('A1[fb1 t1 x+y|fb1 t1 x+y]');
    expect(calls[0]).toEqual({
      prompt: 'P',
      agentCompletions: ['x', 'y'],
      numAgents: 2,
      promptHistoryPerAgent: [['A0[P|-]'], ['A1[P|-]']],
      responseHistoryPerAgent: [['x'], ['y']],
      item,
      reward: { raw: 0, reward: 0 },
    });

    const r2 = await env.step(r1.next, ['z', 'z']);
    expect(r2.reward).toBe(1);
    // Turn 2: CoMLRL passes the ORIGINAL item's prompt, and full per-agent histories.
    expect(calls[1].prompt).toBe('P');
    expect(calls[1].promptHistoryPerAgent).toEqual([
      ['A0[P|-]', 'A0[fb0 t1 x+y|fb0 t1 x+y]'],
      ['A1[P|-]', 'A1[fb1 t1 x+y|fb1 t1 x+y]'],
    ]);
    expect(calls[1].responseHistoryPerAgent).toEqual([['x', 'z'], ['y', 'z']]);

    const r3 = await env.step(r2.next, ['u', 'v']);
    expect(r3.done).toBe(true);
    expect(r3.next.endReason).toBe('horizon');
    expect(calls).toHaveLength(2); // no transition after the last turn
    expect(r3.next.rewards).toEqual([0, 1, 0]);
    expect(env.jointHistory(r3.next)).toEqual({
      agents: [
        { observations: ['A0[P|-]', 'A0[fb0 t1 x+y|fb0 t1 x+y]', 'A0[fb0 t2 z+z|fb0 t2 z+z]'], actions: ['x', 'z', 'u'] },
        { observations: ['A1[P|-]', 'A1[fb1 t1 x+y|fb1 t1 x+y]', 'A1[fb1 t2 z+z|fb1 t2 z+z]'], actions: ['y', 'z', 'v'] },
      ],
      rewards: [0, 1, 0],
    });
    expect(() => env.observe(r3.next, 0)).toThrow(/episode is over/);
    await expect(env.step(r3.next, ['a', 'b'])).rejects.toThrow(/finished episode/);
  });

  it('passthrough uses the transition strings verbatim; default formatter reads item.prompt', async () => {
    const env = fromCoMLRL<Item>({
      numAgents: 2,
      numTurns: 2,
      rewardFunc: () => 0,
      externalTransition: ({ agentCompletions }) => agentCompletions.map((c) => `raw:${c}`),
      externalPromptPassthrough: true,
    });
    const s0 = env.initialState(item);
    expect(env.observe(s0, 1)).toBe('P');
    const { next } = await env.step(s0, ['a', 'b']);
    expect([env.observe(next, 0), env.observe(next, 1)]).toEqual(['raw:a', 'raw:b']);
  });

  it('reward: single-element lists per agent, element 0 of a list result, async, then the processor', async () => {
    const seen: unknown[] = [];
    const env = fromCoMLRL<Item>({
      numAgents: 3,
      numTurns: 1,
      formatters: (it) => `q${it.id}`,
      rewardFunc: async (completions, ctx) => {
        seen.push({ completions, prompts: ctx.prompts, turn: ctx.turn, id: ctx.item.id });
        await new Promise((r) => setTimeout(r, 1));
        return [completions.map((c) => c[0].length).reduce((a, b) => a + b, 0), 99];
      },
      rewardProcessor: scaleShift({ scale: 2, shift: -4 }),
      maxReward: 0,
    });
    const s0 = env.initialState(item);
    const r = await env.step(s0, ['ab', 'c', 'def']);
    // raw 2 + 1 + 3 = 6 → 6 · 2 − 4 = 8
    expect(r.reward).toBe(8);
    expect(r.info.rawReward).toBe(6);
    expect(r.done).toBe(true);
    expect(seen).toEqual([{ completions: [['ab'], ['c'], ['def']], prompts: ['q7', 'q7', 'q7'], turn: 0, id: 7 }]);
    expect(env.globalInfo(s0)).toEqual({ turn: 0, numTurns: 1, lastReward: null, maxReward: 0 });
    expect(env.globalInfo(r.next)).toEqual({ turn: 1, numTurns: 1, lastReward: 8, maxReward: 0 });
  });

  it('numeric m_t (globalFeatures option): computed per state from the turn, rewards, raw reward and reward info', async () => {
    const plain = fromCoMLRL<Item>({ numAgents: 1, numTurns: 1, rewardFunc: () => 1 });
    expect(plain.globalFeatures).toBeUndefined();
    const env = fromCoMLRL<Item>({
      numAgents: 1,
      numTurns: 2,
      rewardFunc: ([[a]]) => ({ reward: a.length, info: { hits: a.split('x').length - 1 } }),
      externalTransition: () => ['next'],
      rewardProcessor: scaleShift({ scale: 1, shift: -1 }),
      globalFeatures: {
        size: 4,
        names: ['turn/H', 'Σ r', 'raw', 'hits'],
        of: (c) => [c.turn / c.numTurns, c.rewards.reduce((a, b) => a + b, 0), c.lastRawReward ?? -1, typeof c.lastInfo?.hits === 'number' ? c.lastInfo.hits : -1],
      },
    });
    expect(env.globalFeatures?.names).toEqual(['turn/H', 'Σ r', 'raw', 'hits']);
    const s0 = env.initialState(item);
    const s1 = (await env.step(s0, ['xax'])).next;
    const s2 = (await env.step(s1, ['x'])).next;
    // raw 3 → r 2, two x; raw 1 → r 0, one x.
    expect([s0, s1, s2].map((s) => globalFeaturesOf(env, s))).toEqual([
      [0, 0, -1, -1],
      [1 / 2, 2, 3, 2],
      [1, 2, 1, 1],
    ]);
  });

  it('a reward with info passes its details into the step info and the transition', async () => {
    let seenReward: unknown;
    const env = fromCoMLRL<Item>({
      numAgents: 1,
      numTurns: 2,
      rewardFunc: ([a]) => ({ reward: a[0].length, info: { breakdown: { len: a[0].length } } }),
      rewardProcessor: (r) => r - 1,
      externalTransition: ({ reward }) => {
        seenReward = reward;
        return ['again'];
      },
    });
    const r = await env.step(env.initialState(item), ['abc']);
    expect(r.reward).toBe(2);
    expect(r.info).toMatchObject({ breakdown: { len: 3 }, rawReward: 3, turn: 0, earlyTerminated: false });
    expect(seenReward).toEqual({ raw: 3, reward: 2, info: { breakdown: { len: 3 } } });
  });

  it('early termination fires only on a processed reward strictly above the threshold', async () => {
    let calls = 0;
    const make = () =>
      fromCoMLRL<Item>({
        numAgents: 1,
        numTurns: 3,
        rewardFunc: ([a]) => Number(a[0]),
        rewardProcessor: (r) => r - 4,
        earlyTerminationThreshold: -0.2,
        externalTransition: () => {
          calls++;
          return ['next'];
        },
      });
    const env = make();
    const s0 = env.initialState(item);
    const atThreshold = await env.step(s0, ['3.8']); // 3.8 − 4 = −0.2 (float: −0.20000000000000018), not > −0.2
    expect(atThreshold.done).toBe(false);
    const above = await env.step(s0, ['3.9']);
    expect(above).toMatchObject({ done: true, info: { earlyTerminated: true } });
    expect(above.next.endReason).toBe('early');
    expect(calls).toBe(1); // no feedback computed for the early-terminated branch
  });

  it('states are frozen; branching twice from one state gives independent children', async () => {
    const calls: ExternalTransitionArgs<Item>[] = [];
    const env = fromCoMLRL<Item>({
      numAgents: 2,
      numTurns: 2,
      formatters,
      rewardFunc: ([a]) => a[0].length,
      externalTransition: recordingTransition(calls),
    });
    const s0 = env.initialState(item);
    const snapshot = JSON.stringify(s0);
    const [left, right] = await stepMany(env, [s0, s0], [['l', 'l'], ['rr', 'r']]);
    expect(JSON.stringify(s0)).toBe(snapshot);
    expect(left.reward).toBe(1);
    expect(right.reward).toBe(2);
    expect(env.observe(left.next, 0)).toBe('A0[fb0 t1 l+l|fb0 t1 l+l]');
    expect(env.observe(right.next, 0)).toBe('A0[fb0 t1 rr+r|fb0 t1 rr+r]');
    expect(left.next.histories[1].actions).toEqual(['l']);
    expect(right.next.histories[1].actions).toEqual(['r']);
    expect(Object.isFrozen(s0)).toBe(true);
    expect(Object.isFrozen(s0.histories[0].observations)).toBe(true);
    expect(() => {
      (s0 as { turn: number }).turn = 5;
    }).toThrow(TypeError);
    expect(() => (left.next.rewards as number[]).push(3)).toThrow(TypeError);
    // The transition got copies: mutating them does not reach the state.
    (calls[0].promptHistoryPerAgent[0] as string[]).push('junk');
    expect(s0.histories[0].observations).toEqual(['A0[P|-]']);
  });

  it('staged step equals step; the split skips the transition until asked', async () => {
    const calls: ExternalTransitionArgs<Item>[] = [];
    const env = fromCoMLRL<Item>({ numAgents: 2, numTurns: 2, formatters, rewardFunc: () => 0.25, externalTransition: recordingTransition(calls) });
    expect(isStaged(env)).toBe(true);
    const s0 = env.initialState(item);
    const r = await env.rewardOf(s0, ['a', 'b']);
    expect(r).toEqual({ raw: 0.25, reward: 0.25 });
    expect(calls).toHaveLength(0);
    const viaStages = await env.transition(s0, ['a', 'b'], r);
    const direct = await env.step(s0, ['a', 'b']);
    expect(viaStages).toEqual(direct);
  });

  it('stepMany runs steps concurrently and keeps input order', async () => {
    let active = 0;
    let maxActive = 0;
    const env = fromCoMLRL<Item>({
      numAgents: 1,
      numTurns: 1,
      rewardFunc: async ([a]) => {
        active++;
        maxActive = Math.max(maxActive, active);
        await new Promise((r) => setTimeout(r, 20 - Number(a[0]) * 5)); // later inputs finish first
        active--;
        return Number(a[0]);
      },
    });
    const s0 = env.initialState(item);
    const results = await stepMany(env, [s0, s0, s0, s0], [['0'], ['1'], ['2'], ['3']]);
    expect(results.map((r) => r.reward)).toEqual([0, 1, 2, 3]);
    expect(maxActive).toBe(4);
    await expect(stepMany(env, [s0], [])).rejects.toThrow(/1 states but 0/);
  });

  it('runEpisode plays to the horizon and collects histories', async () => {
    const env = fromCoMLRL<Item>({
      numAgents: 2,
      numTurns: 2,
      formatters,
      rewardFunc: ([a, b]) => (a[0] === b[0] ? 1 : 0),
      externalTransition: recordingTransition([]),
    });
    const ep = await runEpisode(env, item, (obs, _s, turn) => obs.map(() => `w${turn}`));
    expect(ep.history.rewards).toEqual([1, 1]);
    expect(ep.totalReward).toBe(2);
    expect(ep.states).toHaveLength(3);
    expect(ep.history.agents[0].actions).toEqual(['w0', 'w1']);
    expect(ep.history.agents[1].observations[1]).toBe('A1[fb1 t1 w0+w0|fb1 t1 w0+w0]');
  });

  it('rejects bad configurations and bad callback results with clear messages', async () => {
    expect(() => fromCoMLRL<Item>({ numAgents: 2, numTurns: 2, rewardFunc: () => 0 })).toThrow(/needs externalTransition/);
    expect(() => fromCoMLRL<Item>({ numAgents: 2, numTurns: 1, formatters: [formatters[0]], rewardFunc: () => 0 })).toThrow(/1 given for numAgents 2/);
    expect(() => fromCoMLRL<Item>({ numAgents: 0, numTurns: 1, rewardFunc: () => 0 })).toThrow(/numAgents/);
    const bad = fromCoMLRL<Item>({ numAgents: 2, numTurns: 2, rewardFunc: () => NaN, externalTransition: () => ['only one'] });
    const s0 = bad.initialState(item);
    await expect(bad.step(s0, ['a', 'b'])).rejects.toThrow(/returned NaN/);
    const badT = fromCoMLRL<Item>({ numAgents: 2, numTurns: 2, rewardFunc: () => 0, externalTransition: () => ['only one'] });
    await expect(badT.step(badT.initialState(item), ['a', 'b'])).rejects.toThrow(/must return 2 strings/);
    await expect(badT.step(badT.initialState(item), ['a'])).rejects.toThrow(/1 completions for 2 agents/);
    const noPrompt = fromCoMLRL<{ id: number }>({ numAgents: 1, numTurns: 1, rewardFunc: () => 0 });
    expect(() => noPrompt.initialState({ id: 1 })).toThrow(/no string field `prompt`/);
  });
});
