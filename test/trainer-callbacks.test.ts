/**
 * Training callbacks (trainers/core/callbacks.ts) as a library user sees them, on a short MAGRPO
 * run of real tiny checkpoints: the events and their order, stopping the run through the control
 * (and continuing it exactly), checkpoints on request, logs without a logger, and the end of a
 * run that throws.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { initBackend } from '../src/backend/init.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { ToyCoordEnv, toyEvalTasks, toyTrainTasks, toyWords, type ToyState, type ToyTask } from '../envs/toy/index.js';
import { MAGRPOTrainer, type MAGRPOConfigInput, type MetricRecord, type TrainerCallback } from '../trainers/index.js';
import { disposeAgents, tempDir, tinyAgents } from './magrpo-helpers.js';

/** One-token completions, every item logged, one epoch of three items. */
const CONFIG: MAGRPOConfigInput = {
  max_new_tokens: 1,
  temperature: 1,
  top_p: 1,
  top_k: 0,
  num_turns: 1,
  num_generations: 2,
  rollout_buffer_size: 2,
  train_batch_size: 2,
  agent_learning_rate: 1e-2,
  logging_steps: 1,
  num_train_epochs: 1,
  eval_interval: 0,
  eval_num_samples: 2,
  eval_batch_size: 2,
  seed: 3,
};
const TASKS = toyTrainTasks.slice(0, 3);

/** Writes each event (but logs) as a short line, and the log rows apart. */
function recorder(name: string, lines: string[], logs: { envStep: number; metrics: MetricRecord }[] = []): TrainerCallback {
  return {
    onTrainBegin: (e) => void lines.push(`${name} train-begin step ${e.step}/${e.totalSteps}`),
    onItemBegin: (e) => void lines.push(`${name} item-begin ${e.epoch}:${e.index} step ${e.step}`),
    onEvaluate: (e) => void lines.push(`${name} evaluate step ${e.step} ${Object.keys(e.metrics).some((k) => k.startsWith('eval/'))}`),
    onItemEnd: (e) => void lines.push(`${name} item-end ${e.epoch}:${e.index} step ${e.step} cursor ${e.cursor.epoch}:${e.cursor.index}`),
    onSave: (e) => void lines.push(`${name} save step ${e.step} ${e.dir}`),
    onLog: (e) => void logs.push({ envStep: e.envStep, metrics: e.metrics }),
    onTrainEnd: (e) => void lines.push(`${name} train-end ${e.reason} step ${e.step}`),
  };
}

