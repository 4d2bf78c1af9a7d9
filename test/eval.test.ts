/**
 * Evaluation: the unbiased pass@k estimator against hand-computed cases, the per-task paper metrics
 * computed from played episodes, and `comlrl eval` on a real task (HouseBuild) with tiny models.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { passAtKMetrics, setupTask } from '../cli/tasks.js';
import { TRAINER_CONFIG_SCHEMAS } from '../cli/schemas.js';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import { parseRunConfig } from '../src/config/schema.js';
import { runEpisode } from '../src/decpomdp/batch.js';
import { meanPassAtK, passAtK } from '../src/eval/passk.js';
import { createTinyModel } from '../src/model/tiny.js';
import { cli, tempDir } from './cli-helpers.js';

/** C(n, k) exactly, as a BigInt. */
function binom(n: number, k: number): bigint {
  if (k < 0 || k > n) return 0n;
  let r = 1n;
  for (let i = 1; i <= k; i++) r = (r * BigInt(n - k + i)) / BigInt(i);
  return r;
}

/** 1 − C(n−c,k)/C(n,k) with exact integers, then one division. */
function exactPassAtK(n: number, c: number, k: number): number {
  const num = binom(n - c, k);
  const den = binom(n, k);
  // Scale to keep 15 significant digits through the BigInt division.
  const scale = 10n ** 18n;
  return 1 - Number((num * scale) / den) / 1e18;
}

describe('pass@k (unbiased estimator 1 − C(n−c,k)/C(n,k))', () => {
  test('hand-computed cases', () => {
    // n=5, c=2: k=1 → 1 − 3/5; k=2 → 1 − C(3,2)/C(5,2) = 1 − 3/10; k=3 → 1 − 1/10; k=4 → 1 (only 3 failures).
    expect(passAtK(5, 2, 1)).toBeCloseTo(0.4, 15);
    expect(passAtK(5, 2, 2)).toBeCloseTo(0.7, 15);
    expect(passAtK(5, 2, 3)).toBeCloseTo(0.9, 15);
    expect(passAtK(5, 2, 4)).toBe(1);
    // n=10, c=1, k=5: 1 − C(9,5)/C(10,5) = 1 − 126/252 = 0.5.
    expect(passAtK(10, 1, 5)).toBeCloseTo(0.5, 15);
    // n=10, c=3, k=3: 1 − C(7,3)/C(10,3) = 1 − 35/120.
    expect(passAtK(10, 3, 3)).toBeCloseTo(1 - 35 / 120, 15);
    // pass@1 is the fraction correct.
    expect(passAtK(20, 7, 1)).toBeCloseTo(7 / 20, 15);
    expect(passAtK(10, 0, 10)).toBe(0);
    expect(passAtK(10, 10, 1)).toBe(1);
    expect(passAtK(10, 1, 10)).toBe(1);
  });

  test('matches exact binomials where the binomials overflow doubles', () => {
    expect(Number(binom(2000, 1000))).toBe(Infinity);
    for (const [n, c, k] of [[200, 13, 10], [2000, 1, 10], [2000, 1000, 100], [5000, 4990, 10], [1200, 3, 1000]] as const) {
      expect(passAtK(n, c, k)).toBeCloseTo(exactPassAtK(n, c, k), 12);
    }
  });

  test('mean over problems, and the errors', () => {
    expect(meanPassAtK([{ n: 5, c: 2 }, { n: 5, c: 0 }, { n: 5, c: 5 }], 2)).toBeCloseTo((0.7 + 0 + 1) / 3, 15);
    expect(() => passAtK(5, 6, 1)).toThrow(/c \(6\) must not exceed n \(5\)/);
    expect(() => passAtK(5, 1, 6)).toThrow(/k \(6\) must not exceed the number of samples n \(5\)/);
    expect(() => passAtK(5, 1, 0)).toThrow(/k must be >= 1/);
    expect(() => passAtK(5.5, 1, 1)).toThrow(/n must be an integer/);
    expect(() => meanPassAtK([], 1)).toThrow(/no problems/);
  });

  test('the CLI metric: pass@k for every k the sample count allows', () => {
    const passed = [
      [true, false, false, false, false, true, false, false, false, false],
      [false, false, false, false, false, false, false, false, false, false],
    ];
    const m = passAtKMetrics(passed, [1, 3, 5, 10, 20], 'coophe');
    expect(m['coophe/pass@1']).toBeCloseTo((0.2 + 0) / 2, 15);
    expect(m['coophe/pass@3']).toBeCloseTo((1 - Number(binom(8, 3)) / Number(binom(10, 3))) / 2, 15);
    expect(m['coophe/pass@10']).toBeCloseTo(0.5, 15);
    expect(m).not.toHaveProperty('coophe/pass@20');
  });
});

