import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeTorch, holdInBfloat16, initBackend, setBackendLogger, torchBackend } from '../src/backend/index.js';
import { BF16_ROWS_WITHOUT_UNITS } from '../src/backend/torch/kernels.js';
import { resolveTorchDevice } from '../src/backend/torch/index.js';
import { AdamW } from '../src/optim/adamw.js';
import { heldTensorBytes } from '../src/memory/plan.js';
import { createTinyModel, liveFrozenBases, loadCausalLM, loraSectionSchema, loraSettings, type TfCausalLM } from '../src/model/index.js';

// The torch backend's own behaviour (its kernels are checked in torch-kernels.test.ts): the device
// rule, the bfloat16 frozen-base option, and that no torch tensor outlives its tfjs tensor.

let tmp: string;
let tiny: string;
const lines: string[] = [];

beforeAll(async () => {
  setBackendLogger((l) => lines.push(l));
  await initBackend('torch');
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-torch-'));
  tiny = path.join(tmp, 'tiny');
  await createTinyModel({ dir: tiny, arch: 'qwen3', seed: 5, hiddenSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 96 });
});
afterAll(() => {
  setBackendLogger((l) => console.error(l));
  fs.rmSync(tmp, { recursive: true, force: true });
});

const lora = { settings: loraSettings(loraSectionSchema.parse({ r: 4, lora_alpha: 8, target_modules: 'all-linear' })), seed: '1' };
const prompts = [[1, 2, 3, 4], [5, 6]];
const completions = [[7, 8, 9], [10, 11]];

function liveHandles(): number {
  const b = torchBackend();
  if (b === null) throw new Error('torch backend not initialised');
  return Number(b.addon.runtime('live', 0));
}

