import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/index.js';
import { backendUnderTest, backendsUnderTest } from './backend-under-test.js';
import { createTinyModel, loadCausalLM, type TfCausalLM } from '../src/model/index.js';
import { chunkedTokenLogProbs, type HeadWeight } from '../src/model/lm-head.js';
import type { PassMemory } from '../src/model/types.js';

// The memory-bounding paths (attention in query blocks with a recomputing gradient, vocabulary
// logits in row chunks, per-layer recomputation) must give the loss and gradients of the plain
// one-shot computation up to float rounding. The one-shot reference is the same model with every
// bound large enough that nothing is split, and recompute off.

const PROMPTS = [[3, 8, 1, 17, 2, 9, 30], [12], [4, 4, 9, 20, 7]];
const COMPLETIONS = [[5, 6, 2, 11, 40, 41], [9, 9], [1]];
const HUGE = 1 << 30;

const ONE_SHOT: PassMemory = { attentionBlockBytes: HUGE, logitsChunkBytes: HUGE, recompute: false };

function lossAndGrads(model: TfCausalLM, pass: PassMemory): { loss: number; grads: Map<string, Float32Array> } {
  const vars = model.trainableVariables();
  const { value, grads } = tf.variableGrads(
    () => tf.tidy(() => tf.sum(tf.mul(model.scoreCompletions(PROMPTS, COMPLETIONS, pass).tokenLogProbs, tf.tensor1d([1, -0.5, 2]).reshape([3, 1])))) as tf.Scalar,
    vars,
  );
  const out = new Map<string, Float32Array>();
  for (const v of vars) out.set(v.name, grads[v.name].dataSync() as Float32Array);
  const loss = value.dataSync()[0];
  tf.dispose([value, ...Object.values(grads)]);
  return { loss, grads: out };
}

function relErr(a: Float32Array, b: Float32Array): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) {
    num += (a[i] - b[i]) ** 2;
    den += b[i] ** 2;
  }
  return Math.sqrt(num) / Math.max(Math.sqrt(den), 1e-12);
}

let root: string;
beforeAll(() => {
  setBackendLogger(null);
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-memmodel-'));
});
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

for (const backend of backendsUnderTest(['wasm', 'cpu'])) {
  describe(`memory-bounded passes equal one-shot passes (${backend})`, () => {
    let model: TfCausalLM;
    let reference: { loss: number; grads: Map<string, Float32Array> };
    beforeAll(async () => {
      await initBackend(backend);
      const dir = path.join(root, backend);
      await createTinyModel({ dir, arch: 'qwen3', seed: 5, tokenizer: 'word', hiddenSize: 32, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 48 });
      model = await loadCausalLM(dir);
      // Larger weights so that every path carries signal.
      tf.tidy(() => {
        for (const v of model.trainableVariables()) if (v.shape.length === 2) v.assign(tf.mul(v, 10));
      });
      reference = lossAndGrads(model, ONE_SHOT);
    });
    afterAll(() => model.dispose());

    const cases: Record<string, PassMemory> = {
      'attention in 1-query blocks': { attentionBlockBytes: 1, logitsChunkBytes: HUGE, recompute: false },
      'logits in 1-row chunks': { attentionBlockBytes: HUGE, logitsChunkBytes: 1, recompute: false },
      'per-layer recomputation': { attentionBlockBytes: HUGE, logitsChunkBytes: HUGE, recompute: true },
      'all three at once': { attentionBlockBytes: 1, logitsChunkBytes: 1, recompute: true },
    };
    for (const [name, memory] of Object.entries(cases)) {
      it(`${name}: loss and every gradient within 1e-5 relative`, () => {
        const before = tf.memory().numTensors;
        const got = lossAndGrads(model, memory);
        expect(tf.memory().numTensors).toBe(before);
        expect(Math.abs(got.loss - reference.loss)).toBeLessThanOrEqual(1e-5 * Math.abs(reference.loss));
        for (const [k, g] of reference.grads) expect(relErr(got.grads.get(k)!, g), k).toBeLessThan(1e-5);
      });
    }

    it('the gradient is not trivially zero (the comparison has something to compare)', () => {
      const norms = [...reference.grads.values()].map((g) => Math.hypot(...g));
      expect(norms.every((n) => n > 0)).toBe(true);
    });
  });
}

