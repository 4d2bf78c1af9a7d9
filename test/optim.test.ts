import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { initBackend, setBackendLogger, type BackendName } from '../src/backend/index.js';
import { AdamW, clipGradNorm, sumOfSquares, type AdamWState } from '../src/optim/index.js';
import { createRng } from '../src/util/rng.js';
import { backendUnderTest, backendsUnderTest } from './backend-under-test.js';

// Fixtures: scripts/optim_fixtures.py (torch.optim.AdamW and clip_grad_norm_ in float64).
const fixture = (name: string): unknown =>
  JSON.parse(readFileSync(fileURLToPath(new URL(`./fixtures/optim/${name}`, import.meta.url)), 'utf8'));

interface AdamWCase {
  name: string;
  shapes: number[][];
  options: { lr: number; betas: [number, number]; eps: number; weight_decay: number };
  initial: number[][];
  steps: { grads: (number[] | null)[]; lr: number; params: number[][] }[];
}
interface ClipCase {
  name: string;
  shapes: number[][];
  max_norm: number;
  grads: number[][];
  total_norm: number;
  clipped: number[][];
}

const adamwCases = (fixture('adamw.json') as { cases: AdamWCase[] }).cases;
const clipCases = (fixture('clip.json') as { cases: ClipCase[] }).cases;

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

beforeAll(() => setBackendLogger(null));

for (const backend of backendsUnderTest(['cpu', 'wasm'])) {
  describe(`AdamW vs torch.optim.AdamW (float64 reference) on ${backend}`, () => {
    beforeAll(async () => {
      await initBackend(backend);
    });

    for (const c of adamwCases) {
      it(c.name, () => {
        const vars = c.initial.map((p, i) => tf.variable(tf.tensor(p, c.shapes[i]), true, `${backend}_${c.name}_${i}`));
        const opt = new AdamW(vars, {
          lr: c.options.lr,
          betas: c.options.betas,
          eps: c.options.eps,
          weightDecay: c.options.weight_decay,
        });
        let worst = 0;
        for (const s of c.steps) {
          if (s.lr !== opt.learningRate) opt.setLearningRate(s.lr);
          const grads = s.grads.map((g, i) => (g ? tf.tensor(g, c.shapes[i]) : null));
          opt.step(grads);
          tf.dispose(grads.filter((g): g is tf.Tensor => g !== null));
          vars.forEach((v, i) => {
            worst = Math.max(worst, maxAbsDiff(v.dataSync(), s.params[i]));
          });
        }
        // Parameters are O(1) and move by ~lr per step; float32 rounding of the inputs alone is ~6e-8.
        expect(worst).toBeLessThan(2e-6);
        expect(opt.stepCount).toBe(c.steps.length);
        opt.dispose();
        tf.dispose(vars);
      });
    }

    it('missing gradients leave a parameter untouched and its step count behind (torch per-parameter steps)', () => {
      const c = adamwCases.find((x) => x.name === 'lr_change_and_missing_grads');
      if (!c) throw new Error('fixture case missing');
      const vars = c.initial.map((p, i) => tf.variable(tf.tensor(p, c.shapes[i]), true, `${backend}_skip_${i}`));
      const opt = new AdamW(vars, { lr: c.options.lr, weightDecay: c.options.weight_decay });
      const g0 = c.steps[0].grads.map((g, i) => (g ? tf.tensor(g, c.shapes[i]) : null));
      opt.step(g0);
      // Variable 2 had no gradient at step 0: bit-identical to its initial value.
      expect(Array.from(vars[2].dataSync())).toEqual(Array.from(Float32Array.from(c.initial[2])));
      expect(opt.getState().paramSteps).toEqual([1, 1, 0]);
      tf.dispose(g0.filter((g): g is tf.Tensor => g !== null));
      opt.dispose();
      tf.dispose(vars);
    });

    for (const c of clipCases) {
      it(`clipGradNorm vs clip_grad_norm_: ${c.name}`, () => {
        const grads = c.grads.map((g, i) => tf.tensor(g, c.shapes[i]));
        const before = tf.memory().numTensors;
        const out = clipGradNorm(grads, c.max_norm);
        expect(Math.abs(out.totalNorm - c.total_norm) / c.total_norm).toBeLessThan(1e-6);
        expect(out.clipped).toBe(c.total_norm > c.max_norm);
        out.grads.forEach((g, i) => expect(maxAbsDiff(g.dataSync(), c.clipped[i])).toBeLessThan(1e-6));
        if (out.clipped) {
          expect(tf.memory().numTensors).toBe(before + grads.length);
          tf.dispose(out.grads);
        } else {
          expect(out.grads).toBe(grads);
        }
        tf.dispose(grads);
      });
    }
  });
}

