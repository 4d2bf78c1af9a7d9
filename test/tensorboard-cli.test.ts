/**
 * TensorBoard logs of real runs. `logging.tensorboard: true` in a `comlrl train` run: the event file
 * in `<run>/tensorboard/` holds one event per metrics.jsonl row, with its step and every numeric
 * value (train, eval, perf/* and run/* columns alike), and after a kill that left rows past the
 * checkpoint (and a torn record) the resumed run's event file again matches metrics.jsonl exactly:
 * no step shows twice. From a script, `tensorBoardCallback` writes what the trainer logs in `train()`.
 */
import { appendFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { parse, stringify } from 'yaml';
import { MetricsLogger, readMetrics, type MetricsRow } from '../src/logging/metrics.js';
import { encodeScalarEvent, TensorBoardWriter } from '../src/logging/tensorboard.js';
import { frameRecord } from '../src/logging/tfrecord.js';
import { backendUnderTest } from './backend-under-test.js';
import { cli, toyConfigYaml, useCliWorkspace } from './cli-helpers.js';
import { readEventDir } from './tensorboard-reader.js';
import { ToyCoordEnv, toyEvalTasks, toyTrainTasks, toyWords } from '../envs/toy/index.js';
import { tensorBoardCallback } from '../trainers/core/tensorboard.js';
import { MAGRPOTrainer } from '../trainers/magrpo/trainer.js';
import { disposeAgents, tinyAgents } from './magrpo-helpers.js';

const ws = useCliWorkspace('tensorboard-cli', { backend: backendUnderTest('wasm') });

/** What a metrics row becomes as scalars: numbers in float32, booleans 1/0, null NaN; strings left out. */
function expectedScalars(row: MetricsRow): { tag: string; value: number }[] {
  return Object.entries(row)
    .filter(([k, v]) => k !== 'step' && typeof v !== 'string')
    .map(([tag, v]) => ({ tag, value: v === null ? Number.NaN : Math.fround(Number(v)) }));
}

/** The run's event file holds metrics.jsonl row for row; returns the rows. */
function expectEventsMatchMetrics(runDir: string): MetricsRow[] {
  const rows = readMetrics(join(runDir, 'metrics.jsonl'));
  const { events } = readEventDir(join(runDir, 'tensorboard'));
  expect(events[0].fileVersion).toBe('brain.Event:2');
  expect(events.slice(1).map((e) => ({ step: e.step, scalars: e.scalars }))).toEqual(rows.map((r) => ({ step: r.step, scalars: expectedScalars(r) })));
  // Every numeric key of metrics.jsonl is a TensorBoard tag.
  const keys = new Set(rows.flatMap((r) => Object.entries(r).filter(([k, v]) => k !== 'step' && typeof v !== 'string').map(([k]) => k)));
  const tags = new Set(events.flatMap((e) => (e.scalars ?? []).map((s) => s.tag)));
  expect([...tags].sort()).toEqual([...keys].sort());
  return rows;
}

test('logging.tensorboard writes every metric of metrics.jsonl; a resume after a kill shows no step twice', async () => {
  const out = join(ws.root, 'run');
  const file = join(ws.root, 'run.yaml');
  const doc = parse(toyConfigYaml({ agents: ws.agents, out, trainItems: 3 })) as Record<string, unknown>;
  await writeFile(file, stringify({ ...doc, logging: { tensorboard: true } }));

  const stopped = await cli(['train', '--config', file, '--stop-after', '2']);
  expect(stopped.code, stopped.err).toBe(0);
  const before = expectEventsMatchMetrics(out);
  const keys = new Set(before.flatMap((r) => Object.keys(r)));
  for (const k of ['turn_1/reward_mean', 'eval/turn_1/mean_reward', 'perf/tokens_per_s', 'run/seed']) expect(keys).toContain(k);

  // A kill -9 after the checkpoint: the run logged another row to both files, then died mid-record.
  const { file: eventFile } = readEventDir(join(out, 'tensorboard'));
  await appendFile(join(out, 'metrics.jsonl'), `${JSON.stringify({ step: 999, 'turn_1/reward_mean': 5 })}\n`);
  await appendFile(eventFile, frameRecord(encodeScalarEvent(1, 999, [{ tag: 'turn_1/reward_mean', value: 5 }])));
  await appendFile(eventFile, frameRecord(encodeScalarEvent(2, 1000, [{ tag: 'turn_1/reward_mean', value: 6 }])).subarray(0, 20));

  const resumed = await cli(['train', '--resume', out]);
  expect(resumed.code, resumed.err).toBe(0);
  const after = expectEventsMatchMetrics(out);
  expect(after.length).toBeGreaterThan(before.length);
  expect(after.some((r) => r.step === 999)).toBe(false);
  // The resumed session starts at the checkpoint's rows: the first session's events are kept as they were.
  expect(after.slice(0, before.length)).toEqual(before);
  expect(readEventDir(join(out, 'tensorboard')).file).toBe(eventFile);
}, 300_000);

test('tensorBoardCallback: the rows a library trainer logs, at their env steps', async () => {
  const dir = join(ws.root, 'library');
  const agentsLoaded = await tinyAgents(dir, [0, 1].map((i) => ({ name: `a${i}`, arch: 'qwen3' as const, seed: 5 + i, words: [...toyWords] })));
  try {
    const logger = MetricsLogger.open(join(dir, 'metrics.jsonl'));
    const trainer = new MAGRPOTrainer({
      agents: agentsLoaded,
      env: new ToyCoordEnv(),
      trainTasks: toyTrainTasks.slice(0, 3),
      evalTasks: toyEvalTasks,
      logger,
      config: { num_turns: 1, num_generations: 2, max_new_tokens: 2, temperature: 1, top_p: 1, top_k: 0, agent_learning_rate: 1e-2, num_train_epochs: 1, eval_interval: 2, eval_num_samples: 2, logging_steps: 1, rollout_buffer_size: 2, seed: 0 },
    });
    const tb = TensorBoardWriter.open(join(dir, 'tensorboard'));
    await trainer.train({ callbacks: [tensorBoardCallback(tb)] });
    const rows = logger.rows();
    expect(rows.some((r) => 'eval/turn_1/mean_reward' in r)).toBe(true);
    const { events } = readEventDir(join(dir, 'tensorboard'));
    expect(events.slice(1).map((e) => ({ step: e.step, scalars: e.scalars }))).toEqual(rows.map((r) => ({ step: r.step, scalars: expectedScalars(r) })));
  } finally {
    disposeAgents(agentsLoaded);
  }
}, 300_000);
