/**
 * Checkpoints of large runs stream their tensors: the AdamW moments and the model weights are
 * copied from the backend one at a time, each just before it is written (two 0.47 B-parameter
 * agents have 7.5 GB of moments; copying them all first got a full fine-tune killed for memory
 * at its checkpoint). The streamed files are byte-identical to the eager ones. Resuming streams
 * too: the moments are read from the file only as an optimizer restores them, one at a time.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/index.js';
import { OPTIMIZER_STATE_FILE, readTrainerState, TRAINER_STATE_FILE, writeTrainerState } from '../src/checkpoint/state.js';
import { writeSafetensors } from '../src/model/safetensors.js';
import { AdamW, momentArray } from '../src/optim/adamw.js';
import { tempDir } from './cli-helpers.js';

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  setBackendLogger(null);
  await initBackend('wasm');
  ({ dir: root, cleanup } = await tempDir('streamed'));
});
afterAll(async () => cleanup());

describe('streamed checkpoint writing', () => {
  test('a deferred tensor is read only after every tensor before it is on disk', () => {
    const file = path.join(root, 'order.safetensors');
    const sizes = [5, 3, 8];
    const seenOnDisk: number[] = [];
    const tensors = sizes.map((n, k) => ({
      name: `t${k}`,
      shape: [n],
      read: () => {
        seenOnDisk.push(fs.statSync(file).size);
        return Float32Array.from({ length: n }, (_, i) => k * 10 + i);
      },
    }));
    writeSafetensors(file, tensors, 'F32');
    const eager = path.join(root, 'eager.safetensors');
    writeSafetensors(eager, tensors.map((t) => ({ name: t.name, shape: t.shape, data: t.read() })), 'F32');
    expect(fs.readFileSync(file).equals(fs.readFileSync(eager))).toBe(true);
    // Header (8-byte length + JSON) then the data: at each read, exactly the earlier tensors' bytes follow the header.
    const headerBytes = 8 + Number(fs.readFileSync(file).readBigUInt64LE(0));
    expect(seenOnDisk.slice(0, 3)).toEqual([headerBytes, headerBytes + 5 * 4, headerBytes + (5 + 3) * 4]);
  });

  test('moments streamed from live optimizers give the same files as a snapshot of them', async () => {
    const a = [tf.variable(tf.tensor1d([0.5, -1, 2])), tf.variable(tf.tensor2d([[1, 2], [3, 4]])), tf.variable(tf.tensor1d([7]))];
    const b = [tf.variable(tf.tensor1d([3, 3, 3, 3]))];
    const optA = new AdamW(a, { lr: 0.1, weightDecay: 0.01 });
    const optB = new AdamW(b, { lr: 0.05 });
    for (let s = 0; s < 3; s++) {
      // Variable 2 of A never gets a gradient: its moments are zeros and its step count 0.
      optA.step([tf.onesLike(a[0]).mul(s + 1), tf.onesLike(a[1]).mul(-0.5), null]);
      optB.step([tf.fill([4], 0.25 * s)]);
    }
    const rest = { format: 'comlrl-trainer-state', counters: { env_step: 3 }, extra: { note: 'x' } };
    const eagerDir = path.join(root, 'eager');
    const liveDir = path.join(root, 'live');
    await writeTrainerState(eagerDir, { ...rest, optimizers: [optA.getState(), optB.getState()] });
    await writeTrainerState(liveDir, { ...rest, optimizers: [] }, [optA, optB]);
    for (const f of [OPTIMIZER_STATE_FILE, TRAINER_STATE_FILE]) {
      expect(fs.readFileSync(path.join(liveDir, f)).equals(fs.readFileSync(path.join(eagerDir, f)))).toBe(true);
    }
    const back = await readTrainerState(liveDir);
    expect(back.optimizers[0].paramSteps).toEqual([3, 3, 0]);
    expect(Array.from(momentArray(back.optimizers[0].m[2]))).toEqual([0]);
    await expect(writeTrainerState(path.join(root, 'both'), { ...rest, optimizers: [optA.getState()] }, [optA])).rejects.toThrow(/either in the state or live/);
    optA.dispose();
    optB.dispose();
    tf.dispose([...a, ...b]);
  });
});

describe('streamed resume', () => {
  test('readTrainerState reads no moment until an optimizer restores it, then one at a time', async () => {
    const vars = [tf.variable(tf.tensor1d([1, 2, 3])), tf.variable(tf.tensor1d([4, 5]))];
    const opt = new AdamW(vars, { lr: 0.1 });
    opt.step([tf.tensor1d([1, -1, 0.5]), tf.tensor1d([2, 2])]);
    const dir = path.join(root, 'lazy');
    await writeTrainerState(dir, { format: 'x', optimizers: [] }, [opt]);
    const file = path.join(dir, OPTIMIZER_STATE_FILE);
    const back = await readTrainerState(dir);
    // Same header, new values written after the state was read: a restore that sees them read
    // the file then, not when the state was read.
    const bytes = fs.readFileSync(file);
    const dataStart = 8 + Number(bytes.readBigUInt64LE(0));
    const values = new Float32Array(bytes.buffer.slice(bytes.byteOffset + dataStart, bytes.byteOffset + bytes.length));
    values.forEach((_, i) => (values[i] = 100 + i));
    fs.writeFileSync(file, Buffer.concat([bytes.subarray(0, dataStart), Buffer.from(values.buffer)]));
    const reads: number[] = [];
    const restored = {
      ...back.optimizers[0],
      m: back.optimizers[0].m.map((m) => ({ length: m.length, read: () => (reads.push(tf.memory().numTensors), momentArray(m)) })),
    };
    const fresh = new AdamW(vars, { lr: 0.1 });
    fresh.setState(restored);
    // One read per moment, each after the previous one's tensors were made (m of variable 0, then its v, then m of variable 1).
    expect(reads).toHaveLength(2);
    expect(reads[1]).toBeGreaterThan(reads[0]);
    expect(Array.from(fresh.getState().m[0])).toEqual([100, 101, 102]);
    expect(Array.from(fresh.getState().m[1])).toEqual([103, 104]);
    expect(Array.from(fresh.getState().v[0])).toEqual([105, 106, 107]);
    opt.dispose();
    fresh.dispose();
    tf.dispose(vars);
  });

  test('a stored moment that cannot be read fails the restore and leaves no tensors behind', () => {
    const vars = [tf.variable(tf.tensor1d([1, 2])), tf.variable(tf.tensor1d([3]))];
    const opt = new AdamW(vars, { lr: 0.1 });
    const before = tf.memory().numTensors;
    const gone = { length: 1, read: (): Float32Array => { throw new Error('optimizer.safetensors was removed'); } };
    const state = { step: 1, paramSteps: [1, 1], m: [Float32Array.from([0.5, 0.5]), gone], v: [Float32Array.from([1, 1]), Float32Array.from([1])], config: opt.getState().config };
    expect(() => opt.setState(state)).toThrow(/was removed/);
    expect(tf.memory().numTensors).toBe(before);
    expect(opt.getState().paramSteps).toEqual([0, 0]);
    opt.dispose();
    tf.dispose(vars);
  });
});
