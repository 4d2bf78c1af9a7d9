/**
 * Learning-rate schedules (`lr_scheduler_type`, `warmup_steps`, `warmup_ratio`, the critics' own
 * `critic_lr_*`): the factor λ(s) on hand-computed cases, the config's refusals (named by key), a
 * trainer's optimizer steps at the scheduled rate (a step at λ = 0 leaves the weights unchanged),
 * the rates logged per train log, and a run stopped mid-warmup that resumes to the bytes of the
 * run that never stopped.
 */
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { readMetrics } from '../src/logging/metrics.js';
import { lrFactor, resolveWarmupSteps, type LrSchedule } from '../src/optim/schedule.js';
import type { CriticLM } from '../src/critic/value-model.js';
import { ToyCoordEnv, toyTrainTasks, toyWords } from '../envs/toy/index.js';
import type { MetricRecord } from '../trainers/core/metrics.js';
import { MAGRPOTrainer } from '../trainers/magrpo/trainer.js';
import { parseMAGRPOConfig } from '../trainers/magrpo/config.js';
import { parseCoLLMDCConfig, parseCoLLMCCConfig } from '../trainers/collm/config.js';
import { CoLLMDCTrainer } from '../trainers/collm/decentralized.js';
import { cli, tinyModels, toyConfigYaml } from './cli-helpers.js';
import { disposeAgents, tempDir, tinyAgents } from './magrpo-helpers.js';
import { disposeCritics, tinyCritic } from './collm-helpers.js';
import { backendUnderTest } from './backend-under-test.js';

const at = (s: LrSchedule, steps: number[]) => steps.map((x) => lrFactor(s, x));

describe('λ(s) on hand-computed cases', () => {
  test('linear: warmup from 0, then down to 0 at s = T', () => {
    // T = 10, W = 2: s/2 below 2, then (10 − s)/8.
    expect(at({ type: 'linear', warmupSteps: 2, totalSteps: 10 }, [0, 1, 2, 6, 9, 10, 12])).toEqual([0, 0.5, 1, 0.5, 0.125, 0, 0]);
    // No warmup: (10 − s)/10 from the first step.
    expect(at({ type: 'linear', warmupSteps: 0, totalSteps: 10 }, [0, 5, 9])).toEqual([1, 0.5, 0.1]);
  });

  test('cosine: a half cosine after the warmup', () => {
    const s: LrSchedule = { type: 'cosine', warmupSteps: 2, totalSteps: 10 };
    // p = (s − 2)/8: s = 4 → p = 1/4, ½(1 + cos π/4) = ½ + √2/4; s = 6 → p = ½, ½; s = 10 → 0.
    const [w0, w1, top, quarter, half, end] = at(s, [0, 1, 2, 4, 6, 10]);
    expect([w0, w1, top]).toEqual([0, 0.5, 1]);
    expect(quarter).toBeCloseTo(0.5 + Math.SQRT2 / 4, 15);
    expect(half).toBeCloseTo(0.5, 15);
    expect(end).toBe(0);
  });

  test('constant_with_warmup and constant', () => {
    expect(at({ type: 'constant_with_warmup', warmupSteps: 4, totalSteps: 10 }, [0, 1, 3, 4, 9, 100])).toEqual([0, 0.25, 0.75, 1, 1, 1]);
    expect(at({ type: 'constant', warmupSteps: 4, totalSteps: 10 }, [0, 3, 9])).toEqual([1, 1, 1]);
  });

  test('W = warmup_steps when > 0, else ⌈T · warmup_ratio⌉', () => {
    expect(resolveWarmupSteps(0, 0.1, 25)).toBe(3); // ⌈2.5⌉
    expect(resolveWarmupSteps(0, 0.2, 25)).toBe(5);
    expect(resolveWarmupSteps(5, 0.5, 25)).toBe(5); // warmup_steps wins
    expect(resolveWarmupSteps(0, 0, 25)).toBe(0);
    expect(resolveWarmupSteps(0, 1, 25)).toBe(25);
  });
});

