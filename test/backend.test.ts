import * as tf from '@tensorflow/tfjs';
import { afterEach, describe, expect, it } from 'vitest';
import {
  activeBackend,
  causalBias,
  gatherRows,
  initBackend,
  lengthMask,
  linear,
  logSumExpRows,
  matMul,
  MASKED_BIAS,
  paddedCausalBias,
  setBackendLogger,
  stopGradient,
  withoutGradient,
  wasmKernelFixesInstalled,
  takeAlongRows,
  tensorflowInstalled,
  torchInstalled,
} from '../src/backend/index.js';
import { backendsUnderTest } from './backend-under-test.js';
import { createRng } from '../src/util/rng.js';

const rng = createRng(17);
const rand = (shape: number[]): tf.Tensor => tf.tensor(Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.normal()), shape);

function maxDiff(a: tf.Tensor, b: tf.Tensor): number {
  return tf.tidy(() => tf.max(tf.abs(tf.sub(a, b))).dataSync()[0]);
}

describe('initBackend', () => {
  const saved = process.env.COMLRL_BACKEND;
  afterEach(() => {
    if (saved === undefined) delete process.env.COMLRL_BACKEND;
    else process.env.COMLRL_BACKEND = saved;
    setBackendLogger((l) => console.error(l));
  });

  it('auto (the default) picks torch, then tensorflow, when set up (no GPU here), else wasm, and says which once', async () => {
    const lines: string[] = [];
    setBackendLogger((l) => lines.push(l));
    delete process.env.COMLRL_BACKEND;
    // On a CPU both native backends may be set up; torch trains faster there (docs/benchmarks.md).
    const [expected, why] = torchInstalled()
      ? ['torch', tensorflowInstalled() ? 'torch trains faster than tensorflow on CPU' : 'torch is installed']
      : tensorflowInstalled()
        ? ['tensorflow', 'tensorflow is installed']
        : ['wasm', 'no native backend is set up; npx comlrl setup tensorflow or npx comlrl setup torch adds one'];
    expect(await initBackend()).toBe(expected);
    expect(tf.getBackend()).toBe(expected);
    expect(await initBackend('auto')).toBe(expected);
    expect(activeBackend()).toBe(expected);
    expect(lines).toHaveLength(1);
    const details = expected === 'torch' ? 'torch \\S+ on cpu, \\d+ threads?; ' : '';
    expect(lines[0]).toMatch(new RegExp(`^\\[comlrl\\] backend: ${expected} \\(${details}auto: ${why.replace(/[.;]/g, (c) => `\\${c}`)}\\)$`));
  });

  it('honours COMLRL_BACKEND, an explicit name wins, logs each chosen backend once', async () => {
    const lines: string[] = [];
    setBackendLogger((l) => lines.push(l));
    process.env.COMLRL_BACKEND = 'cpu';
    expect(await initBackend()).toBe('cpu');
    expect(tf.getBackend()).toBe('cpu');
    expect(activeBackend()).toBe('cpu');
    expect(await initBackend()).toBe('cpu');
    // An explicit option wins over the environment.
    expect(await initBackend('wasm')).toBe('wasm');
    expect(tf.getBackend()).toBe('wasm');
    // cpu announced once; wasm too, unless the auto test above already announced it.
    expect(lines[0]).toBe('[comlrl] backend: cpu');
    expect(lines.filter((l) => l === '[comlrl] backend: cpu')).toHaveLength(1);
    expect(lines.length).toBeLessThanOrEqual(2);
  });

  it('unknown or unavailable backends are clear errors', async () => {
    setBackendLogger(null);
    process.env.COMLRL_BACKEND = 'tpu';
    await expect(initBackend()).rejects.toThrow(/COMLRL_BACKEND: unknown backend 'tpu'; expected one of auto, wasm, cpu, tensorflow/);
    if (!tensorflowInstalled()) {
      await expect(initBackend('tensorflow')).rejects.toThrow(/not installed: run `npx comlrl setup tensorflow` .* or `npm i @tensorflow\/tfjs-node@4\.22\.0`/);
    }
    await expect(initBackend('tensorflow-gpu')).rejects.toThrow(/npm i @tensorflow\/tfjs-node-gpu@4\.22\.0/);
    await expect(initBackend('webgpu')).rejects.toThrow(/'webgpu' \(experimental\) needs the optional package webgpu: run `npm i webgpu@0.6.2`/);
  });
});

