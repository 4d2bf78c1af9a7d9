import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeTorch, initBackend, setBackendLogger, torchBackend } from '../src/backend/index.js';
import { resolveTorchDevice } from '../src/backend/torch/index.js';
import { AdamW } from '../src/optim/adamw.js';
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
      expect(() => resolveTorchDevice(b.addon, 'cuda')).toThrow(/sees no CUDA GPU.*setup:torch -- --python/);
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
      bf16 = await loadCausalLM(tiny, { lora, memory: { frozenBaseDtype: 'bfloat16' } });
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