describe('memory-bounded passes with LoRA adapters (dropout on)', () => {
  // The adapter's B starts at zero, so it is set to noise first: every path then carries signal.
  // Dropout masks depend on the training-pass counter; the replayed pass must use the same masks,
  // so each measurement rewinds the counter to one value.
  let model: TfCausalLM;
  let lora: { dropoutPasses: number };
  let reference: { loss: number; grads: Map<string, Float32Array> };
  beforeAll(async () => {
    await initBackend(backendUnderTest('wasm'));
    const dir = path.join(root, 'lora-base');
    await createTinyModel({ dir, arch: 'qwen3', seed: 6, tokenizer: 'word', hiddenSize: 32, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 48 });
    model = await loadCausalLM(dir, {
      lora: { settings: { r: 4, loraAlpha: 8, loraDropout: 0.3, targetModules: 'all-linear', useRslora: false, layersToTransform: null, baseModelNameOrPath: null, revision: null }, seed: 'mem' },
    });
    tf.tidy(() => {
      for (const v of model.trainableVariables()) v.assign(tf.randomNormal(v.shape, 0, 0.3, 'float32', v.size));
    });
    lora = (model.decoder as unknown as { lora: { dropoutPasses: number } }).lora;
    lora.dropoutPasses = 10;
    reference = lossAndGrads(model, ONE_SHOT);
  });
  afterAll(() => model.dispose());

  it('recomputed layers with dropout give the same loss and adapter gradients within 1e-5', () => {
    lora.dropoutPasses = 10;
    const got = lossAndGrads(model, { attentionBlockBytes: 1, logitsChunkBytes: 1, recompute: true });
    expect(Math.abs(got.loss - reference.loss)).toBeLessThanOrEqual(1e-5 * Math.abs(reference.loss));
    for (const [k, g] of reference.grads) expect(relErr(got.grads.get(k)!, g), k).toBeLessThan(1e-5);
  });

  it('another dropout pass gives other gradients (the masks matter)', () => {
    lora.dropoutPasses = 11;
    const got = lossAndGrads(model, ONE_SHOT);
    expect(Math.abs(got.loss - reference.loss)).toBeGreaterThan(1e-3 * Math.abs(reference.loss));
  });
});

describe('vocabulary log-probs through a frozen head', () => {
  it('give the values and hidden-state gradients of the [V, H] head, in vocabulary blocks and row chunks', async () => {
    await initBackend(backendUnderTest('wasm'));
    const hidden = tf.randomNormal([7, 16], 0, 1, 'float32', 1) as tf.Tensor2D;
    const w = tf.randomNormal([37, 16], 0, 1, 'float32', 2) as tf.Tensor2D;
    const wT = tf.transpose(w) as tf.Tensor2D;
    const targets = Int32Array.from([0, 36, 5, 5, 17, 30, 2]);
    const dy = tf.tensor1d([1, -2, 0.5, 3, -1, 0.25, 2]);
    const f = (head: HeadWeight, chunk: number) => (x: tf.Tensor) => tf.sum(tf.mul(chunkedTokenLogProbs(x as tf.Tensor2D, head, targets, chunk), dy));
    // Reference: plain log-softmax autodiff on the [V, H] weight.
    const ref = (x: tf.Tensor) => tf.sum(tf.mul(tf.sum(tf.mul(tf.logSoftmax(tf.matMul(x as tf.Tensor2D, wT)), tf.tensor2d(Array.from(targets).flatMap((t) => Array.from({ length: 37 }, (_, j) => (j === t ? 1 : 0))), [7, 37])), 1), dy));
    const gRef = tf.grad(ref)(hidden).dataSync();
    for (const chunk of [1, 1 << 30]) {
      const frozen = tf.grad(f({ weight: w, frozen: true }, chunk))(hidden).dataSync();
      const plain = tf.grad(f({ weight: w, frozen: false }, chunk))(hidden).dataSync();
      expect(relErr(frozen as Float32Array, gRef as Float32Array)).toBeLessThan(1e-5);
      expect(relErr(plain as Float32Array, gRef as Float32Array)).toBeLessThan(1e-5);
    }
    tf.dispose([hidden, w, wT, dy]);
  });
});
