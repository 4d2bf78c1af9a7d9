/** The hidden-cue relay: per-turn scores, the agreed slot, sparse vs dense payment, progress in m_t as text and as numbers (hand-derived). */
import { describe, expect, it } from 'vitest';
import { centralizedCriticText, formatGlobalInfo } from '../src/critic/inputs.js';
import { globalFeaturesOf } from '../src/decpomdp/features.js';
import { HiddenCueRelayEnv, RELAY_FEATURE_NAMES, relayEpisodeScore, relayProgress, relayTasks, relayTurnScore, type RelayTask } from '../envs/hidden-cue/relay.js';

const task: RelayTask = {
  id: 'hand',
  cues: [
    ['red', 'blue'],
    ['blue', 'blue'],
    ['red', 'red'],
    ['blue', 'red'],
  ],
};

async function play(env: HiddenCueRelayEnv, words: readonly [string, string][]) {
  let s = env.initialState(task);
  const rewards: number[] = [];
  const infos = [env.globalInfo(s)];
  for (const w of words) {
    const r = await env.step(s, w);
    rewards.push(r.reward);
    s = r.next;
    if (!r.done) infos.push(env.globalInfo(s));
  }
  return { rewards, infos, state: s };
}

// Turn scores: 1 (slot 0 agreed), 0.5 (both answer, slot 1 ≠ agreed 0: no bonus), 1 (slot 0), 0.25 (only agent 1 answers).
const WORDS: [string, string][] = [
  ['apple', 'sky'],
  ['sea', 'sea'],
  ['apple', 'apple'],
  ['apple', 'apple'],
];