describe('task paper metrics', () => {
  let root: string;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    setBackendLogger(null);
    await initBackend('wasm');
    ({ dir: root, cleanup } = await tempDir('eval'));
    for (const name of ['h0', 'h1']) await createTinyModel({ dir: join(root, name), arch: 'qwen3', seed: name === 'h0' ? 1 : 2, hiddenSize: 32, numLayers: 1 });
  });
  afterAll(async () => cleanup());

  const houseDoc = (root: string) => ({
    model: { agents: [join(root, 'h0'), join(root, 'h1')], temperature: 1, top_p: 1, top_k: 0 },
    dataset: { task: 'housebuild' },
    task: { player: { hp: 5 }, spider: { num: 3, atk_low: 1, atk_high: 3 }, rpg_seed: 0 },
    reward_processor: { shift: -1 },
    magrpo: { num_turns: 1, num_generations: 2, max_new_tokens: 4, eval_batch_size: 2 },
  });

  test('HouseBuild IoU and HP from scripted episodes', async () => {
    const config = parseRunConfig(houseDoc(root), TRAINER_CONFIG_SCHEMAS);
    const task = await setupTask(config);
    // Seed 0 draws attacks [2, 2, 1]: total damage 5 ≥ 5 HP.
    const wall = '/fill 0 0 1 5 0 1 white_concrete'; // one row of the floor (y=0, z=1)
    const played = [];
    for (const action of [['/kill', wall], ['', '']]) {
      const ep = await runEpisode(task.env, task.evalTasks[0], () => action);
      played.push({ ...ep, task: task.evalTasks[0], states: [], observations: [], completions: [action], completionIds: [], rewards: ep.steps.map((s) => s.reward), returns: [], infos: ep.steps.map((s) => s.info) });
    }
    const m = task.paperMetrics([[played[0]], [played[1]]], [1]);
    expect(m['housebuild/kill_rate']).toBe(0.5);
    // /kill keeps all 5 HP; no kill: 5 − 5 damage = 0.
    expect(m['housebuild/hp']).toBe(2.5);
    expect(m['housebuild/hp_frac']).toBe(0.5);
    expect(m['housebuild/iou']).toBeGreaterThan(0);
    expect(m['housebuild/iou']).toBeLessThan(0.5);
    expect(m['housebuild/raw_reward']).toBeGreaterThan(0);
    await task.close();
  });

  const problems = [
    { task_id: 'Toy/0', prompt: 'def add(a, b):\n    """Return a + b."""\n', test: 'def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(2, 5) == 7\n', entry_point: 'add' },
    { task_id: 'Toy/1', prompt: 'def double(x):\n    """Return 2 * x."""\n', test: 'def check(candidate):\n    assert candidate(2) == 4\n', entry_point: 'double' },
  ];
  const cheDoc = (root: string) => ({
    model: { agents: [join(root, 'h0'), join(root, 'h1')], temperature: 1, top_p: 1, top_k: 0 },
    dataset: { task: 'coophe', path: join(root, 'che.json'), train_split: 'train[:1]', eval_split: 'train' },
    magrpo: { num_turns: 1, num_generations: 2, max_new_tokens: 3, eval_batch_size: 4 },
    reward_processor: { shift: -4 },
  });

  test('CoopHE pass rate and pass@k from episodes scored in the sandbox', async () => {
    await writeFile(join(root, 'che.json'), JSON.stringify(problems));
    const config = parseRunConfig(cheDoc(root), TRAINER_CONFIG_SCHEMAS);
    const task = await setupTask(config);
    const good = ['def aux(a, b):\n    return a + b\n', 'def add(a, b):\n    s = aux(a, b)\n    t = s * 1\n    return t\n'];
    const bad = ['def aux(a, b):\n    return a + b\n', 'def add(a, b):\n    return a - b + 2 * (b == 5) * b\n'];
    const play = async (item: unknown, action: string[]) => {
      const ep = await runEpisode(task.env, item, () => action);
      return { task: item, states: [], observations: [], completions: [action], completionIds: [], rewards: ep.history.rewards, returns: [], infos: ep.steps.map((s) => s.info) };
    };
    // Problem 0: 2 of 3 samples pass; problem 1: none of 3 (its entry point is never written).
    const samples = [
      [await play(task.evalTasks[0], good), await play(task.evalTasks[0], bad), await play(task.evalTasks[0], good)],
      [await play(task.evalTasks[1], bad), await play(task.evalTasks[1], ['', '']), await play(task.evalTasks[1], bad)],
    ];
    // 4.0 − 4: the full reward.
    expect(samples[0][0].rewards[0]).toBe(0);
    const m = task.paperMetrics(samples, [1, 2, 3, 5]);
    expect(m['coophe/pass_rate']).toBeCloseTo(2 / 6, 15);
    expect(m['coophe/pass@1']).toBeCloseTo((2 / 3 + 0) / 2, 15);
    // n=3, c=2, k=2: only one failure, so every pair holds a pass.
    expect(m['coophe/pass@2']).toBe(0.5);
    expect(m['coophe/pass@3']).toBe(0.5);
    expect(m).not.toHaveProperty('coophe/pass@5');
    // The bad main passes 1 of problem 0's 2 asserts (2 − 5 + 10 = 7, 1 − 2 ≠ 3).
    expect(m['coophe/test_pass_frac']).toBeCloseTo((1 + 0.5 + 1) / 6, 15);
    await task.close();
  });

  test('comlrl eval on CoopHE with base models: pass@k keys for k <= samples', async () => {
    const file = join(root, 'che.yaml');
    await writeFile(file, stringify(cheDoc(root)));
    const r = await cli(['eval', '--config', file, '--samples', '3', '--k', '1,3,5']);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/coophe\/pass_rate\s+0/);
    expect(r.out).toMatch(/coophe\/pass@1\s+0/);
    expect(r.out).toMatch(/coophe\/pass@3\s+0/);
    expect(r.out).not.toContain('pass@5');
    expect(r.err).toMatch(/coophe: 2 eval items × 3 sample\(s\)/);
  });

  test('comlrl eval on TLDR with base models: the TLDR score and the logger means', async () => {
    await writeFile(join(root, 'tldr.jsonl'), ['{"prompt": "SUBREDDIT: r/test TITLE: a post POST: words here"}', '{"prompt": "SUBREDDIT: r/x TITLE: t POST: more words"}'].join('\n'));
    const file = join(root, 'tldr.yaml');
    await writeFile(
      file,
      stringify({
        model: { agents: [join(root, 'h0'), join(root, 'h1')] },
        dataset: { task: 'tldr', path: join(root, 'tldr.jsonl'), train_split: 'train[:1]', eval_split: 'train' },
        collm_cc: { num_turns: 1, max_new_tokens: 3, eval_batch_size: 2 },
      }),
    );
    const r = await cli(['eval', '--config', file]);
    expect(r.code, r.err).toBe(0);
    // Three-token outputs fail level 1 (8 tokens each): the score is 0.
    expect(r.out).toMatch(/tldr\/score\s+0/);
    expect(r.out).toMatch(/tldr\/\w+/);
    expect(r.err).toMatch(/tldr: 2 eval items × 1 sample\(s\)/);
  });

  test('TLDR splits: a single file refuses test[...]; a split directory honours it; an overlap warns; max_new_tokens must fit the context', async () => {
    const rows = (tag: string) => [0, 1].map((i) => JSON.stringify({ prompt: `SUBREDDIT: r/${tag} TITLE: t${i} POST: words ${i}` })).join('\n');
    await writeFile(join(root, 'tldr-train-only.jsonl'), rows('train'));
    await mkdir(join(root, 'tldr-dir'), { recursive: true });
    await writeFile(join(root, 'tldr-dir', 'train.jsonl'), rows('train'));
    await writeFile(join(root, 'tldr-dir', 'test.jsonl'), rows('test'));
    const cfg = async (name: string, dataset: Record<string, unknown>) => {
      const file = join(root, `${name}.yaml`);
      await writeFile(file, stringify({ model: { agents: [join(root, 'h0'), join(root, 'h1')] }, dataset: { task: 'tldr', ...dataset }, collm_cc: { num_turns: 1, max_new_tokens: 2, eval_batch_size: 2 } }));
      return file;
    };
    // The README's old recipe: only the train split exported to one file, eval on 'test[:1100]'.
    const single = await cli(['eval', '--config', await cfg('tldr-single', { path: join(root, 'tldr-train-only.jsonl'), train_split: 'train[:1]', eval_split: 'test[:2]' })]);
    expect(single.code).toBe(1);
    expect(single.err).toContain("split 'test' (in 'test[:2]') does not exist: a single file holds one split, named 'train'");
    const dir = await cli(['eval', '--config', await cfg('tldr-dir', { path: join(root, 'tldr-dir'), train_split: 'train[:2]', eval_split: 'test[:2]' })]);
    expect(dir.code, dir.err).toBe(0);
    expect(dir.err).not.toContain('warning');
    const overlap = await cli(['eval', '--config', await cfg('tldr-overlap', { path: join(root, 'tldr-dir'), train_split: 'train[:2]', eval_split: 'train[1:]' })]);
    expect(overlap.code, overlap.err).toBe(0);
    expect(overlap.err).toContain(`warning: 1 of the 1 eval items (dataset.eval_split 'train[1:]' of ${join(root, 'tldr-dir')}) are also training items (dataset.train_split 'train[:2]'`);
    const huge = await cli(['eval', '--config', await cfg('tldr-huge', { path: join(root, 'tldr-dir'), train_split: 'train', eval_split: 'test' }), '--set', 'collm_cc.max_new_tokens=1000000000']);
    expect(huge.code).toBe(1);
    expect(huge.err).toMatch(/collm_cc\.max_new_tokens 1000000000 does not fit the context of agent 0 \(.*h0\): its config\.json max_position_embeddings is \d+, which must hold the prompt and the completion/);
  });

  test('comlrl eval on HouseBuild with base models (tiny, BPE tokenizer)', async () => {
    const file = join(root, 'house.yaml');
    await writeFile(file, stringify(houseDoc(root)));
    const r = await cli(['eval', '--config', file, '--limit', '1', '--samples', '2']);
    expect(r.code, r.err).toBe(0);
    for (const key of ['housebuild/iou', 'housebuild/hp', 'housebuild/score_match', 'episode_reward_mean']) expect(r.out).toContain(key);
    expect(r.err).toMatch(/housebuild: 1 eval items × 2 sample\(s\), 1 turn\(s\), base models/);
  });
});
