/**
 * Checkpoints and resume through `comlrl train`: a seeded run stopped part-way and resumed ends
 * with exactly the weights (and critic, and optimizer-driven updates) of a run that was never
 * stopped, for MAGRPO, CoLLM-CC and CoLLM-DC (shared heads); damaged or incompatible checkpoints are refused with a message
 * naming the problem, and the run directory is left exactly as it was.
 */
import { createHash } from 'node:crypto';
import { cp, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import { parseConfigText } from '../src/config/load.js';
import { parseRunConfig } from '../src/config/schema.js';
import { runTraining } from '../cli/run.js';
import { TRAINER_CONFIG_SCHEMAS } from '../cli/schemas.js';
import { cli, snapshot, tempDir, tinyModels, toyConfigYaml, trainerRows, trainRun } from './cli-helpers.js';
import { backendUnderTest } from './backend-under-test.js';

let root: string;
let cleanup: () => Promise<void>;
let agents: string[];
let critic: string[];

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend(backendUnderTest('wasm'));
  ({ dir: root, cleanup } = await tempDir('resume'));
  agents = await tinyModels(root, ['a0', 'a1']);
  critic = await tinyModels(root, ['critic'], 9);
});
afterAll(async () => cleanup());

/** Runs `train` on `yaml`; returns the run directory. */
const train = (name: string, yaml: (out: string) => string, extra: string[] = []): Promise<string> => trainRun(root, name, yaml, extra);

async function bytes(file: string): Promise<Buffer> {
  return readFile(file);
}

describe.each([
  {
    name: 'magrpo',
    // 5 items × 2 epochs; the buffer (3 node samples) is part-full at the stop, so it must be restored.
    yaml: (out: string) => toyConfigYaml({ agents, out, trainItems: 5, section: { rollout_buffer_size: 3, train_batch_size: 2, num_generations: 3 } }),
    files: ['agent_0/model.safetensors', 'agent_1/model.safetensors'],
  },
  {
    name: 'collm-cc',
    // Multi-turn sparse toy task, 2 turns per episode, buffer of 3 transitions: pending transitions at the stop.
    yaml: (out: string) => toyConfigYaml({ agents, critics: critic, trainer: 'collm_cc', out, trainItems: 5, section: { update_epochs: 2 } }),
    files: ['agent_0/model.safetensors', 'agent_1/model.safetensors', 'critic/model.safetensors', 'critic/value_head.safetensors'],
  },
  {
    name: 'collm-dc',
    // The parameter-sharing variant: value heads on the actors' backbones (saved beside each agent).
    yaml: (out: string) => toyConfigYaml({ agents, trainer: 'collm_dc', out, trainItems: 5, section: { use_separate_critic: false } }),
    files: ['agent_0/model.safetensors', 'agent_1/model.safetensors', 'agent_0/value_head.safetensors', 'agent_1/value_head.safetensors'],
  },
])('$name: interrupted and resumed equals uninterrupted', ({ name, yaml, files }) => {
  let straight: string;
  let resumed: string;

  beforeAll(async () => {
    straight = await train(`${name}-straight`, yaml);
    resumed = await train(`${name}-stopped`, yaml, ['--stop-after', '4']);
  });

  test('the stopped run wrote a checkpoint at the stop and no final model', async () => {
    const state = JSON.parse(await readFile(join(resumed, 'checkpoints', 'step-000004', 'run_state.json'), 'utf8')) as { step: number; cursor: unknown };
    expect(state.step).toBe(4);
    expect(state.cursor).toEqual({ epoch: 0, index: 4 });
    const trainerState = JSON.parse(await readFile(join(resumed, 'checkpoints', 'step-000004', 'trainer_state.json'), 'utf8')) as { extra: Record<string, unknown[]> };
    // Something is pending in the buffers, which a resume must restore.
    const pending = name === 'magrpo' ? (trainerState.extra.buffers as unknown[][]).flat().length : trainerState.extra.buffer.length;
    expect(pending).toBeGreaterThan(0);
    await expect(readFile(join(resumed, 'final', 'agent_0', 'model.safetensors'))).rejects.toThrow();
  });

  test('resume finishes with bit-identical weights, the same metrics and the same checkpoints', async () => {
    const r = await cli(['train', '--resume', resumed]);
    expect(r.code, r.err).toBe(0);
    expect(r.err).toMatch(/resuming .*step-000004 at step 4\/10/);
    for (const f of files) {
      const a = await bytes(join(straight, 'final', f));
      const b = await bytes(join(resumed, 'final', f));
      expect(b.equals(a), f).toBe(true);
    }
    // The checkpoint after the resume point holds the same optimizer state as the straight run's.
    const optA = await bytes(join(straight, 'checkpoints', 'step-000008', 'optimizer.safetensors'));
    const optB = await bytes(join(resumed, 'checkpoints', 'step-000008', 'optimizer.safetensors'));
    expect(optB.equals(optA)).toBe(true);
    // Every logged value agrees, apart from timing: the log is continuous across the stop.
    expect(trainerRows(resumed)).toEqual(trainerRows(straight));
  });
});