for (const backend of backendsUnderTest(['cpu', 'wasm'])) {
  describe(`primitives on ${backend} agree with plain tfjs ops`, () => {
    it('matMul (2-D and batched) forward and gradients', async () => {
      setBackendLogger(null);
      await initBackend(backend);
      for (const [sa, sb] of [
        [[5, 7], [7, 3]],
        [[2, 3, 5, 4], [2, 3, 4, 6]],
        [[2, 3, 2, 4], [2, 3, 4, 6]],
      ]) {
        tf.tidy(() => {
          const a = rand(sa);
          const b = rand(sb);
          const w = rand([...sa.slice(0, -1), sb[sb.length - 1]]);
          const f = (x: tf.Tensor, y: tf.Tensor) => tf.sum(tf.mul(matMul(x, y), w));
          const g = (x: tf.Tensor, y: tf.Tensor) => tf.sum(tf.mul(tf.matMul(x, y), w));
          expect(maxDiff(matMul(a, b), tf.matMul(a, b))).toBeLessThan(1e-5);
          const [da, db] = tf.grads(f)([a, b]);
          const [ea, eb] = tf.grads(g)([a, b]);
          expect(maxDiff(da, ea)).toBeLessThan(1e-5);
          expect(maxDiff(db, eb)).toBeLessThan(1e-5);
        });
      }
    });

    it('linear in HF layout (x·Wᵀ + b) forward and gradients', () => {
      tf.tidy(() => {
        const x = rand([6, 5]) as tf.Tensor2D;
        const wt = rand([4, 5]) as tf.Tensor2D;
        const b = rand([4]) as tf.Tensor1D;
        const w = rand([6, 4]);
        const ours = (xx: tf.Tensor, ww: tf.Tensor, bb: tf.Tensor) => tf.sum(tf.mul(linear(xx as tf.Tensor2D, ww as tf.Tensor2D, bb as tf.Tensor1D), w));
        const plain = (xx: tf.Tensor, ww: tf.Tensor, bb: tf.Tensor) => tf.sum(tf.mul(tf.add(tf.matMul(xx, ww, false, true), bb), w));
        const g1 = tf.grads(ours)([x, wt, b]);
        const g2 = tf.grads(plain)([x, wt, b]);
        g1.forEach((g, i) => expect(maxDiff(g, g2[i])).toBeLessThan(1e-5));
      });
    });

    it('gatherRows: repeated rows accumulate in the scatter-add gradient', () => {
      tf.tidy(() => {
        const table = rand([5, 3]);
        const idx = [4, 1, 1, 0, 1];
        const w = rand([5, 3]);
        const out = gatherRows(table, idx);
        expect(Array.from(out.dataSync())).toEqual(Array.from(tf.gather(table, idx).dataSync()));
        const g = tf.grad((t: tf.Tensor) => tf.sum(tf.mul(gatherRows(t, idx), w)))(table);
        // Hand derivation: d/d table[r] = Σ_{i: idx[i]=r} w[i].
        const wd = w.arraySync() as number[][];
        const expected = [0, 1, 2, 3, 4].map((r) => [0, 1, 2].map((c) => idx.reduce((s, id, i) => (id === r ? s + wd[i][c] : s), 0)));
        const got = g.arraySync() as number[][];
        got.forEach((row, r) => row.forEach((v, c) => expect(v).toBeCloseTo(expected[r][c], 5)));
      });
    });

    it('takeAlongRows picks x[i, cols[i]] and routes the gradient there only', () => {
      tf.tidy(() => {
        const x = rand([3, 4]) as tf.Tensor2D;
        const cols = [2, 0, 3];
        const xs = x.arraySync();
        expect(Array.from(takeAlongRows(x, cols).dataSync())).toEqual(cols.map((c, i) => Math.fround(xs[i][c])));
        const g = tf.grad((t: tf.Tensor) => tf.sum(takeAlongRows(t as tf.Tensor2D, cols)))(x).arraySync() as number[][];
        expect(g).toEqual([[0, 0, 1, 0], [1, 0, 0, 0], [0, 0, 0, 1]]);
        expect(() => takeAlongRows(x, [4, 0, 0])).toThrow(/column 4 out of range/);
      });
    });

    it('logSumExpRows matches tf.logSumExp in value and gradient', () => {
      tf.tidy(() => {
        const x = tf.mul(rand([4, 9]), 5) as tf.Tensor2D;
        const w = rand([4]);
        expect(maxDiff(logSumExpRows(x), tf.logSumExp(x, 1))).toBeLessThan(1e-5);
        const g1 = tf.grad((t: tf.Tensor) => tf.sum(tf.mul(logSumExpRows(t as tf.Tensor2D), w)))(x);
        const g2 = tf.grad((t: tf.Tensor) => tf.sum(tf.mul(tf.logSumExp(t, 1), w)))(x);
        expect(maxDiff(g1, g2)).toBeLessThan(1e-5);
      });
    });

    it('withoutGradient lets a mask be computed from a differentiated tensor; stopGradient zeroes it', () => {
      tf.tidy(() => {
        const x = tf.tensor1d([-1, 2, 3, -4]);
        const mask = (t: tf.Tensor) => withoutGradient([t], (u) => tf.cast(tf.greater(u, 0), 'float32'));
        const f = (t: tf.Tensor) => tf.sum(tf.mul(t, mask(t)));
        // Mask is constant [0,1,1,0], so d/dx = mask.
        expect(Array.from(tf.grad(f)(x).dataSync())).toEqual([0, 1, 1, 0]);
        expect(Array.from(tf.grad((t: tf.Tensor) => tf.sum(tf.square(stopGradient(t))))(x).dataSync())).toEqual([0, 0, 0, 0]);
      });
    });
  });
}