describe('bad values are refused naming the key', () => {
  test.each([
    [{ lr_scheduler_type: 'linear', warmup_steps: -1 }, /warmup_steps must be an integer >= 0 \(got -1\)/],
    [{ lr_scheduler_type: 'linear', warmup_steps: 0.1 }, /warmup_steps must be an integer >= 0 \(got 0\.1\)/],
    [{ lr_scheduler_type: 'linear', warmup_ratio: 1.5 }, /warmup_ratio must be a finite number in \[0, 1\] \(got 1\.5\)/],
    [{ lr_scheduler_type: 'linear', warmup_ratio: -0.1 }, /warmup_ratio must be a finite number in \[0, 1\]/],
    [{ lr_scheduler_type: 'polynomial' }, /lr_scheduler_type must be one of 'constant', 'constant_with_warmup', 'linear', 'cosine' \(got "polynomial"\)/],
    // A warmup a constant schedule would ignore.
    [{ warmup_steps: 3 }, /warmup_steps is 3 but lr_scheduler_type is 'constant'/],
    [{ lr_scheduler_type: 'constant', warmup_ratio: 0.1 }, /warmup_ratio is 0.1 but lr_scheduler_type is 'constant'/],
  ])('MAGRPO %j', (input, message) => {
    expect(() => parseMAGRPOConfig(input)).toThrow(message);
  });

  test('the critics’ keys', () => {
    expect(() => parseCoLLMCCConfig({ critic_lr_warmup_steps: -2 })).toThrow(/critic_lr_warmup_steps must be an integer >= 0/);
    expect(() => parseCoLLMCCConfig({ critic_lr_warmup_ratio: 2 })).toThrow(/critic_lr_warmup_ratio must be a finite number in \[0, 1\]/);
    expect(() => parseCoLLMCCConfig({ lr_scheduler_type: 'linear', critic_lr_scheduler_type: 'constant', critic_lr_warmup_ratio: 0.5 })).toThrow(
      /critic_lr_warmup_ratio is 0.5 but critic_lr_scheduler_type is 'constant'/,
    );
    // Shared value heads step with the actors' optimizers: a critic schedule would be ignored.
    expect(() => parseCoLLMDCConfig({ use_separate_critic: false, critic_lr_scheduler_type: 'cosine' })).toThrow(/critic_lr_scheduler_type would be ignored/);
    expect(parseCoLLMDCConfig({ critic_lr_scheduler_type: 'cosine', critic_lr_warmup_steps: 2 }).critic_lr_scheduler_type).toBe('cosine');
  });

  test.each([
    [{ lr_scheduler_type: 'cosine', warmup_ratio: 3 }, /magrpo\.warmup_ratio/],
    [{ warmup_steps: 4 }, /magrpo\.warmup_steps.*lr_scheduler_type is 'constant'/],
  ])('in a run config %j, the error names the section key before anything is loaded', async (section, message) => {
    const { dir, cleanup } = await tempDir('lr-config');
    try {
      const file = join(dir, 'bad.yaml');
      await writeFile(file, toyConfigYaml({ agents: [join(dir, 'a'), join(dir, 'b')], out: join(dir, 'run'), section }));
      const r = await cli(['train', '--config', file]);
      expect(r.code).not.toBe(0);
      expect(r.err).toMatch(message);
      expect(existsSync(join(dir, 'run'))).toBe(false);
    } finally {
      await cleanup();
    }
  });
});

/** Collects train logs. */
function collector(): { rows: MetricRecord[]; log: (step: number, m: MetricRecord) => void } {
  const rows: MetricRecord[] = [];
  return { rows, log: (_step, m) => void rows.push(m) };
}

function weights(agent: Agent): Float32Array[] {
  return agent.model.trainableVariables().map((v) => Float32Array.from(v.dataSync() as Float32Array));
}

