import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/index.js';
import { createTinyModel, loadCausalLM, type TfCausalLM } from '../src/model/index.js';
import { AdamW } from '../src/optim/index.js';
import { backendUnderTest } from './backend-under-test.js';

let dir: string;
let model: TfCausalLM;

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend(backendUnderTest('wasm'));
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-mem-'));
  await createTinyModel({ dir, arch: 'qwen2', seed: 1, tokenizer: 'word', hiddenSize: 32, numLayers: 2 });
  model = await loadCausalLM(dir);
});
afterAll(() => {
  model.dispose();
  fs.rmSync(dir, { recursive: true, force: true });
});

it('200 AdamW steps on summed completion log-probs keep tf.memory().numTensors flat', () => {
  const prompts = [[1, 2, 3], [4], [5, 6, 7, 8, 9]];
  const completions = [[10, 11], [12, 13, 14, 15], [16]];
  const opt = new AdamW(model.trainableVariables(), { lr: 1e-2 });
  const losses: number[] = [];
  const counts: number[] = [];
  for (let s = 0; s < 200; s++) {
    const { value, grads } = tf.variableGrads(() => {
      const { tokenLogProbs, mask } = model.scoreCompletions(prompts, completions);
      return tf.neg(tf.div(tf.sum(tokenLogProbs), tf.sum(mask))) as tf.Scalar;
    }, model.trainableVariables());
    opt.step(grads);
    losses.push(value.dataSync()[0]);
    tf.dispose([value, ...Object.values(grads)]);
    counts.push(tf.memory().numTensors);
  }
  opt.dispose();
  // The first step allocates AdamW's moments; after that the count must not move.
  expect(new Set(counts.slice(1))).toEqual(new Set([counts[1]]));
  // And training actually happened: the loss of this fixed batch fell a lot.
  expect(losses[199]).toBeLessThan(losses[0] * 0.5);
});