describe('training callbacks', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  const made: Agent[][] = [];
  const fresh = async (name: string): Promise<Agent[]> => {
    const agents = await tinyAgents(dir, [
      { name: `${name}-a`, arch: 'qwen3', seed: 11, words: [...toyWords] },
      { name: `${name}-b`, arch: 'qwen3', seed: 12, words: [...toyWords] },
    ]);
    made.push(agents);
    return agents;
  };
  const trainer = (agents: Agent[], config: MAGRPOConfigInput = CONFIG, withLogger?: (step: number, m: MetricRecord) => void) =>
    new MAGRPOTrainer<ToyTask, ToyState>({ agents, env: new ToyCoordEnv(), trainTasks: TASKS, evalTasks: toyEvalTasks, config, ...(withLogger ? { logger: { log: withLogger } } : {}) });
  const weights = (as: readonly Agent[]) => as.map((a) => a.model.trainableVariables().map((v) => Array.from(v.dataSync())));

  beforeAll(async () => {
    await initBackend('wasm');
    ({ dir, cleanup } = await tempDir('callbacks'));
  });
  afterAll(async () => {
    for (const a of made) disposeAgents(a);
    await cleanup();
  });

  test('a run sends its events in order; train end goes to the callbacks in reverse order', async () => {
    const t = trainer(await fresh('order'), { ...CONFIG, eval_interval: 2 });
    const lines: string[] = [];
    const logs: { envStep: number; metrics: MetricRecord }[] = [];
    const order: string[] = [];
    const mark = (n: string): TrainerCallback => ({ onTrainBegin: () => void order.push(`${n} begin`), onTrainEnd: () => void order.push(`${n} end`) });
    await t.train({
      onItemEnd: ({ epoch, index }) => void lines.push(`legacy item-end ${epoch}:${index}`),
      callbacks: [recorder('A', lines, logs), mark('X'), mark('Y')],
    });
    expect(lines).toEqual([
      'A train-begin step 0/3',
      'A item-begin 0:0 step 0',
      'A evaluate step 0 true',
      'legacy item-end 0:0',
      'A item-end 0:0 step 1 cursor 0:1',
      'A item-begin 0:1 step 1',
      'legacy item-end 0:1',
      'A item-end 0:1 step 2 cursor 0:2',
      'A item-begin 0:2 step 2',
      'A evaluate step 2 true',
      'legacy item-end 0:2',
      'A item-end 0:2 step 3 cursor 0:3',
      'A train-end finished step 3',
    ]);
    // The first to begin is the last to end.
    expect(order).toEqual(['X begin', 'Y begin', 'Y end', 'X end']);
    // No logger was given, but a callback listens: train rows and both evaluations are logged.
    const evalRows = logs.filter((l) => Object.keys(l.metrics).some((k) => k.startsWith('eval/')));
    expect(evalRows).toHaveLength(2);
    expect(logs.length).toBeGreaterThan(evalRows.length);
    expect(logs.every((l) => l.envStep >= 0)).toBe(true);
    t.dispose();
  });

  test('a callback stops the run at an item end; a later train() continues to the same weights as one straight run', async () => {
    const straightAgents = await fresh('straight');
    const straight = trainer(straightAgents);
    await straight.train();

    const agents = await fresh('stopped');
    const t = trainer(agents);
    const lines: string[] = [];
    const stopAt2: TrainerCallback = {
      onItemEnd: ({ step }, control) => {
        if (step === 2) control.stop = true;
      },
    };
    await t.train({ callbacks: [stopAt2, recorder('A', lines)] });
    expect(lines.slice(-2)).toEqual(['A item-end 0:1 step 2 cursor 0:2', 'A train-end stopped step 2']);
    expect(t.datasetCursor).toEqual({ epoch: 0, index: 2 });

    // A stop at train begin trains nothing.
    lines.length = 0;
    await t.train({ callbacks: [{ onTrainBegin: (_e, control) => void (control.stop = true) }, recorder('A', lines)] });
    expect(lines).toEqual(['A train-begin step 2/3', 'A train-end stopped step 2']);

    lines.length = 0;
    await t.train({ callbacks: [recorder('A', lines)] });
    expect(lines[0]).toBe('A train-begin step 2/3');
    expect(lines[lines.length - 1]).toBe('A train-end finished step 3');
    expect(t.envSteps).toBe(straight.envSteps);
    expect(weights(agents)).toEqual(weights(straightAgents));
    straight.dispose();
    t.dispose();
  });

  test('control.save writes a checkpoint through saveCheckpoint, then onSave; maxItems ends with max-items', async () => {
    const t = trainer(await fresh('save'));
    const lines: string[] = [];
    const saved: number[] = [];
    await t.train({
      maxItems: 2,
      callbacks: [{ onItemEnd: ({ step }, control) => void (control.save = step === 1) }, recorder('A', lines)],
      saveCheckpoint: async ({ step }) => {
        saved.push(step);
        return `${dir}/ckpt-${step}`;
      },
    });
    expect(saved).toEqual([1]);
    expect(lines).toContain(`A save step 1 ${dir}/ckpt-1`);
    expect(lines.indexOf(`A save step 1 ${dir}/ckpt-1`)).toBe(lines.indexOf('A item-end 0:0 step 1 cursor 0:1') + 1);
    expect(lines[lines.length - 1]).toBe('A train-end max-items step 2');
    t.dispose();
  });

  test('a run that throws still sends train end (reason error) and rethrows; a save request without saveCheckpoint is an error', async () => {
    const t = trainer(await fresh('error'));
    const lines: string[] = [];
    await expect(t.train({ callbacks: [{ onItemEnd: (_e, control) => void (control.save = true) }, recorder('A', lines)] })).rejects.toThrow(
      /a callback asked for a checkpoint \(control\.save\) but train\(\) was given no saveCheckpoint/,
    );
    expect(lines[lines.length - 1]).toBe('A train-end error step 1');
    t.dispose();
  });

  test('with a logger too, the logger and onLog get the same rows', async () => {
    const sink: MetricRecord[] = [];
    const heard: MetricRecord[] = [];
    const t = trainer(await fresh('both'), CONFIG, (_step, m) => void sink.push(m));
    await t.train({ callbacks: [{ onLog: ({ metrics }) => void heard.push(metrics) }] });
    expect(heard.length).toBeGreaterThan(0);
    expect(heard).toEqual(sink);
    t.dispose();
  });
});
