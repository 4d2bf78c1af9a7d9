import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBackend, samplesOnDevice, setBackendLogger } from '../src/backend/index.js';
import { createTinyModel, loadCausalLM, type TfCausalLM } from '../src/model/index.js';
import { sampleNextTokens, sampleNextTokensOnDevice, type NextTokenOptions } from '../src/sampling/index.js';
import { createRng } from '../src/util/rng.js';
import { backendUnderTest } from './backend-under-test.js';

// Sampling on the device (what a decoding step does under torch on a GPU) draws the same tokens
// as the host path from the same seeded stream, with the same behaviour log-probs.

let tmp: string;
let model: TfCausalLM;

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend(backendUnderTest('wasm'));
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-sample-'));
  await createTinyModel({ dir: tmp, arch: 'qwen3', seed: 9, hiddenSize: 32, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 48 });
  model = await loadCausalLM(tmp);
});
afterAll(() => {
  model.dispose();
  delete process.env.COMLRL_SAMPLE_ON_DEVICE;
  setBackendLogger((l) => console.error(l));
  fs.rmSync(tmp, { recursive: true, force: true });
});

const OPTIONS: Array<[string, NextTokenOptions]> = [
  ['greedy', { greedy: true }],
  ['temperature 0.7', { temperature: 0.7 }],
  ['top-k 5', { topK: 5 }],
  ['top-p 0.9', { topP: 0.9 }],
  ['temperature 1.3, top-k 10, top-p 0.8', { temperature: 1.3, topK: 10, topP: 0.8 }],
];

describe('sampling on the device', () => {
  for (const [label, options] of OPTIONS) {
    it(`${label}: the same tokens and log-probs as the host, over 3 seeds × 8 rows`, async () => {
      for (const seed of [1, 2, 3]) {
        const values = createRng(100 + seed);
        const logits = tf.tensor2d(Float32Array.from({ length: 8 * 50 }, () => 4 * values.normal()), [8, 50]);
        const host = sampleNextTokens(logits.dataSync() as Float32Array, 50, options, createRng(seed));
        const device = await sampleNextTokensOnDevice(logits, options, createRng(seed));
        logits.dispose();
        expect(Array.from(device.tokens)).toEqual(Array.from(host.tokens));
        device.logProbs.forEach((lp, i) => expect(Math.abs(lp - host.logProbs[i])).toBeLessThan(1e-5));
      }
    });
  }

  it('refuses NaN or +Infinity logits as the host does, and leaves no tensor behind', async () => {
    const before = tf.memory().numTensors;
    const bad = tf.tensor2d([[0, NaN, 1]]);
    await expect(sampleNextTokensOnDevice(bad, { temperature: 1 }, createRng(1))).rejects.toThrow(/NaN or Infinity/);
    bad.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  it('generation gives the same sequences with COMLRL_SAMPLE_ON_DEVICE=1 as on the host', async () => {
    const prompts = [[1, 2, 3], [4, 5]];
    const opts = { maxNewTokens: 12, numReturnSequences: 2, temperature: 0.9, topP: 0.95, eosTokenIds: [] };
    process.env.COMLRL_SAMPLE_ON_DEVICE = '0';
    expect(samplesOnDevice()).toBe(false);
    const host = await model.generate(prompts, { ...opts, rng: createRng(7) });
    process.env.COMLRL_SAMPLE_ON_DEVICE = '1';
    expect(samplesOnDevice()).toBe(true);
    const device = await model.generate(prompts, { ...opts, rng: createRng(7) });
    delete process.env.COMLRL_SAMPLE_ON_DEVICE;
    expect(device.sequences).toEqual(host.sequences);
    device.logProbs.forEach((row, i) => row.forEach((lp, j) => expect(Math.abs(lp - host.logProbs[i][j])).toBeLessThan(1e-5)));
  });
});