describe('hidden-cue relay', () => {
  it('scores each turn: 0.25 per agent answering its cue, 0.5 more when both answer in the agreed slot', () => {
    expect(relayTurnScore(['red', 'blue'], ['apple', 'sky'], null)).toEqual({ score: 1, bonus: true, agreed: 0 });
    expect(relayTurnScore(['red', 'blue'], ['rose', 'sea'], null)).toEqual({ score: 1, bonus: true, agreed: 1 });
    // Once slot 0 is agreed, a common slot 1 no longer pays the bonus, and the agreement stays.
    expect(relayTurnScore(['red', 'blue'], ['rose', 'sea'], 0)).toEqual({ score: 0.5, bonus: false, agreed: 0 });
    expect(relayTurnScore(['red', 'blue'], ['apple', 'sea'], null)).toEqual({ score: 0.5, bonus: false, agreed: null });
    expect(relayTurnScore(['red', 'red'], [null, 'rose'], 1)).toEqual({ score: 0.25, bonus: false, agreed: 1 });
    expect(relayTurnScore(['blue', 'blue'], ['cue', 'apple'], null)).toEqual({ score: 0, bonus: false, agreed: null });
  });

  it('sparse pays the mean per-turn score at the last turn only; dense pays s_t / H every turn', async () => {
    const sparse = await play(new HiddenCueRelayEnv({ numTurns: 4, payment: 'sparse' }), WORDS);
    expect(sparse.rewards).toEqual([0, 0, 0, (1 + 0.5 + 1 + 0.25) / 4]);
    const dense = await play(new HiddenCueRelayEnv({ numTurns: 4, payment: 'dense' }), WORDS);
    expect(dense.rewards).toEqual([0.25, 0.125, 0.25, 0.0625]);
    expect(relayEpisodeScore(sparse.rewards, 'sparse')).toBe(0.6875);
    expect(relayEpisodeScore(dense.rewards, 'dense')).toBe(0.6875);
    expect(sparse.state.done).toBe(true);
  });

  it('each agent sees its turn\'s own cue and its partner\'s last word', async () => {
    const env = new HiddenCueRelayEnv({ numTurns: 4, payment: 'sparse' });
    let s = env.initialState(task);
    expect([env.observe(s, 0), env.observe(s, 1)]).toEqual(['cue red', 'cue blue']);
    s = (await env.step(s, ['apple', 'sky'])).next;
    expect([env.observe(s, 0), env.observe(s, 1)]).toEqual(['cue blue partner sky', 'cue blue partner apple']);
    s = (await env.step(s, ['hello', 'sea'])).next;
    expect(env.observe(s, 1)).toBe('cue red partner none');
  });

  it('m_t carries the progress: hits so far, the score so far and the agreed slot', async () => {
    const { infos } = await play(new HiddenCueRelayEnv({ numTurns: 4, payment: 'sparse' }), WORDS);
    expect(infos.map((m) => m.progress)).toEqual(['hits 0; score 0; slot none', 'hits 1; score 1; slot 0', 'hits 1; score 1.5; slot 0', 'hits 2; score 2.5; slot 0']);
    expect(formatGlobalInfo(infos[2])).toBe('[Global Info] turn 3 of 4; last reward: 0 (max 1); hits 1; score 1.5; slot 0');
    const dense = await play(new HiddenCueRelayEnv({ numTurns: 4, payment: 'dense' }), WORDS);
    expect(formatGlobalInfo(dense.infos[1])).toBe('[Global Info] turn 2 of 4; last reward: 0.25 (max 0.25); hits 1; score 1; slot 0');
    // The critic text starts with it; without progress m_t reads as before.
    expect(centralizedCriticText({ observations: ['cue red', 'cue blue'], globalInfo: infos[1] }).split('\n')[0]).toBe(formatGlobalInfo(infos[1]));
    expect(formatGlobalInfo({ turn: 0, numTurns: 2, lastReward: null, maxReward: 1 })).toBe('[Global Info] turn 1 of 2; last reward: none (max 1)');
    expect(relayProgress(0, 0.75, 1)).toBe('hits 0; score 0.75; slot 1');
  });

  it('numeric m_t: turn/H, score/H, hits/H and the agreed slot signed, for hand-played states', async () => {
    const env = new HiddenCueRelayEnv({ numTurns: 4, payment: 'sparse' });
    expect(env.globalFeatures.size).toBe(4);
    expect(RELAY_FEATURE_NAMES).toEqual(['turn/H', 'score/H', 'hits/H', 'slot']);
    let s = env.initialState(task);
    const seen = [globalFeaturesOf(env, s)];
    for (const w of WORDS) {
      s = (await env.step(s, w)).next;
      seen.push(globalFeaturesOf(env, s));
    }
    // Turn scores 1 (bonus, slot 0 agreed → −1), 0.5, 1 (bonus), 0.25: Σ s = 1, 1.5, 2.5, 2.75; hits 1, 1, 2, 2.
    expect(seen).toEqual([
      [0, 0, 0, 0],
      [1 / 4, 1 / 4, 1 / 4, -1],
      [2 / 4, 1.5 / 4, 1 / 4, -1],
      [3 / 4, 2.5 / 4, 2 / 4, -1],
      [4 / 4, 2.75 / 4, 2 / 4, -1],
    ]);
    // Slot 1 agreed reads +1; the dense variant has the same numbers (they describe the state, not the payment).
    const dense = new HiddenCueRelayEnv({ numTurns: 2, payment: 'dense' });
    const after = (await dense.step(dense.initialState(task), ['rose', 'sea'])).next;
    expect(globalFeaturesOf(dense, after)).toEqual([1 / 2, 1 / 2, 1 / 2, 1]);
  });

  it('tasks are fixed: turn 1 cycles through the cue pairs, later turns are seeded by the task id', () => {
    const a = relayTasks(8, 6, 'x');
    expect(a.map((t) => t.cues[0].join('/'))).toEqual(['red/red', 'red/blue', 'blue/red', 'blue/blue', 'red/red', 'red/blue', 'blue/red', 'blue/blue']);
    expect(relayTasks(8, 6, 'x')).toEqual(a);
    expect(a.every((t) => t.cues.length === 6)).toBe(true);
    // Not every later turn repeats turn 1 (the relay deals fresh cues).
    expect(a.some((t) => t.cues.slice(1).some((c) => c.join() !== t.cues[0].join()))).toBe(true);
    expect(() => new HiddenCueRelayEnv({ numTurns: 4, payment: 'sparse' }).initialState(relayTasks(1, 3)[0])).toThrow(/cues for 3 turns/);
  });
});
