// A frozen LoRA base whose decoder layers stay in host memory (memory.offload_frozen_layers):
// the same numbers as a resident base, a fraction of the tensor memory, and flat over steps.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/index.js';
import { offloadsFrozenLayers, planMicroBatches } from '../src/memory/index.js';
import { createTinyModel, loadCausalLM, loraSectionSchema, loraSettings, type TfCausalLM } from '../src/model/index.js';
import { AdamW } from '../src/optim/adamw.js';
import { backendUnderTest } from './backend-under-test.js';

const GiB = 2 ** 30;
// Shapes of the tiny model, for hand-derived byte counts.
const H = 32;
const LAYERS = 2;
const HEADS = 4;
const KV = 2;
const HEAD_DIM = H / HEADS;
const INTER = 48;
const VOCAB = 600;

const settings = () => loraSettings(loraSectionSchema.parse({ r: 4, lora_alpha: 8, target_modules: 'all-linear' }));

let tmp: string;
let residentDir: string;
let offloadDir: string;

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend(backendUnderTest('wasm'));
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-offload-'));
  residentDir = path.join(tmp, 'resident');
  // The same checkpoint under a second directory: the registry shares a base per directory, so
  // an offloaded and a resident base of one checkpoint need two.
  offloadDir = path.join(tmp, 'offload');
  const shape = { arch: 'qwen3' as const, seed: 11, hiddenSize: H, numLayers: LAYERS, numHeads: HEADS, numKvHeads: KV, intermediateSize: INTER, vocabSize: VOCAB };
  await createTinyModel({ dir: residentDir, ...shape });
  fs.cpSync(residentDir, offloadDir, { recursive: true });
});
afterAll(() => {
  setBackendLogger((l) => console.error(l));
  fs.rmSync(tmp, { recursive: true, force: true });
});

async function loadPair(): Promise<{ resident: TfCausalLM; offloaded: TfCausalLM; residentBytes: number; offloadedBytes: number }> {
  let before = tf.memory().numBytes;
  const resident = await loadCausalLM(residentDir, { lora: { settings: settings(), seed: 'pair' }, memory: { offloadFrozenLayers: false } });
  const residentBytes = tf.memory().numBytes - before;
  before = tf.memory().numBytes;
  const offloaded = await loadCausalLM(offloadDir, { lora: { settings: settings(), seed: 'pair' }, memory: { offloadFrozenLayers: true } });
  const offloadedBytes = tf.memory().numBytes - before;
  return { resident, offloaded, residentBytes, offloadedBytes };
}

// One layer's linear weights: q [heads·d, H], k and v [kv·d, H], o [H, heads·d], gate and up [I, H], down [H, I].
const LAYER_LINEAR_BYTES = 4 * (2 * HEADS * HEAD_DIM * H + 2 * KV * HEAD_DIM * H + 3 * INTER * H);

const prompts = [[1, 2, 3, 4], [5, 6]];
const completions = [[7, 8, 9], [10, 11, 12, 13]];

function lossAndGrads(model: TfCausalLM): { loss: number; grads: Float32Array[] } {
  const vars = model.trainableVariables();
  const { value, grads } = tf.variableGrads(() => tf.neg(tf.mean(model.scoreCompletions(prompts, completions).tokenLogProbs)) as tf.Scalar, vars);
  const out = { loss: value.dataSync()[0], grads: vars.map((v) => grads[v.name].dataSync() as Float32Array) };
  value.dispose();
  tf.dispose(Object.values(grads));
  return out;
}

