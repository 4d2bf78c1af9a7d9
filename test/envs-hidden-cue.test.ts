/** The hidden-cue task family: scores, what each agent sees, dense vs sparse payment (hand-derived). */
import { describe, expect, it } from 'vitest';
import { HiddenCueEnv, hiddenCueRandomBaseline, hiddenCueScore, hiddenCueTasks, hiddenCueWords } from '../envs/hidden-cue/index.js';

describe('hidden-cue', () => {
  it('scores the committed words: 0.25 per agent answering its own cue, 0.5 more for the same slot', () => {
    expect(hiddenCueScore(['red', 'blue'], ['apple', 'sky'])).toBe(1); // both slot 0
    expect(hiddenCueScore(['red', 'blue'], ['rose', 'sea'])).toBe(1); // both slot 1
    expect(hiddenCueScore(['red', 'blue'], ['apple', 'sea'])).toBe(0.5); // different slots
    expect(hiddenCueScore(['red', 'blue'], ['sky', 'sky'])).toBe(0.25); // agent 0 answered agent 1's cue
    expect(hiddenCueScore(['red', 'red'], [null, 'rose'])).toBe(0.25);
    expect(hiddenCueScore(['blue', 'blue'], ['cue', 'partner'])).toBe(0);
  });

  it('the random baseline is the exact mean score of uniform words (enumerated)', () => {
    let sum = 0;
    let n = 0;
    for (const task of hiddenCueTasks(4)) {
      for (const w0 of hiddenCueWords) for (const w1 of hiddenCueWords) {
        sum += hiddenCueScore(task.cues, [w0, w1]);
        n++;
      }
    }
    expect(sum / n).toBeCloseTo(hiddenCueRandomBaseline, 12);
    expect(hiddenCueTasks(4).map((t) => t.cues.join('/'))).toEqual(['red/red', 'red/blue', 'blue/red', 'blue/blue']);
  });

  it('each agent sees only its own cue, then its partner\'s last word; sparse pays the first turn at the end', async () => {
    const env = new HiddenCueEnv({ numTurns: 3 });
    const task = hiddenCueTasks(2)[1]; // red / blue
    let s = env.initialState(task);
    expect([env.observe(s, 0), env.observe(s, 1)]).toEqual(['cue red', 'cue blue']);
    let r = await env.step(s, ['apple', 'sky']);
    expect(r.reward).toBe(0);
    s = r.next;
    expect([env.observe(s, 0), env.observe(s, 1)]).toEqual(['cue red partner sky', 'cue blue partner apple']);
    r = await env.step(s, ['xyz', 'sea']); // waiting turns do not count
    expect(r.reward).toBe(0);
    expect(env.observe(r.next, 1)).toBe('cue blue partner none');
    r = await env.step(r.next, ['rose', 'rose']);
    expect(r).toMatchObject({ reward: 1, done: true });
    expect(env.globalInfo(r.next)).toEqual({ turn: 3, numTurns: 3, lastReward: 1, maxReward: 1 });

    const dense = new HiddenCueEnv();
    const d = await dense.step(dense.initialState(task), ['rose', 'sky']);
    expect(d).toMatchObject({ reward: 0.5, done: true });
    expect(() => new HiddenCueEnv({ numTurns: 0 })).toThrow(/numTurns must be an integer >= 1/);
  });
});
