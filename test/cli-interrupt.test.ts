/**
 * `comlrl train` interruption and resume edge cases: Ctrl-C exits 130 even with --stop-after, and
 * half-written checkpoint directories left by a hard quit are removed when the run is resumed.
 */
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { parse } from 'yaml';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { displayPath } from '../cli/display-path.js';
import { handleInterrupts } from '../cli/interrupt.js';
import { main, type CommandContext } from '../cli/main.js';
import { resumeCommandFor } from '../cli/training/run-dir.js';
import { writeCheckpointAtomically } from '../src/checkpoint/atomic.js';
import { cli, snapshot, toyConfigYaml, useCliWorkspace } from './cli-helpers.js';

const ws = useCliWorkspace('cli-interrupt');

/** A CLI context that sends `signal` once, at the first progress line after training started. */
function signalOnFirstProgress(signal: 'SIGINT' | 'SIGTERM'): { ctx: CommandContext; err: string[]; sent: () => boolean } {
  const err: string[] = [];
  let sent = false;
  const ctx: CommandContext = {
    out: () => {},
    err: (l) => err.push(l),
    progress: {
      isTTY: false,
      write: (s: string) => {
        err.push(s);
        if (!sent && /^magrpo [1-9]\d*\/16/.test(s)) {
          sent = true;
          process.emit(signal);
        }
      },
    },
  };
  return { ctx, err, sent: () => sent };
}

test('Ctrl-C before --stop-after is reached exits 130 (interrupted), with a checkpoint', async () => {
  const out = join(ws.root, 'sigint');
  const file = join(ws.root, 'sigint.yaml');
  await writeFile(file, toyConfigYaml({ agents: ws.agents, out, trainItems: 8, output: { save_steps: 0 } }));
  const { ctx, err, sent } = signalOnFirstProgress('SIGINT');
  const code = await main(['train', '--config', file, '--stop-after', '15'], ctx);
  expect(sent()).toBe(true);
  expect(err.join('\n')).toMatch(/interrupt: stopping after the current item/);
  expect(code).toBe(130);
  const ckpts = (await readdir(join(out, 'checkpoints'))).filter((n) => n.startsWith('step-'));
  expect(ckpts.length).toBe(1);
  expect(Number(ckpts[0].slice(5))).toBeLessThan(15);
});

test('resume removes half-written checkpoint directories left by a hard quit', async () => {
  const out = join(ws.root, 'leftover');
  const file = join(ws.root, 'leftover.yaml');
  await writeFile(file, toyConfigYaml({ agents: ws.agents, out, trainItems: 4 }));
  const stopped = await cli(['train', '--config', file, '--stop-after', '2']);
  expect(stopped.code, stopped.err).toBe(0);
  const junk = join(out, 'checkpoints', '.step-000004.tmp-12345-1700000000000');
  await mkdir(join(junk, 'agent_0'), { recursive: true });
  await writeFile(join(junk, 'agent_0', 'model.safetensors'), Buffer.alloc(64));
  const r = await cli(['train', '--resume', out]);
  expect(r.code, r.err).toBe(0);
  // The resumed bar starts at step 2 and its rate counts only this session's steps (none yet).
  expect(r.err).toMatch(/^magrpo 2\/8 25% 0:00<\? 0\.00 it\/s/m);
  expect(existsSync(junk)).toBe(false);
  expect((await readdir(join(out, 'checkpoints'))).filter((n) => n.startsWith('.'))).toEqual([]);
});

test('SIGTERM (job schedulers) behaves like the first Ctrl-C: checkpoint, exit 130', async () => {
  const out = join(ws.root, 'sigterm');
  const file = join(ws.root, 'sigterm.yaml');
  await writeFile(file, toyConfigYaml({ agents: ws.agents, out, trainItems: 8, output: { save_steps: 0 } }));
  const { ctx, err, sent } = signalOnFirstProgress('SIGTERM');
  const code = await main(['train', '--config', file], ctx);
  expect(sent()).toBe(true);
  expect(err.join('\n')).toMatch(/interrupt \(SIGTERM\): stopping after the current item/);
  expect(code).toBe(130);
  const ckpts = (await readdir(join(out, 'checkpoints'))).filter((n) => n.startsWith('step-'));
  expect(ckpts.length).toBe(1);
  expect(Number(ckpts[0].slice(5))).toBeLessThan(16);
  expect(process.listenerCount('SIGTERM')).toBe(0);
});