describe(`AdamW state, leaks and validation (${backendUnderTest('wasm')})`, () => {
  beforeAll(async () => {
    await initBackend(backendUnderTest('wasm'));
  });

  const shapes = [[8, 16], [16], [4, 3, 2]];
  const makeVars = (tag: string, seed: number) => {
    const r = createRng(seed);
    return shapes.map((s, i) =>
      tf.variable(tf.tensor(Array.from({ length: s.reduce((a, b) => a * b, 1) }, () => r.normal()), s), true, `${tag}_${i}`),
    );
  };
  const gradsAt = (step: number) => {
    const r = createRng(`grads:${step}`);
    return shapes.map((s) => tf.tensor(Array.from({ length: s.reduce((a, b) => a * b, 1) }, () => r.normal()), s));
  };

  it('getState then setState into a fresh optimizer continues bit-identically', () => {
    const a = makeVars('a', 1);
    const optA = new AdamW(a, { lr: 1e-2, weightDecay: 0.1 });
    const N = 4;
    const M = 5;
    for (let s = 0; s < N; s++) {
      const g = gradsAt(s);
      optA.step(g);
      tf.dispose(g);
    }
    const snapshot: AdamWState = optA.getState();
    const paramsAtN = a.map((v) => Float32Array.from(v.dataSync() as Float32Array));
    // A round trip through JSON-like copies, as a checkpoint would do.
    const copy: AdamWState = {
      ...snapshot,
      m: snapshot.m.map((x) => Float32Array.from(x)),
      v: snapshot.v.map((x) => Float32Array.from(x)),
    };
    for (let s = N; s < N + M; s++) {
      const g = gradsAt(s);
      optA.step(g);
      tf.dispose(g);
    }

    const b = makeVars('b', 999);
    b.forEach((v, i) => v.assign(tf.tensor(paramsAtN[i], shapes[i])));
    const optB = new AdamW(b);
    optB.setState(copy);
    expect(optB.config).toEqual(optA.config);
    for (let s = N; s < N + M; s++) {
      const g = gradsAt(s);
      optB.step(g);
      tf.dispose(g);
    }
    a.forEach((v, i) => expect(Array.from(b[i].dataSync())).toEqual(Array.from(v.dataSync())));
    expect(optB.getState().m.map((x) => Array.from(x))).toEqual(optA.getState().m.map((x) => Array.from(x)));
    expect(optB.stepCount).toBe(N + M);
    optA.dispose();
    optB.dispose();
    tf.dispose([...a, ...b]);
  });

  it('200 steps (with clipping and a name-keyed gradient map) keep the tensor count flat', () => {
    const vars = makeVars('leak', 3);
    const opt = new AdamW(vars, { lr: 1e-3 });
    const step = () => {
      const { value, grads } = tf.variableGrads(() => tf.addN(vars.map((v) => tf.sum(tf.square(v)))) as tf.Scalar, vars);
      const clipped = clipGradNorm(grads, 0.5);
      opt.step(clipped.grads);
      if (clipped.clipped) tf.dispose(Object.values(clipped.grads));
      tf.dispose([value, ...Object.values(grads)]);
    };
    step();
    const after1 = tf.memory().numTensors;
    for (let i = 0; i < 200; i++) step();
    expect(tf.memory().numTensors).toBe(after1);
    opt.dispose();
    expect(tf.memory().numTensors).toBe(after1 - 2 * vars.length);
    tf.dispose(vars);
  });

  it('errors name the field or variable', () => {
    const vars = makeVars('err', 4);
    expect(() => new AdamW(vars, { lr: -1 })).toThrow(/lr/);
    expect(() => new AdamW(vars, { betas: [0.9, 1] })).toThrow(/betas\[1\]/);
    expect(() => new AdamW(vars, { eps: Number.NaN })).toThrow(/eps/);
    expect(() => new AdamW(vars, { weightDecay: -0.1 })).toThrow(/weightDecay/);
    const opt = new AdamW(vars);
    expect(() => opt.setLearningRate(Number.POSITIVE_INFINITY)).toThrow(/lr/);
    expect(() => opt.step([null])).toThrow(/1 gradients for 3 variables/);
    const bad = tf.zeros([2, 2]);
    expect(() => opt.step([bad, null, null])).toThrow(/err_0.*shape/);
    expect(() => opt.step({ nope: bad })).toThrow(/'nope'/);
    const state = opt.getState();
    expect(() => opt.setState({ ...state, m: state.m.slice(1) })).toThrow(/2 m/);
    expect(() => opt.setState({ ...state, v: [new Float32Array(3), ...state.v.slice(1)] })).toThrow(/v\[0\].*err_0.*3 values/);
    expect(() => opt.setState({ ...state, config: { ...state.config, eps: -1 } })).toThrow(/eps/);
    expect(() => clipGradNorm([bad], -1)).toThrow(/maxNorm/);
    expect(() => clipGradNorm([tf.tensor([Number.NaN])], 1, { errorIfNonfinite: true })).toThrow(/NaN/);
    bad.dispose();
    opt.dispose();
    tf.dispose(vars);
  });

  it('sumOfSquares is accurate over a million entries (float64 accumulation of chunks)', () => {
    const n = 1_000_003;
    const data = new Float32Array(n);
    let exact = 0;
    for (let i = 0; i < n; i++) {
      data[i] = ((i % 97) - 48) / 7;
      exact += data[i] * data[i];
    }
    const t = tf.tensor(data);
    expect(Math.abs(sumOfSquares(t) - exact) / exact).toBeLessThan(1e-6);
    t.dispose();
  });
});