describe('masks built outside the tape', () => {
  it('lengthMask, causalBias and paddedCausalBias', async () => {
    await initBackend('cpu');
    tf.tidy(() => {
      expect(lengthMask([2, 0, 3], 3).arraySync()).toEqual([[1, 1, 0], [0, 0, 0], [1, 1, 1]]);
      expect(lengthMask([2], 4, [1]).arraySync()).toEqual([[0, 1, 1, 0]]);
      const M = MASKED_BIAS;
      expect(causalBias(3).arraySync()).toEqual([[0, M, M], [0, 0, M], [0, 0, 0]]);
      // Row 0 has 2 pads: real queries (slots 2, 3) never see keys 0, 1; pad queries see only themselves.
      expect(paddedCausalBias([2], 4, 4).arraySync()).toEqual([[[
        [0, M, M, M],
        [M, 0, M, M],
        [M, M, 0, M],
        [M, M, 0, 0],
      ]]]);
      // One new query after a 5-key cache (6 keys), 1 pad.
      expect(paddedCausalBias([1], 1, 6).arraySync()).toEqual([[[[M, 0, 0, 0, 0, 0]]]]);
    });
  });
});

describe('wasm Slice / SplitV / Unpack replacements', () => {
  // Reference: element-wise slicing of a plain JS array by index arithmetic.
  function refSlice(data: number[], shape: number[], begin: number[], size: number[]): number[] {
    const strides = shape.map((_, i) => shape.slice(i + 1).reduce((a, b) => a * b, 1));
    const out: number[] = [];
    const total = size.reduce((a, b) => a * b, 1);
    for (let flat = 0; flat < total; flat++) {
      let rem = flat;
      let off = 0;
      for (let i = size.length - 1; i >= 0; i--) {
        const c = rem % size[i];
        rem = Math.floor(rem / size[i]);
        off += (begin[i] + c) * strides[i];
      }
      out.push(data[off]);
    }
    return out;
  }

  it('match index-arithmetic slicing for ranks 1-5, float32/int32/bool', async () => {
    setBackendLogger(null);
    await initBackend('wasm');
    expect(wasmKernelFixesInstalled()).toBe(true);
    const r = createRng(3);
    for (let trial = 0; trial < 60; trial++) {
      const rank = 1 + (trial % 5);
      const shape = Array.from({ length: rank }, () => 1 + r.int(5));
      const n = shape.reduce((a, b) => a * b, 1);
      const dtype = (['float32', 'int32', 'bool'] as const)[trial % 3];
      const data = Array.from({ length: n }, (_, i) => (dtype === 'bool' ? i % 2 : dtype === 'int32' ? i - 7 : i * 0.5 - 3));
      const begin = shape.map((d) => r.int(d));
      const size = shape.map((d, i) => 1 + r.int(d - begin[i]));
      tf.tidy(() => {
        const x = tf.tensor(data, shape, dtype);
        expect(Array.from(tf.slice(x, begin, size).dataSync())).toEqual(refSlice(data, shape, begin, size));
        const axis = r.int(rank);
        const parts = tf.split(x, shape[axis] > 1 ? [1, shape[axis] - 1] : [1], axis);
        let start = 0;
        for (const p of parts) {
          const b = shape.map((_, i) => (i === axis ? start : 0));
          expect(Array.from(p.dataSync())).toEqual(refSlice(data, shape, b, p.shape));
          start += p.shape[axis];
        }
        tf.unstack(x, axis).forEach((u, i) => {
          const b = shape.map((_, k) => (k === axis ? i : 0));
          const s = shape.map((d, k) => (k === axis ? 1 : d));
          expect(u.shape).toEqual(shape.filter((_, k) => k !== axis));
          expect(Array.from(u.dataSync())).toEqual(refSlice(data, shape, b, s));
        });
      });
    }
  });
});