describe('torch backend', () => {
  it('announces itself with the torch version and the device', () => {
    expect(lines).toEqual([expect.stringMatching(/^\[comlrl\] backend: torch \(torch \S+ on (cpu, \d+ threads?|cuda:\d+)\)$/)]);
    expect(describeTorch()).toMatch(/^torch \d+\.\d+\.\d+\S* on (cpu, \d+ threads?|cuda:\d+)$/);
  });

  it('device: cuda is refused in words without a GPU, cpu always works, a bad name is named', () => {
    const b = torchBackend();
    if (b === null) throw new Error('torch backend not initialised');
    expect(resolveTorchDevice(b.addon, 'cpu')).toBe('cpu');
    const gpus = Number(b.addon.runtime('cuda_devices', 0));
    if (gpus === 0) {
      expect(() => resolveTorchDevice(b.addon, 'cuda')).toThrow(/sees no CUDA GPU.*npx comlrl setup torch --python/);
      expect(resolveTorchDevice(b.addon, 'auto')).toBe('cpu');
    } else {
      expect(resolveTorchDevice(b.addon, 'cuda')).toBe('cuda:0');
      expect(() => resolveTorchDevice(b.addon, `cuda:${gpus}`)).toThrow(/only \d+ CUDA device/);
    }
    expect(() => resolveTorchDevice(b.addon, 'gpu')).toThrow(/torch device 'gpu': expected cpu, cuda or cuda:N/);
  });

  it('a bfloat16 frozen base: its own base, log-probs within 0.05 nats of float32 (but not equal), and LoRA still trains', async () => {
    const f32 = await loadCausalLM(tiny, { lora });
    let bf16: TfCausalLM | null = null;
    try {
      const before = { tfjs: tf.memory().numBytes, held: heldTensorBytes() };
      bf16 = await loadCausalLM(tiny, { lora, memory: { frozenBaseDtype: 'bfloat16' } });
      // The memory plan counts the bfloat16-held matrices at 2 bytes (tfjs sees them as float32):
      // the held bytes grow by what tfjs counts, less 2 bytes for each of their elements.
      const cfg = bf16.decoderConfig;
      const matrices =
        cfg.numLayers * cfg.hiddenSize * (cfg.numHeads * cfg.headDim * 2 + cfg.numKvHeads * cfg.headDim * 2 + cfg.intermediateSize * 3) + cfg.vocabSize * cfg.hiddenSize;
      expect(heldTensorBytes() - before.held).toBe(tf.memory().numBytes - before.tfjs - 2 * matrices);
      // Two bases: a float32 one is never shared with a bfloat16 request.
      expect((await liveFrozenBases()).length).toBe(2);
      const a = await f32.tokenLogProbs(prompts, completions);
      const b = await bf16.tokenLogProbs(prompts, completions);
      let drift = 0;
      a.forEach((row, i) => row.forEach((v, j) => (drift = Math.max(drift, Math.abs(v - b[i][j])))));
      console.log(`bfloat16 frozen base: max per-token log-prob drift ${drift.toExponential(2)} nats (hidden 64, 2 layers)`);
      expect(drift).toBeGreaterThan(0);
      expect(drift).toBeLessThan(0.05);

      const vars = bf16.trainableVariables();
      const opt = new AdamW(vars, { lr: 1e-2 });
      const loss = (m: TfCausalLM) => () => tf.neg(tf.mean(m.scoreCompletions(prompts, completions).tokenLogProbs)) as tf.Scalar;
      const losses: number[] = [];
      for (let step = 0; step < 8; step++) {
        const { value, grads } = tf.variableGrads(loss(bf16), vars);
        losses.push(value.dataSync()[0]);
        opt.step(grads);
        value.dispose();
        Object.values(grads).forEach((g) => g.dispose());
      }
      expect(losses[losses.length - 1]).toBeLessThan(losses[0]);
    } finally {
      bf16?.dispose();
      f32.dispose();
    }
  });

  it('a bfloat16-held weight: few rows multiply in bfloat16, more rows (without bf16 units) against its float32 copy', () => {
    const b = torchBackend();
    if (b === null) throw new Error('torch backend not initialised');
    const w = tf.randomNormal([96, 64], 0, 1, 'float32', 3);
    // The weight as bfloat16 holds it: rounded to 8 bits of mantissa (round to nearest even).
    const rounded = tf.tensor(Float32Array.from(w.dataSync(), (v) => {
      const u = new Uint32Array(new Float32Array([v]).buffer)[0];
      return new Float32Array(new Uint32Array([((u + 0x7fff + ((u >> 16) & 1)) >>> 16) << 16]).buffer)[0];
    }), w.shape);
    holdInBfloat16(w);
    for (const rows of [BF16_ROWS_WITHOUT_UNITS, BF16_ROWS_WITHOUT_UNITS + 1, 40]) {
      const x = tf.randomNormal([rows, 64], 0, 1, 'float32', rows);
      const got = tf.matMul(x, w, false, true).dataSync();
      const want = tf.matMul(x, rounded, false, true).dataSync();
      let err = 0;
      got.forEach((v, i) => (err = Math.max(err, Math.abs(v - want[i]))));
      // bfloat16 products also round x: errors of ~1e-2 on values of ~8; float32 ones ~1e-5.
      if (rows <= BF16_ROWS_WITHOUT_UNITS || b.bf16Units) expect(err, `${rows} rows`).toBeGreaterThan(1e-4);
      else expect(err, `${rows} rows`).toBeLessThan(1e-4);
      expect(err, `${rows} rows`).toBeLessThan(0.2);
      x.dispose();
    }
    tf.dispose([w, rounded]);
  });

  it('no torch tensor outlives its tfjs tensor: live handles track tfjs data over training steps', async () => {
    const model = await loadCausalLM(tiny, { lora });
    try {
      const vars = model.trainableVariables();
      const opt = new AdamW(vars, { lr: 1e-3 });
      const step = (): void => {
        const { value, grads } = tf.variableGrads(() => tf.neg(tf.mean(model.scoreCompletions(prompts, completions).tokenLogProbs)) as tf.Scalar, vars);
        opt.step(grads);
        value.dispose();
        Object.values(grads).forEach((g) => g.dispose());
      };
      step();
      const tensors = tf.memory().numTensors;
      const handles = liveHandles();
      for (let i = 0; i < 5; i++) step();
      expect(tf.memory().numTensors).toBe(tensors);
      expect(liveHandles()).toBe(handles);
      expect(liveHandles()).toBe(torchBackend()?.numDataIds());
    } finally {
      model.dispose();
    }
  });
});
