/**
 * One run per output directory, and a failed start leaves nothing behind:
 * - two `comlrl train` runs started together on one directory: one trains, the other is refused
 *   naming the lock's owner (pid, host) and the lock file; the same for two `--resume` runs, and a
 *   resume resolved before another run continued the run is refused once it gets the lock;
 * - a lock left by a process that no longer runs is named and taken over; one of another host is
 *   refused with the command that clears it; the lock is gone once a run ends (done or failed);
 * - a new run that fails before its first training item (here: MARLHF's phase 1 finds no
 *   preference pairs) removes what it created, never what was in the directory before, so the
 *   same command runs once the cause is fixed; a resumed run that fails removes nothing.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { stringify } from 'yaml';
import { readMetrics } from '../src/logging/metrics.js';
import { resolveResume, runTraining } from '../cli/run.js';
import { loadConfig } from '../cli/schemas.js';
import { cli, snapshot, toyConfigYaml, useCliWorkspace, type CliRun } from './cli-helpers.js';

const ws = useCliWorkspace('cli-run-lock');

/** Writes a toy run config for `out` (2 items, checkpoint every item, no plots) and returns its file. */
async function config(name: string, out: string, output: Record<string, unknown> = {}): Promise<string> {
  const file = join(ws.root, `${name}.yaml`);
  await writeFile(file, toyConfigYaml({ agents: ws.agents, out, trainItems: 2, output: { plots: false, save_steps: 1, ...output } }));
  return file;
}

/** The run/* header rows of a run's metrics.jsonl: one per session that wrote into it. */
function sessions(runDir: string): number {
  return readMetrics(join(runDir, 'metrics.jsonl')).filter((r) => 'run/backend' in r).length;
}

/** A pid no process has now (a child that has exited). */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', '0']);
  if (r.pid === undefined) throw new Error('could not start a child process');
  return r.pid;
}

const lockText = (o: Record<string, unknown>) => `${JSON.stringify({ started_at: '2026-01-01T00:00:00.000Z', command: 'comlrl train', token: 'feedc0de', ...o })}\n`;

function oneRefused(a: CliRun, b: CliRun): { ok: CliRun; refused: CliRun } {
  const codes = [a.code, b.code].sort();
  expect(codes, `${a.err}\n---\n${b.err}`).toEqual([0, 1]);
  return a.code === 0 ? { ok: a, refused: b } : { ok: b, refused: a };
}

test('two train runs started together on one output directory: one trains, the other is refused naming the lock owner; one session in the run', async () => {
  const out = join(ws.root, 'twin');
  const file = await config('twin', out);
  const [a, b] = await Promise.all([cli(['train', '--config', file]), cli(['train', '--config', file])]);
  const { refused } = oneRefused(a, b);
  expect(refused.err).toContain(`output directory ${out} is in use by another comlrl run: pid ${process.pid} on host ${hostname()}`);
  expect(refused.err).toContain(`rm ${join(out, 'run.lock')}`);
  expect(sessions(out)).toBe(1);
  // Released at the end: the lock is gone and the finished run refuses a third start as before.
  expect(existsSync(join(out, 'run.lock'))).toBe(false);
  const again = await cli(['train', '--config', file]);
  expect(again.code).toBe(1);
  expect(again.err).toContain('already holds a run');
});

test('two --resume runs of one run directory: one resumes, the other is refused; the resumed steps are logged once', async () => {
  const out = join(ws.root, 'twin-resume');
  const file = await config('twin-resume', out, { save_steps: 2 });
  const first = await cli(['train', '--config', file, '--stop-after', '1']);
  expect(first.code, first.err).toBe(0);
  const [a, b] = await Promise.all([cli(['train', '--resume', out]), cli(['train', '--resume', out])]);
  const { refused } = oneRefused(a, b);
  expect(refused.err).toContain('is in use by another comlrl run');
  expect(sessions(out)).toBe(2);
  // Each of the 4 items (2 × 2 epochs) logged its row once (env steps 2, 4, 6, 8: one turn of 2 agents).
  const items = readMetrics(join(out, 'metrics.jsonl')).filter((r) => 'turn_1/reward_mean' in r).map((r) => r.step);
  expect(items).toEqual([2, 4, 6, 8]);
});