describe('trainers step at the scheduled rate', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let agents: Agent[];
  let critics: CriticLM[];
  const base = { max_new_tokens: 1, temperature: 1, top_p: 1, top_k: 0, eval_interval: 0, logging_steps: 1, num_turns: 1 } as const;

  beforeAll(async () => {
    await initBackend(backendUnderTest('wasm'));
    ({ dir, cleanup } = await tempDir('lr-trainer'));
    agents = await tinyAgents(dir, [
      { name: 'a0', arch: 'qwen3', seed: 1, words: toyWords },
      { name: 'a1', arch: 'qwen3', seed: 2, words: toyWords },
    ]);
    critics = [await tinyCritic(dir, 'c0', 3, toyWords), await tinyCritic(dir, 'c1', 4, toyWords)];
  });
  afterAll(async () => {
    disposeAgents(agents);
    disposeCritics(critics);
    await cleanup();
  });

  test('MAGRPO, linear warmup: item 0 steps at lr 0 (weights unchanged), item 1 at half the rate', async () => {
    const tasks = toyTrainTasks.slice(0, 4);
    const logs = collector();
    const lr = 0.02;
    const trainer = new MAGRPOTrainer({
      agents,
      env: new ToyCoordEnv(),
      trainTasks: tasks,
      logger: logs,
      // 2 epochs × 4 items = T 8; W = ⌈8 · 0.25⌉ = 2; weight decay on, so a step at lr 0 would show any decay.
      config: { ...base, num_generations: 2, rollout_buffer_size: 1, num_train_epochs: 2, agent_learning_rate: lr, lr_scheduler_type: 'linear', warmup_ratio: 0.25, weight_decay: 0.1 },
    });
    try {
      const before = agents.map(weights);
      await trainer.train({ maxItems: 1 });
      // Steps were taken (the moments moved), at lr 0: p·(1 − 0·wd) − 0·update = p, bit for bit.
      expect(trainer.optimizers.map((o) => o.stepCount)).toEqual([1, 1]);
      expect(agents.map(weights)).toEqual(before);
      expect(trainer.learningRates).toEqual({ 'lr/agent_0': 0, 'lr/agent_1': 0 });

      await trainer.train({ maxItems: 1 });
      expect(trainer.learningRates).toEqual({ 'lr/agent_0': lr / 2, 'lr/agent_1': lr / 2 });
      expect(agents.map(weights)[0].some((w, i) => !w.every((x, j) => x === before[0][i][j]))).toBe(true);

      await trainer.train();
      // One train log per item: λ = 0, ½, then (8 − s)/6 for s = 2..7.
      const expected = [0, 0.5, 1, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6].map((f) => lr * f);
      const logged = logs.rows.filter((r) => 'lr/agent_0' in r);
      expect(logged.map((r) => r['lr/agent_0'])).toEqual(expected);
      expect(logged.map((r) => r['lr/agent_1'])).toEqual(expected);
    } finally {
      trainer.dispose();
    }
  });

  test('a constant schedule (the default) logs no rate and never changes one', async () => {
    const logs = collector();
    const trainer = new MAGRPOTrainer({ agents, env: new ToyCoordEnv(), trainTasks: toyTrainTasks.slice(0, 2), logger: logs, config: { ...base, num_generations: 2, num_train_epochs: 1, agent_learning_rate: 0.003 } });
    try {
      await trainer.train();
      expect(logs.rows.some((r) => Object.keys(r).some((k) => k.startsWith('lr/')))).toBe(false);
      expect(trainer.learningRates).toEqual({ 'lr/agent_0': 0.003, 'lr/agent_1': 0.003 });
    } finally {
      trainer.dispose();
    }
  });

  test('CoLLM-DC: the critics follow their own schedule, the actors theirs', async () => {
    const logs = collector();
    const tasks = toyTrainTasks.slice(0, 4);
    const trainer = new CoLLMDCTrainer({
      agents,
      critics,
      env: new ToyCoordEnv(),
      trainTasks: tasks,
      logger: logs,
      // T = 4. Actors: constant_with_warmup, W = 2. Critics: cosine, W = 0 (their own warmup keys are set).
      config: {
        ...base,
        num_train_epochs: 1,
        rollout_buffer_size: 1,
        agent_learning_rate: 0.01,
        critic_learning_rate: 0.04,
        lr_scheduler_type: 'constant_with_warmup',
        warmup_steps: 2,
        critic_lr_scheduler_type: 'cosine',
        critic_lr_warmup_steps: 0,
      },
    });
    try {
      await trainer.train();
      const logged = logs.rows.filter((r) => 'lr/agent_0' in r);
      expect(logged.map((r) => r['lr/agent_0'])).toEqual([0, 0.005, 0.01, 0.01]);
      // ½(1 + cos(π s/4)) for s = 0..3.
      const cosine = [0, 1, 2, 3].map((s) => 0.04 * (0.5 * (1 + Math.cos(Math.PI * (s / 4)))));
      expect(logged.map((r) => r['lr/critic_1'])).toEqual(cosine);
      expect(Object.keys(trainer.learningRates).sort()).toEqual(['lr/agent_0', 'lr/agent_1', 'lr/critic_0', 'lr/critic_1']);
      // The critic optimizers' state carries the rate in force (what a checkpoint stores).
      expect(trainer.criticOptimizers[0].getMeta().config.lr).toBe(cosine[3]);
    } finally {
      trainer.dispose();
    }
  });
});