test('resuming a run that already finished says so and changes nothing', async () => {
  const out = join(ws.root, 'finished');
  const file = join(ws.root, 'finished.yaml');
  // 4 items × 2 epochs = 8 steps; save_steps 2 puts the last checkpoint at step 8.
  await writeFile(file, toyConfigYaml({ agents: ws.agents, out, trainItems: 4 }));
  const first = await cli(['train', '--config', file]);
  expect(first.code, first.err).toBe(0);
  const before = await snapshot(out);
  const again = await cli(['train', '--resume', out]);
  expect(again.code, again.err).toBe(0);
  expect(again.err).toMatch(/is already complete \(step 8\/8\); nothing to resume/);
  expect(await snapshot(out)).toEqual(before);
});

test('output.dir given on resume is ignored with a warning; the saved config names the real run directory', async () => {
  const out = join(ws.root, 'moved');
  const file = join(ws.root, 'moved.yaml');
  await writeFile(file, toyConfigYaml({ agents: ws.agents, out, trainItems: 4 }));
  expect((await cli(['train', '--config', file, '--stop-after', '2'])).code).toBe(0);
  const elsewhere = join(ws.root, 'elsewhere');
  const r = await cli(['train', '--resume', out, '--set', `output.dir=${elsewhere}`]);
  expect(r.code, r.err).toBe(0);
  expect(r.err).toContain(`output.dir ${elsewhere} is ignored when resuming; the run continues in ${out}`);
  expect(existsSync(elsewhere)).toBe(false);
  expect(parse(await readFile(join(out, 'config.yaml'), 'utf8')).output.dir).toBe(out);
});

test('a second Ctrl-C during a checkpoint write quits once it is complete and prints the --resume command (none for final/)', async () => {
  const run = join(ws.root, 'second-sigint');
  /** Two signals while `dir` is being written; the lines logged and the exit code once the write completed. */
  const secondSignalDuring = async (dir: string): Promise<{ lines: string[]; exited: number | undefined }> => {
    const lines: string[] = [];
    let exited: number | undefined;
    // As `comlrl train` installs it (cli/commands/train.ts).
    const handle = handleInterrupts((l) => lines.push(l), 'stopping after the current item and writing a checkpoint', (code) => (exited = code), resumeCommandFor);
    try {
      let release = (): void => {};
      const gate = new Promise<void>((r) => (release = r));
      let entered = (): void => {};
      const inside = new Promise<void>((r) => (entered = r));
      const writing = writeCheckpointAtomically(dir, { step: 4, configHash: 'h' }, async (tmp) => {
        await writeFile(join(tmp, 'trainer_state.json'), '{}');
        entered();
        await gate;
      });
      await inside;
      process.emit('SIGINT');
      process.emit('SIGINT');
      expect(exited).toBeUndefined();
      release();
      await writing;
      await new Promise((r) => setImmediate(r));
      return { lines, exited };
    } finally {
      handle.dispose();
    }
  };
  const ckpt = await secondSignalDuring(join(run, 'checkpoints', 'step-000004'));
  expect(ckpt.exited).toBe(130);
  expect(ckpt.lines.join('\n')).toContain('interrupt again: a checkpoint is being written; quitting as soon as it is complete');
  expect(ckpt.lines.at(-1)).toBe(`[comlrl] checkpoint complete; quitting; continue with: npx comlrl train --resume ${displayPath(run)}`);
  // final/ completes the run: there is nothing to resume.
  const fin = await secondSignalDuring(join(run, 'final'));
  expect(fin.exited).toBe(130);
  expect(fin.lines.at(-1)).toBe('[comlrl] checkpoint complete; quitting');
});