test('a resume resolved before another run continued the run is refused at its lock, naming both checkpoints', async () => {
  const out = join(ws.root, 'moved-on');
  const file = await config('moved-on', out, { save_steps: 2 });
  expect((await cli(['train', '--config', file, '--stop-after', '1'])).code).toBe(0);
  const cfg = loadConfig(join(out, 'config.yaml'), []);
  // Resolved now (at step 1), started only after another resume has finished the run.
  const late = await resolveResume(out, cfg);
  const other = await cli(['train', '--resume', out]);
  expect(other.code, other.err).toBe(0);
  const before = await snapshot(out);
  await expect(runTraining({ config: cfg, resume: late, log: () => {} })).rejects.toThrow(
    `the run in ${out} moved on while this resume was starting (another run continued it): its newest checkpoint is now ${join(out, 'checkpoints', 'step-000004')}, not ${join(out, 'checkpoints', 'step-000001')}`,
  );
  expect(await snapshot(out)).toEqual(before);
});

test('a stale lock (its process is gone) is named and taken over; the lock is removed when the run ends', async () => {
  const out = join(ws.root, 'stale');
  await mkdir(out);
  const pid = deadPid();
  await writeFile(join(out, 'run.lock'), lockText({ pid, host: hostname() }));
  const r = await cli(['train', '--config', await config('stale', out)]);
  expect(r.code, r.err).toBe(0);
  expect(r.err).toContain(`taking over the stale lock ${join(out, 'run.lock')} of pid ${pid} on host ${hostname()}`);
  expect(existsSync(join(out, 'run.lock'))).toBe(false);
  expect(existsSync(join(out, 'final'))).toBe(true);
});

test("another host's lock is refused with the command that clears it; nothing is written", async () => {
  const out = join(ws.root, 'remote');
  await mkdir(out);
  const lock = join(out, 'run.lock');
  await writeFile(lock, lockText({ pid: 1, host: 'elsewhere-node-7' }));
  const before = await snapshot(out);
  const r = await cli(['train', '--config', await config('remote', out)]);
  expect(r.code).toBe(1);
  expect(r.err).toContain(`output directory ${out} is locked by a comlrl run on another host: pid 1 on host elsewhere-node-7`);
  expect(r.err).toContain(`If that run is over, remove the lock: rm ${lock}`);
  expect(await snapshot(out)).toEqual(before);
});

/** A MARLHF toy run whose reward processor scales every reward to 0 (`scale`): phase 1 then finds no pairs. */
async function marlhfConfig(name: string, out: string, scale: number): Promise<string> {
  const file = join(ws.root, `${name}.yaml`);
  await writeFile(
    file,
    stringify({
      model: { agents: ws.agents, critic_model: ws.agents[0], temperature: 1, top_p: 1, top_k: null },
      dataset: { task: 'toy-coord', train_split: '[:2]', eval_split: '[:2]' },
      marlhf: { num_generations: 2, max_new_tokens: 2, num_train_epochs: 1, logging_steps: 1, eval_interval: 0, eval_num_samples: 2, eval_batch_size: 2, preference_num_candidates: 3, preference_pairs_per_sample: 2, reward_train_batch_size: 2, reward_num_train_epochs: 1 },
      reward_processor: { enabled: true, scale, shift: 0 },
      output: { dir: out, save_steps: 1, plots: false },
      seed: 3,
    }),
  );
  return file;
}

test('a new run that fails in its first item (MARLHF finds no preference pairs) leaves no run directory; the rerun works once fixed', async () => {
  const out = join(ws.root, 'nopairs', 'run');
  const file = await marlhfConfig('nopairs', out, 0);
  const r = await cli(['train', '--config', file]);
  expect(r.code).toBe(1);
  expect(r.err).toContain('MARLHF: no preference pairs');
  expect(r.err).toContain('the run failed before its first training item');
  // Neither the run directory nor the parent `mkdir -p` made for it is left.
  expect(existsSync(join(ws.root, 'nopairs'))).toBe(false);
  const fixed = await cli(['train', '--config', await marlhfConfig('nopairs', out, 1)]);
  expect(fixed.code, fixed.err).toBe(0);
  expect(existsSync(join(out, 'final'))).toBe(true);
});

test("a failed start in a directory the user made removes only what it wrote there: the user's files stay", async () => {
  const out = join(ws.root, 'mine');
  await mkdir(out);
  await writeFile(join(out, 'notes.txt'), 'my notes\n');
  const r = await cli(['train', '--config', await marlhfConfig('mine', out, 0)]);
  expect(r.code).toBe(1);
  expect(await readdir(out)).toEqual(['notes.txt']);
  expect(await readFile(join(out, 'notes.txt'), 'utf8')).toBe('my notes\n');
});