describe.each([
  {
    name: 'magrpo',
    // 5 items × 2 epochs = T 10, W = 6: the stop after item 4 is mid-warmup.
    section: { rollout_buffer_size: 3, train_batch_size: 2, num_generations: 3, lr_scheduler_type: 'linear', warmup_steps: 6 },
    files: ['agent_0/model.safetensors', 'agent_1/model.safetensors'],
    // λ(s) = s/6 below 6, then (10 − s)/4; one train log per item.
    rates: { 'lr/agent_0': [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map((s) => 0.01 * (s < 6 ? s / 6 : (10 - s) / 4)) },
    atStop: [0.005, 0.005],
  },
  {
    name: 'collm-cc',
    // Actors: cosine with W = ⌈10 · 0.5⌉ = 5; the critic: linear without warmup.
    section: { lr_scheduler_type: 'cosine', warmup_ratio: 0.5, critic_lr_scheduler_type: 'linear', critic_lr_warmup_steps: 0, critic_learning_rate: 0.02 },
    critics: true,
    files: ['agent_0/model.safetensors', 'agent_1/model.safetensors', 'critic/model.safetensors', 'critic/value_head.safetensors'],
    rates: {},
    // Item 3: actors 0.01 · 3/5; the critic 0.02 · (10 − 3)/10.
    atStop: [0.01 * (3 / 5), 0.01 * (3 / 5), 0.02 * (7 / 10)],
  },
])('$name: a run stopped mid-warmup resumes to the bytes of the uninterrupted run', ({ name, section, critics, files, rates, atStop }) => {
  let root: string;
  let cleanup: () => Promise<void>;
  let agentDirs: string[];
  let criticDirs: string[];

  beforeAll(async () => {
    setBackendLogger(null);
    await initBackend(backendUnderTest('wasm'));
    ({ dir: root, cleanup } = await tempDir(`lr-resume-${name}`));
    agentDirs = await tinyModels(root, ['a0', 'a1']);
    criticDirs = await tinyModels(root, ['critic'], 9);
  });
  afterAll(async () => cleanup());

  async function train(run: string, extra: string[] = []): Promise<string> {
    const out = join(root, run);
    const file = join(root, `${run}.yaml`);
    const trainer = critics ? 'collm_cc' : 'magrpo';
    await writeFile(file, toyConfigYaml({ agents: agentDirs, ...(critics ? { critics: criticDirs } : {}), trainer, out, trainItems: 5, section }));
    const r = await cli(['train', '--config', file, ...extra]);
    expect(r.code, r.err).toBe(0);
    return out;
  }

  const rows = (runDir: string) =>
    readMetrics(join(runDir, 'metrics.jsonl'))
      .filter((r) => !('run/backend' in r))
      .map((r) => Object.fromEntries(Object.entries(r).filter(([k]) => !k.startsWith('perf/') && !k.startsWith('time/') && !k.endsWith('time_s'))));

  test('same weights, optimizer state and logged rates', async () => {
    const straight = await train('straight');
    const stopped = await train('stopped', ['--stop-after', '4']);
    const state = JSON.parse(await readFile(join(stopped, 'checkpoints', 'step-000004', 'trainer_state.json'), 'utf8')) as { optimizers: { config: { lr: number } }[] };
    // The checkpoint records each optimizer's rate in force: that of its last item (s = 3).
    expect(state.optimizers.map((o) => o.config.lr)).toEqual(atStop);
    const r = await cli(['train', '--resume', stopped]);
    expect(r.code, r.err).toBe(0);
    for (const f of files) {
      expect((await readFile(join(stopped, 'final', f))).equals(await readFile(join(straight, 'final', f))), f).toBe(true);
    }
    const opt = (d: string) => readFile(join(d, 'checkpoints', 'step-000008', 'optimizer.safetensors'));
    expect((await opt(stopped)).equals(await opt(straight))).toBe(true);
    expect(rows(stopped)).toEqual(rows(straight));
    const logged = rows(straight).filter((m) => 'lr/agent_0' in m);
    expect(logged.length).toBeGreaterThan(0);
    if (critics) expect(logged.every((m) => typeof m['lr/critic_0'] === 'number')).toBe(true);
    for (const [key, values] of Object.entries(rates)) expect(logged.map((m) => m[key])).toEqual(values);
  });
});
