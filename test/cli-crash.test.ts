/**
 * Crashes and signals at named moments, on a real `comlrl` process (node dist/cli/main.js): kill -9
 * while final/ or the first checkpoint is written, Ctrl-C with no checkpoint due, a second Ctrl-C
 * during the checkpoint write, SIGTERM to `demo`, Ctrl-C during `eval`. Each run must recover with
 * `train --resume` and end with final weights byte-identical to an uninterrupted run's.
 *
 * The moment is reached with the test hook COMLRL_TEST_PAUSE_AT (cli/test-pause.ts): the process
 * prints a marker and waits there; the test then sends a real signal to it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { verifyCheckpoint } from '../src/checkpoint/atomic.js';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import { cli, tempDir, tinyModels, toyConfigYaml } from './cli-helpers.js';

const MAIN = resolve('dist/cli/main.js');

let root: string;
let cleanup: () => Promise<void>;
let configFile: string;
/** SHA-256 of each final/agent_i/model.safetensors of the uninterrupted run. */
let reference: string[];

/** A running CLI child: its stderr so far, a wait for a line, and its exit. */
interface Child {
  readonly proc: ChildProcess;
  stderr(): string;
  waitFor(re: RegExp, ms?: number): Promise<void>;
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function spawnCli(args: readonly string[], env: Record<string, string> = {}): Child {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run npm run build (npm test does) first`);
  const proc = spawn(process.execPath, [MAIN, ...args], { env: { ...process.env, COMLRL_BACKEND: 'wasm', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  const waiters: { re: RegExp; resolve: () => void }[] = [];
  const check = () => {
    for (const w of [...waiters]) if (w.re.test(err)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve();
    }
  };
  proc.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
    check();
  });
  proc.stdout?.resume();
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) => proc.on('exit', (code, signal) => res({ code, signal })));
  return {
    proc,
    stderr: () => err,
    exit,
    waitFor: (re, ms = 90_000) =>
      new Promise<void>((res, rej) => {
        const timer = setTimeout(() => rej(new Error(`timed out waiting for ${re} in stderr:\n${err}`)), ms);
        const done = () => {
          clearTimeout(timer);
          res();
        };
        waiters.push({ re, resolve: done });
        check();
        void exit.then(() => setTimeout(() => rej(new Error(`process exited before ${re}; stderr:\n${err}`)), 50));
      }),
  };
}

async function finalHashes(runDir: string): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; existsSync(join(runDir, 'final', `agent_${i}`)); i++) {
    out.push(createHash('sha256').update(await readFile(join(runDir, 'final', `agent_${i}`, 'model.safetensors'))).digest('hex'));
  }
  return out;
}

const stepCheckpoints = async (runDir: string) => (existsSync(join(runDir, 'checkpoints')) ? (await readdir(join(runDir, 'checkpoints'))).filter((n) => /^step-\d+$/.test(n)).sort() : []);

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend('wasm');
  ({ dir: root, cleanup } = await tempDir('cli-crash'));
  const agents = await tinyModels(root, ['a0', 'a1']);
  configFile = join(root, 'run.yaml');
  // 8 items × 2 epochs = 16 steps; checkpoints every 6 (steps 6, 12): the last one is before the end.
  await writeFile(configFile, toyConfigYaml({ agents, out: join(root, 'unused'), trainItems: 8, section: { eval_interval: 0 }, output: { save_steps: 6 } }));
  const ref = await cli(['train', '--config', configFile, '--set', `output.dir=${join(root, 'reference')}`]);
  expect(ref.code, ref.err).toBe(0);
  reference = await finalHashes(join(root, 'reference'));
  expect(reference.length).toBe(2);
});
afterAll(async () => cleanup());

test('kill -9 while final/ is written: no truncated final/; resume rebuilds it equal to an uninterrupted run', async () => {
  const run = join(root, 'kill-final');
  const child = spawnCli(['train', '--config', configFile, '--set', `output.dir=${run}`], { COMLRL_TEST_PAUSE_AT: 'final-write', COMLRL_TEST_PAUSE_MS: '60000' });
  await child.waitFor(/\[comlrl-test\] paused at final-write step 16/);
  child.proc.kill('SIGKILL');
  expect((await child.exit).signal).toBe('SIGKILL');
  // The weights were half-way to final/: only a temporary folder exists, never final/ itself.
  expect(existsSync(join(run, 'final'))).toBe(false);
  expect((await readdir(run)).some((n) => n.startsWith('.final.tmp-'))).toBe(true);
  // eval of the run says final/ is missing and uses the newest checkpoint instead of a broken model.
  const ev = await cli(['eval', '--config', configFile, '--checkpoint', run, '--limit', '2']);
  expect(ev.code, ev.err).toBe(0);
  expect(ev.err).toMatch(/has no final\/ \(the run has not finished\): evaluating its newest checkpoint step-000012/);

  const r = await cli(['train', '--resume', run]);
  expect(r.code, r.err).toBe(0);
  expect(r.err).toMatch(/resuming .*step-000012 at step 12\/16/);
  expect(await finalHashes(run)).toEqual(reference);
  await verifyCheckpoint(join(run, 'final'));
  expect((await readdir(run)).filter((n) => n.startsWith('.'))).toEqual([]);
  const again = await cli(['train', '--resume', run]);
  expect(again.err).toMatch(/already complete \(step 16\/16\)/);
});

test('kill -9 while final/ is written, with a checkpoint at the last step: resume rebuilds final/ from it without training', async () => {
  const run = join(root, 'kill-final-at-end');
  const child = spawnCli(['train', '--config', configFile, '--set', `output.dir=${run}`, '--set', 'output.save_steps=8'], { COMLRL_TEST_PAUSE_AT: 'final-write', COMLRL_TEST_PAUSE_MS: '60000' });
  await child.waitFor(/\[comlrl-test\] paused at final-write step 16/);
  child.proc.kill('SIGKILL');
  await child.exit;
  expect(await stepCheckpoints(run)).toEqual(['step-000008', 'step-000016']);
  const r = await cli(['train', '--resume', run]);
  expect(r.code, r.err).toBe(0);
  expect(r.err).toMatch(/final\/ of .* is missing or incomplete: rebuilding it from .*step-000016/);
  // No training step runs: the progress bar starts, and stays, at 16/16.
  expect(r.err).not.toMatch(/^magrpo (\d|1[0-5])\/16/m);
  expect(await finalHashes(run)).toEqual(reference);
});

test('kill -9 during the first checkpoint write: a rerun says how to proceed; --resume starts again from step 0', async () => {
  const run = join(root, 'kill-first-ckpt');
  const child = spawnCli(['train', '--config', configFile, '--set', `output.dir=${run}`], { COMLRL_TEST_PAUSE_AT: 'checkpoint-write', COMLRL_TEST_PAUSE_MS: '60000' });
  await child.waitFor(/\[comlrl-test\] paused at checkpoint-write step 6/);
  child.proc.kill('SIGKILL');
  await child.exit;
  expect(await stepCheckpoints(run)).toEqual([]);
  // The killed run could not release its lock: the next run names it as stale and takes it over.
  const lock = JSON.parse(await readFile(join(run, 'run.lock'), 'utf8')) as { pid: number };
  expect(lock.pid).toBe(child.proc.pid);

  const rerun = await cli(['train', '--config', configFile, '--set', `output.dir=${run}`]);
  expect(rerun.code).toBe(1);
  expect(rerun.err).toContain(`taking over the stale lock ${join(run, 'run.lock')} of pid ${child.proc.pid} on host`);
  expect(rerun.err).toContain(`already holds a run; --resume ${run} starts it again from step 0 (it has no checkpoint yet)`);
  const r = await cli(['train', '--resume', run]);
  expect(r.code, r.err).toBe(0);
  expect(r.err).toMatch(/has no checkpoint yet \(the run stopped before its first one\): starting it again from step 0/);
  expect(await finalHashes(run)).toEqual(reference);
  expect(await stepCheckpoints(run)).toEqual(['step-000006', 'step-000012']);
  expect((await readdir(join(run, 'checkpoints'))).filter((n) => n.startsWith('.'))).toEqual([]);
});

test('Ctrl-C with no checkpoint due stops at the next item with a checkpoint, exit 130; resume matches', async () => {
  const run = join(root, 'sigint');
  // The process blocks after item 3 as a long item's tensor work would; the signal lands then.
  const child = spawnCli(['train', '--config', configFile, '--set', `output.dir=${run}`, '--set', 'output.save_steps=1000'], { COMLRL_TEST_PAUSE_AT: 'item-end@3', COMLRL_TEST_PAUSE_MS: '1000' });
  await child.waitFor(/\[comlrl-test\] paused at item-end step 3/);
  child.proc.kill('SIGINT');
  const { code } = await child.exit;
  const err = child.stderr();
  expect(code, err).toBe(130);
  expect(err).toMatch(/interrupt: stopping after the current item and writing a checkpoint/);
  const m = /stopped at step (\d+)\/16 \(checkpoint written\); continue with: npx comlrl train --resume (\S+)/.exec(err);
  expect(m, err).not.toBeNull();
  const step = Number(m?.[1]);
  expect(step).toBe(3);
  expect(err).toContain(`[comlrl] checkpoint: ${join(run, 'checkpoints', `step-${String(step).padStart(6, '0')}`)}`);
  expect(await stepCheckpoints(run)).toEqual([`step-${String(step).padStart(6, '0')}`]);
  const r = await cli(['train', '--resume', run]);
  expect(r.code, r.err).toBe(0);
  expect(await finalHashes(run)).toEqual(reference);
});

test('a second Ctrl-C during the checkpoint write waits for it, says so, and leaves a complete checkpoint', async () => {
  const run = join(root, 'double');
  const child = spawnCli(['train', '--config', configFile, '--set', `output.dir=${run}`, '--set', 'output.save_steps=1000'], { COMLRL_TEST_PAUSE_AT: 'item-end@5,checkpoint-write', COMLRL_TEST_PAUSE_MS: '1500' });
  await child.waitFor(/\[comlrl-test\] paused at item-end step 5/);
  child.proc.kill('SIGINT');
  await child.waitFor(/\[comlrl-test\] paused at checkpoint-write/);
  child.proc.kill('SIGINT');
  const { code } = await child.exit;
  const err = child.stderr();
  expect(code, err).toBe(130);
  expect(err).toMatch(/interrupt again: a checkpoint is being written; quitting as soon as it is complete/);
  expect(err).toMatch(/checkpoint complete; quitting; continue with: npx comlrl train --resume \S*double$/m);
  // process.exit on the second Ctrl-C still removed the run's lock.
  expect(existsSync(join(run, 'run.lock'))).toBe(false);
  expect(await stepCheckpoints(run)).toEqual(['step-000005']);
  await verifyCheckpoint(join(run, 'checkpoints', 'step-000005'));
  const r = await cli(['train', '--resume', run]);
  expect(r.code, r.err).toBe(0);
  expect(await finalHashes(run)).toEqual(reference);
});

test('two Ctrl-C while final/ is written: the write completes, nothing is lost, the run is complete', async () => {
  const run = join(root, 'double-final');
  const child = spawnCli(['train', '--config', configFile, '--set', `output.dir=${run}`], { COMLRL_TEST_PAUSE_AT: 'final-write', COMLRL_TEST_PAUSE_MS: '3000' });
  await child.waitFor(/\[comlrl-test\] paused at final-write step 16/);
  child.proc.kill('SIGINT');
  await child.waitFor(/\[comlrl\] interrupt: /);
  child.proc.kill('SIGINT');
  const { code } = await child.exit;
  const err = child.stderr();
  expect(code, err).toBe(130);
  expect(err).toMatch(/a checkpoint is being written; quitting as soon as it is complete/);
  await verifyCheckpoint(join(run, 'final'));
  expect(await finalHashes(run)).toEqual(reference);
  const evals = JSON.parse(await readFile(join(run, 'eval.json'), 'utf8')) as { before?: unknown; after?: unknown };
  expect(evals.before).toBeDefined();
  expect(evals.after).toBeDefined();
  const again = await cli(['train', '--resume', run]);
  expect(again.code, again.err).toBe(0);
  expect(again.err).toMatch(/already complete \(step 16\/16\)/);
});

test('SIGTERM stops `demo` with a checkpoint and a resume hint (exit 130)', async () => {
  const out = join(root, 'demo');
  const child = spawnCli(['demo', '--steps', '32', '--out', out, '--cache', join(root, 'cache')], { COMLRL_TEST_PAUSE_AT: 'item-end@4', COMLRL_TEST_PAUSE_MS: '1000' });
  await child.waitFor(/\[comlrl-test\] paused at item-end step 4/);
  child.proc.kill('SIGTERM');
  const { code } = await child.exit;
  const err = child.stderr();
  expect(code, err).toBe(130);
  expect(err).toMatch(/interrupt \(SIGTERM\): stopping after the current item and writing a checkpoint/);
  expect(err).toMatch(/continue with: npx comlrl train --resume /);
  expect(await stepCheckpoints(out)).toEqual(['step-000004']);
});

test('Ctrl-C during `eval` stops at the next batch with exit 130 and writes nothing; eval shows progress', async () => {
  const report = join(root, 'eval.json');
  const child = spawnCli(['eval', '--config', configFile, '--samples', '256', '--out', report], { COMLRL_TEST_PAUSE_AT: 'eval-batch@8', COMLRL_TEST_PAUSE_MS: '1000' });
  await child.waitFor(/^eval [1-9]\d*\/1024/m);
  await child.waitFor(/\[comlrl-test\] paused at eval-batch step 8/);
  child.proc.kill('SIGINT');
  const { code } = await child.exit;
  const err = child.stderr();
  expect(code, err).toBe(130);
  expect(err).toMatch(/interrupted after 8 of 1024 episodes; nothing written/);
  expect(existsSync(report)).toBe(false);
});
