import { describe, expect, it } from 'vitest';
import { runEpisode, scaleShift } from '../src/decpomdp/index.js';
import { createRng } from '../src/util/rng.js';
import { taskSpec as toySpec } from '../envs/toy/spec.js';
import {
  ToyCoordEnv,
  toyAnswers,
  toyCues,
  toyEvalTasks,
  toyFirstWord,
  toyRandomBaseline,
  toyScore,
  toyTrainTasks,
  toyWords,
} from '../envs/index.js';

describe('toy coordination task', () => {
  it('vocabulary: 15 distinct plain words covering prompts and answers', () => {
    expect(toyWords).toHaveLength(15);
    expect(new Set(toyWords).size).toBe(15);
    for (const w of toyWords) expect(w).toMatch(/^[a-z]+$/);
    expect(toyTrainTasks).toHaveLength(16);
    expect(toyEvalTasks.map((t) => t.cue)).toEqual([...toyCues]);
  });

  it('reads the first whitespace word robustly', () => {
    expect(toyFirstWord('  Rose  apple')).toBe('rose');
    expect(toyFirstWord('\nsky\t<|im_end|>')).toBe('sky');
    expect(toyFirstWord('   ')).toBeNull();
    expect(toyFirstWord('')).toBeNull();
  });

  it('scores: 0.25 per valid answer, 0.5 for agreeing on one', () => {
    expect(toyScore('red', 'rose', 'rose')).toBe(1);
    expect(toyScore('red', 'rose', 'apple')).toBe(0.5);
    expect(toyScore('red', 'rose', 'sky')).toBe(0.25);
    expect(toyScore('red', 'sky', 'sky')).toBe(0); // agreeing on a wrong word earns nothing
    expect(toyScore('blue', null, 'sea')).toBe(0.25);
  });

  it('the analytic uniform-policy baseline is 16/225 and matches a Monte-Carlo estimate', () => {
    // Hand derivation: W = 15 words, 2 answers per cue: 2·0.25·2/15 + 0.5·2/15² = 1/15 + 1/225.
    expect(toyRandomBaseline).toBeCloseTo(16 / 225, 15);
    const rng = createRng(11);
    const n = 60_000;
    let sum = 0;
    for (let i = 0; i < n; i++) {
      const cue = toyCues[i % 4];
      sum += toyScore(cue, toyWords[rng.int(15)], toyWords[rng.int(15)]);
    }
    // std of one draw ≤ 0.5 → 4 standard errors ≈ 0.008
    expect(Math.abs(sum / n - toyRandomBaseline)).toBeLessThan(0.008);
  });

  it('single-turn: reward is the score, done after one step', async () => {
    const env = new ToyCoordEnv();
    const s0 = env.initialState(toyEvalTasks[1]); // blue
    expect([env.observe(s0, 0), env.observe(s0, 1)]).toEqual(['cue blue', 'cue blue']);
    const r = await env.step(s0, ['sea', 'sea more words']);
    expect(r).toMatchObject({ reward: 1, done: true });
    expect(env.globalInfo(r.next)).toEqual({ turn: 1, numTurns: 1, lastReward: 1, maxReward: 1 });
    const wrong = await env.step(s0, ['sky', 'sea']);
    expect(wrong.reward).toBe(0.5);
  });

  it('multi-turn: sparse reward, partner word in the turn-2 observation, independent branches', async () => {
    const env = new ToyCoordEnv({ numTurns: 2 });
    const s0 = env.initialState(toyEvalTasks[0]); // red
    const a = await env.step(s0, ['rose', 'apple']);
    const b = await env.step(s0, ['blah', 'rose']);
    expect(a).toMatchObject({ reward: 0, done: false });
    expect(env.observe(a.next, 0)).toBe('cue red partner apple');
    expect(env.observe(a.next, 1)).toBe('cue red partner rose');
    // Non-vocabulary words show as `none`.
    expect(env.observe(b.next, 1)).toBe('cue red partner none');
    expect(env.observe(b.next, 0)).toBe('cue red partner rose');
    // Last turn pays the mean of both turns' scores: (0.5 + 1) / 2.
    const end = await env.step(a.next, ['apple', 'apple']);
    expect(end).toMatchObject({ reward: 0.75, done: true });
    expect(Object.isFrozen(a.next)).toBe(true);
    expect(a.next.words).toEqual([['rose', 'apple']]);
  });

  it('an agreeing policy reaches the maximum return; the processor shifts rewards', async () => {
    const env = new ToyCoordEnv({ numTurns: 3, rewardProcessor: scaleShift({ shift: -1 }) });
    for (const task of toyEvalTasks) {
      const ep = await runEpisode(env, task, () => [toyAnswers[task.cue][1], toyAnswers[task.cue][1]]);
      expect(ep.history.rewards).toEqual([-1, -1, 0]);
    }
    expect(env.globalInfo(env.initialState(toyEvalTasks[0])).maxReward).toBe(0);
  });
});

describe('toy-coord task spec: the random-play reward the plots draw', () => {
  const context = (numTurns: number, scale = 1, shift = 0) => ({ trainer: 'magrpo', dataset: { task: 'toy-coord' }, external: {}, options: undefined, reward: { scale, shift }, seed: 0, numTurns });

  it('is 16/225 on the single turn, processed like the reward, and paid on the last turn only', async () => {
    // Hand values: uniform play over the 15 words scores 16/225 a turn (the derivation above); the
    // multi-turn variant pays the mean of its turns' scores on the last turn and 0 before it.
    expect((await toySpec.setup(context(1))).randomPlayReward).toEqual([16 / 225]);
    const scaled = (await toySpec.setup(context(1, 2, -1))).randomPlayReward ?? [];
    expect(scaled[0]).toBeCloseTo(2 * (16 / 225) - 1, 15);
    expect((await toySpec.setup(context(3))).randomPlayReward).toEqual([0, 0, 16 / 225]);
    expect((await toySpec.setup(context(2, 1, 0.5))).randomPlayReward).toEqual([0.5, 16 / 225 + 0.5]);
  });
});
