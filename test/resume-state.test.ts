/**
 * Trainer state on disk (src/checkpoint/state.ts): AdamW moments in safetensors and the rest in
 * JSON round-trip exactly (non-finite numbers and typed arrays included); missing or inconsistent
 * pieces are refused with the file named.
 */
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CheckpointError } from '../src/checkpoint/atomic.js';
import { OPTIMIZER_STATE_FILE, parseStateJson, readTrainerState, stringifyStateJson, TRAINER_STATE_FILE, writeTrainerState } from '../src/checkpoint/state.js';
import { momentArray, type AdamWState } from '../src/optim/adamw.js';
import { createRng } from '../src/util/rng.js';
import { tempDir } from './cli-helpers.js';

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  ({ dir: root, cleanup } = await tempDir('state'));
});
afterAll(async () => cleanup());

function optimizer(seed: number, sizes: number[]): AdamWState {
  const rng = createRng(seed);
  const arr = (n: number) => Float32Array.from({ length: n }, () => rng.normal() * 1e-3);
  return { step: 7, paramSteps: sizes.map((_, i) => (i === 1 ? 0 : 7)), m: sizes.map(arr), v: sizes.map(arr), config: { lr: 1e-3, betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0.01 } };
}

describe('trainer state files', () => {
  test('round trip: moments bit-exact, JSON values exact (rng state, -Infinity, NaN, typed arrays)', async () => {
    const rng = createRng('x');
    for (let i = 0; i < 10; i++) rng.next();
    const state = {
      format: 'comlrl-trainer-state',
      trainer: 'magrpo',
      counters: { env_step: 12 },
      cursor: { epoch: 1, index: 3 },
      rng: { sampling: rng.state() },
      optimizers: [optimizer(1, [6, 4, 3]), optimizer(2, [5])],
      extra: { logProbs: [-Infinity, 0.1 + 0.2, Number.NaN], f32: Float32Array.from([1.5, -2.25]), big: 1e300 },
    };
    const dir = join(root, 'ok');
    await writeTrainerState(dir, state);
    const back = await readTrainerState(dir);
    expect(back.optimizers).toHaveLength(2);
    back.optimizers.forEach((o, k) => {
      expect(o.step).toBe(state.optimizers[k].step);
      expect(o.paramSteps).toEqual(state.optimizers[k].paramSteps);
      expect(o.config).toEqual(state.optimizers[k].config);
      o.m.map(momentArray).forEach((m, i) => expect(Buffer.from(m.buffer, m.byteOffset, m.byteLength).equals(Buffer.from(state.optimizers[k].m[i].buffer))).toBe(true));
      o.v.map(momentArray).forEach((v, i) => expect(Array.from(v)).toEqual(Array.from(state.optimizers[k].v[i])));
    });
    const { optimizers: _a, ...restBack } = back;
    const { optimizers: _b, ...restState } = state;
    expect(restBack).toEqual(restState);
    // The RNG resumes where it stopped.
    const resumed = createRng(0, (back.rng as { sampling: ReturnType<typeof rng.state> }).sampling);
    expect(resumed.next()).toBe(rng.next());
    expect(parseStateJson(stringifyStateJson({ a: [Infinity, -0.5] }))).toEqual({ a: [Infinity, -0.5] });
  });

  test('missing or inconsistent pieces are named', async () => {
    const dir = join(root, 'bad');
    await writeTrainerState(dir, { optimizers: [optimizer(3, [4, 4])], cursor: { epoch: 0, index: 1 } });
    const json = await readFile(join(dir, TRAINER_STATE_FILE), 'utf8');

    await writeFile(join(dir, TRAINER_STATE_FILE), json.replace('"sizes":[4,4]', '"sizes":[4,5]'));
    await expect(readTrainerState(dir)).rejects.toThrow(/optimizer state tensor opt0\.m\.1 is F32\[4\], expected F32 with 5 values/);
    await writeFile(join(dir, TRAINER_STATE_FILE), json.replace('"step":7', '"step":-1'));
    await expect(readTrainerState(dir)).rejects.toThrow(/trainer_state\.json: optimizers\[0\]\.step/);
    await writeFile(join(dir, TRAINER_STATE_FILE), '{"optimizers": [');
    await expect(readTrainerState(dir)).rejects.toThrow(/trainer_state\.json is not valid JSON/);
    await writeFile(join(dir, TRAINER_STATE_FILE), json);
    await expect(readTrainerState(dir)).resolves.toBeDefined();

    await rm(join(dir, OPTIMIZER_STATE_FILE));
    await expect(readTrainerState(dir)).rejects.toBeInstanceOf(CheckpointError);
    await expect(readTrainerState(dir)).rejects.toThrow(/missing optimizer state \(optimizer\.safetensors\)/);
    await rm(join(dir, TRAINER_STATE_FILE));
    await expect(readTrainerState(dir)).rejects.toThrow(/missing trainer state \(trainer_state\.json\)/);
  });
});