describe('a frozen base with offloaded layers', () => {
  it('holds only the embedding, norms and adapters as tensors: the layers weigh nothing on the heap', async () => {
    const { resident, offloaded, residentBytes, offloadedBytes } = await loadPair();
    try {
      expect(offloaded.lora!.base.hostBytes()).toBe(LAYERS * LAYER_LINEAR_BYTES);
      expect(resident.lora!.base.hostBytes()).toBe(0);
      expect(residentBytes - offloadedBytes).toBe(LAYERS * LAYER_LINEAR_BYTES);
      expect(offloaded.frozenLayerUploadBytes).toBe(LAYER_LINEAR_BYTES);
      expect(resident.frozenLayerUploadBytes).toBe(0);
    } finally {
      resident.dispose();
      offloaded.dispose();
    }
  });

  it('scores, differentiates and generates exactly as the resident base', async () => {
    const { resident, offloaded } = await loadPair();
    try {
      // B is zero at first: move it so the adapter takes part in every product.
      for (const m of [resident, offloaded]) {
        for (const v of m.trainableVariables()) v.assign(tf.tidy(() => tf.add(v, tf.mul(0.05, tf.sin(tf.range(0, v.size).reshape(v.shape))))));
      }
      const a = await resident.tokenLogProbs(prompts, completions);
      const b = await offloaded.tokenLogProbs(prompts, completions);
      a.forEach((row, i) => row.forEach((v, j) => expect(b[i][j]).toBeCloseTo(v, 6)));

      const ga = lossAndGrads(resident);
      const gb = lossAndGrads(offloaded);
      expect(gb.loss).toBeCloseTo(ga.loss, 6);
      let worst = 0;
      ga.grads.forEach((g, i) => g.forEach((v, j) => (worst = Math.max(worst, Math.abs(v - gb.grads[i][j]) / Math.max(1e-3, Math.abs(v))))));
      expect(worst).toBeLessThan(1e-5);

      const gen = { maxNewTokens: 6, greedy: true, eosTokenIds: [] };
      const sa = await resident.generate(prompts, gen);
      const sb = await offloaded.generate(prompts, gen);
      expect(sb.sequences).toEqual(sa.sequences);

      // The merged model (W + scale·B·A) reads the offloaded weights too: the same file.
      await resident.saveMerged(path.join(tmp, 'merged-resident'));
      await offloaded.saveMerged(path.join(tmp, 'merged-offload'));
      const file = (d: string) => fs.readFileSync(path.join(tmp, d, 'model.safetensors'));
      expect(file('merged-offload').equals(file('merged-resident'))).toBe(true);
    } finally {
      resident.dispose();
      offloaded.dispose();
    }
  }, 60_000);

  it('keeps the tensor count flat over 100 training steps, and frees everything with the model', async () => {
    const before = tf.memory().numTensors;
    const model = await loadCausalLM(offloadDir, { lora: { settings: settings(), seed: 'flat' }, memory: { offloadFrozenLayers: true } });
    const vars = model.trainableVariables();
    const opt = new AdamW(vars, { lr: 1e-2 });
    const step = () => {
      const { value, grads } = tf.variableGrads(() => tf.neg(tf.mean(model.scoreCompletions(prompts, completions).tokenLogProbs)) as tf.Scalar, vars);
      opt.step(vars.map((v) => grads[v.name]));
      value.dispose();
      tf.dispose(Object.values(grads));
    };
    const first = (await model.tokenLogProbs(prompts, completions)).flat().reduce((s, v) => s + v, 0);
    step();
    const count = tf.memory().numTensors;
    for (let i = 0; i < 99; i++) step();
    expect(tf.memory().numTensors).toBe(count);
    const last = (await model.tokenLogProbs(prompts, completions)).flat().reduce((s, v) => s + v, 0);
    expect(last).toBeGreaterThan(first);
    opt.dispose();
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
  }, 120_000);

  it('the planner recomputes its taped passes and reserves one layer of uploads', async () => {
    const { resident, offloaded } = await loadPair();
    try {
      const rows = [0, 1];
      const size = () => ({ width: 8, scored: 3 });
      const plan = planMicroBatches(offloaded, rows, size, { label: 'scoring', backward: true, memory: offloaded.memory });
      // The default budget is ample: recomputation comes from the offload alone.
      expect(plan.pass.recompute).toBe(true);
      // The least free memory a forward pass is planned with: one layer's uploads more when offloaded.
      const leastFree = (model: TfCausalLM): number => {
        let lo = 0;
        let hi = 64 * 2 ** 20;
        while (hi - lo > 1) {
          const mid = Math.floor((lo + hi) / 2);
          try {
            planMicroBatches(model, rows, size, { label: 'scoring', backward: false, memory: { ...model.memory, budgetBytes: tf.memory().numBytes + mid } });
            hi = mid;
          } catch {
            lo = mid;
          }
        }
        return hi;
      };
      const diff = leastFree(offloaded) - leastFree(resident);
      expect(Math.abs(diff - LAYER_LINEAR_BYTES)).toBeLessThan(0.1 * LAYER_LINEAR_BYTES);
    } finally {
      resident.dispose();
      offloaded.dispose();
    }
  });
});

describe("memory.offload_frozen_layers: 'auto'", () => {
  it('offloads on wasm when the layers take over a quarter of the budget, never on other backends', () => {
    const auto = { offloadFrozenLayers: 'auto' as const, budgetBytes: 4 * GiB };
    expect(offloadsFrozenLayers(1.01 * GiB, auto, 'wasm')).toBe(true);
    expect(offloadsFrozenLayers(0.99 * GiB, auto, 'wasm')).toBe(false);
    expect(offloadsFrozenLayers(3 * GiB, auto, 'tensorflow')).toBe(false);
    expect(offloadsFrozenLayers(1, { ...auto, offloadFrozenLayers: true }, 'tensorflow')).toBe(true);
    expect(offloadsFrozenLayers(3 * GiB, { ...auto, offloadFrozenLayers: false }, 'wasm')).toBe(false);
  });
});