describe('damaged or incompatible checkpoints are refused and nothing is changed', () => {
  let stopped: string;

  beforeAll(async () => {
    stopped = await train('damage-src', (out) => toyConfigYaml({ agents, out, trainItems: 4 }), ['--stop-after', '2']);
  });

  async function refused(mutate: (runDir: string) => Promise<void>, extra: string[], pattern: RegExp, copyName: string): Promise<void> {
    const run = join(root, copyName);
    await cp(stopped, run, { recursive: true });
    await mutate(run);
    const before = await snapshot(run);
    const r = await cli(['train', '--resume', run, ...extra]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(pattern);
    expect(await snapshot(run)).toEqual(before);
    await rm(run, { recursive: true, force: true });
  }

  test('truncated safetensors', async () => {
    await refused(
      (run) => truncate(join(run, 'checkpoints', 'step-000002', 'agent_1', 'model.safetensors'), 100),
      [],
      /damaged checkpoint: file agent_1\/model\.safetensors has 100 bytes, the manifest records \d+ \(truncated or modified\)/,
      'truncated',
    );
  });

  test('missing optimizer state', async () => {
    await refused(
      (run) => rm(join(run, 'checkpoints', 'step-000002', 'optimizer.safetensors')),
      [],
      /damaged checkpoint: missing optimizer state \(AdamW moments\): optimizer\.safetensors/,
      'no-optimizer',
    );
  });

  test('modified trainer state', async () => {
    await refused(
      async (run) => {
        const f = join(run, 'checkpoints', 'step-000002', 'trainer_state.json');
        await writeFile(f, (await readFile(f, 'utf8')).replace('"env_step":4', '"env_step":5'));
      },
      [],
      /damaged checkpoint: file trainer_state\.json (does not match its recorded SHA-256|has \d+ bytes)/,
      'modified',
    );
  });

  test('a manifest entry outside the checkpoint (with the right size and hash) is refused', async () => {
    await refused(
      async (run) => {
        const ckpt = join(run, 'checkpoints', 'step-000002');
        // The target is the run's own config.yaml, three levels up: size and hash recorded correctly.
        const target = await readFile(join(run, 'config.yaml'));
        const m = JSON.parse(await readFile(join(ckpt, 'manifest.json'), 'utf8')) as { files: unknown[] };
        m.files.push({ path: '../../config.yaml', bytes: target.length, sha256: createHash('sha256').update(target).digest('hex') });
        await writeFile(join(ckpt, 'manifest.json'), JSON.stringify(m));
      },
      [],
      /damaged checkpoint: manifest\.json entry '\.\.\/\.\.\/config\.yaml' leaves the checkpoint folder .*refused/,
      'escape',
    );
  });

  test('mismatched config (a changed hyperparameter), named by key', async () => {
    await refused(
      async () => {},
      ['--set', 'magrpo.agent_learning_rate=0.5'],
      /incompatible checkpoint: config mismatch.*differing keys: magrpo\.agent_learning_rate: checkpoint 0\.01, this run 0\.5/,
      'mismatch',
    );
  });

  test('a run without checkpoints', async () => {
    const r = await cli(['train', '--resume', join(root, 'nowhere')]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/no config\.yaml in .*nowhere; pass --config FILE/);
  });

  test('an interrupt (Ctrl-C aborts the run signal) stops after the current item with a checkpoint', async () => {
    const out = join(root, 'interrupted');
    const config = parseRunConfig(parseConfigText(toyConfigYaml({ agents, out, trainItems: 4, output: { save_steps: 0 } })), TRAINER_CONFIG_SCHEMAS);
    const controller = new AbortController();
    const lines: string[] = [];
    const result = await runTraining({
      config,
      signal: controller.signal,
      log: (l) => lines.push(l),
      // The first progress line comes before the first item: interrupt then.
      progress: { write: () => controller.abort(), isTTY: false },
    });
    expect(result.completed).toBe(false);
    expect(result.step).toBe(1);
    expect(result.checkpoints.map((c) => c.slice(-11))).toEqual(['step-000001']);
    expect(lines.join('\n')).toMatch(/stopped at step 1\/8 \(checkpoint written\); continue with: npx comlrl train --resume/);
    const r = await cli(['train', '--resume', out]);
    expect(r.code, r.err).toBe(0);
  });

  test('changing only output settings is allowed: the intact copy resumes', async () => {
    const run = join(root, 'intact');
    await cp(stopped, run, { recursive: true });
    const r = await cli(['train', '--resume', run, '--set', 'output.verbose=true', '--set', 'output.plots=false']);
    expect(r.code, r.err).toBe(0);
    expect(r.err).toMatch(/done: 8\/8 steps/);
  });
});
