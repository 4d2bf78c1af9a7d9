/**
 * The task registry: the built-in tasks are the folders under envs/, registered in the documented
 * order; the deprecated constants stay equal to the registry; the shared statistics keep each
 * caller's behaviour (empty input, floors, bit-identical z-scores).
 */
import { readdirSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import { BUILTIN_TASKS_DIR, taskSpecFile } from '../envs/tasks.js';
import { EXTERNAL_MODES, TASK_NAMES } from '../src/config/schema.js';
import { getTask, registerTask, taskNames } from '../src/tasks/registry.js';
import { defineTask } from '../src/tasks/spec.js';
import { normalizeAdvantages } from '../src/buffer/targets.js';
import { mean as statsMean, stdPop, zScore } from '../src/util/stats.js';
import { mean as advantageMean, zScore as advantageZScore } from '../trainers/magrpo/advantage.js';
import { createRng } from '../src/util/rng.js';
import { planMinibatches } from '../src/buffer/replay.js';

describe('task registry', () => {
  test('every folder under envs/ with a spec module is a registered task, in the documented order', () => {
    const folders = readdirSync(BUILTIN_TASKS_DIR).filter((n) => taskSpecFile(`${BUILTIN_TASKS_DIR}/${n}`) !== undefined);
    expect(folders.sort()).toEqual(['coophe', 'housebuild', 'tldr', 'toy']);
    expect(taskNames().slice(0, 4)).toEqual([...TASK_NAMES]);
  });

  test('the deprecated constants equal the specs', () => {
    for (const name of TASK_NAMES) expect([...getTask(name).externalModes], name).toEqual([...EXTERNAL_MODES[name]]);
  });

  test('names are checked and a taken name is refused', () => {
    const spec = defineTask({ name: 'Bad Name', label: 'x', metricsSummary: '', externalModes: [], externalOptions: [], data: 'builtin', setup: () => Promise.reject(new Error('unused')) });
    expect(() => registerTask(spec)).toThrow(/lowercase/);
    const clash = defineTask({ ...spec, name: 'tldr' });
    expect(() => registerTask(clash)).toThrow(/task 'tldr' is already registered/);
    registerTask(getTask('tldr')); // the same spec again is a no-op
    expect(() => getTask('nope')).toThrow(/unknown task 'nope' \(registered: tldr, coophe, housebuild, toy-coord/);
  });
});

describe('shared statistics (src/util/stats.ts) keep each caller\'s behaviour', () => {
  test('mean: NaN on empty by default (task metrics), 0 where the trainers asked for it', () => {
    expect(statsMean([])).toBeNaN();
    expect(statsMean([], 0)).toBe(0);
    expect(advantageMean([])).toBe(0);
    expect(statsMean([1, 2, 4])).toBe(7 / 3);
    expect(stdPop([])).toBe(0);
    // Population std of [1, 3]: mean 2, deviations ±1 → 1.
    expect(stdPop([1, 3])).toBe(1);
  });

  test('zScore: a constant group maps to zeros (the floor), the trainers\' default floor is 1e-6', () => {
    expect(zScore([5, 5, 5], 1e-6)).toEqual([0, 0, 0]);
    expect(advantageZScore([1, 3])).toEqual([-1, 1]);
    // A spread below the floor divides by the floor: [0, 2e-7] has std 1e-7 < 1e-6.
    expect(advantageZScore([0, 2e-7])).toEqual([(0 - 1e-7) / 1e-6, (2e-7 - 1e-7) / 1e-6]);
  });

  test('the actor-critic normalizer and the shared z-score agree bit for bit on groups of 2+', () => {
    const rng = createRng(7);
    for (let trial = 0; trial < 200; trial++) {
      const n = 2 + Math.floor(rng.next() * 9);
      const xs = Array.from({ length: n }, () => (rng.next() - 0.5) * 10 ** Math.floor(rng.next() * 8 - 4));
      expect(zScore(xs, 1e-6)).toEqual(normalizeAdvantages(xs));
    }
    // Groups of one stay as they are in the actor-critic normalizer (CoMLRL normalizes only n > 1).
    expect(normalizeAdvantages([3])).toEqual([3]);
  });
});

describe('one minibatch planner for both trainer families', () => {
  test('one turn group, one epoch: a shuffle of the group cut into chunks (what MAGRPO did before sharing planMinibatches)', () => {
    const items = Array.from({ length: 11 }, (_, i) => `s${i}`);
    const order = createRng(5).shuffle([...items]);
    const chunks = [order.slice(0, 4), order.slice(4, 8), order.slice(8)];
    const plan = planMinibatches(items.map(() => 0), { batchSize: 4, epochs: 1, rng: createRng(5) });
    expect(plan.map((b) => b.indices.map((i) => items[i]))).toEqual(chunks);
  });

  test('by turn group in ascending order, each group shuffled in turn: the order MAGRPO consumed its buffer in', () => {
    const turns = [1, 0, 1, 0, 0, 1, 2];
    const rng = createRng(9);
    const expected = [
      ...rng.shuffle([1, 3, 4]).map((i) => [i]),
      ...rng.shuffle([0, 2, 5]).map((i) => [i]),
      [6],
    ];
    // The draw for the last group (one item) still happens, as before.
    rng.shuffle([6]);
    const plan = planMinibatches(turns, { batchSize: 1, epochs: 1, rng: createRng(9) });
    expect(plan.map((b) => [...b.indices])).toEqual(expected);
    expect(plan.map((b) => b.turn)).toEqual([0, 0, 0, 1, 1, 1, 2]);
  });
});
