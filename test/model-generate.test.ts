import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/index.js';
import { createTinyModel, loadCausalLM, type MemorySettings, type TfCausalLM } from '../src/model/index.js';
import { createRng } from '../src/util/rng.js';
import { backendUnderTest } from './backend-under-test.js';

let dir: string;
let model: TfCausalLM;

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend(backendUnderTest('wasm'));
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-gen-'));
  // Larger init than the default 0.02 would be nicer, but greedy paths differ enough already.
  await createTinyModel({ dir, arch: 'qwen3', seed: 7, tokenizer: 'word', hiddenSize: 32, numLayers: 2, numHeads: 4, numKvHeads: 2 });
  model = await loadSharpened();
});

/** The tiny model of `dir`, with `memory` settings. */
async function loadSharpened(memory: Partial<MemorySettings> = {}): Promise<TfCausalLM> {
  const m = await loadCausalLM(dir, { memory });
  // Sharpen the random model so greedy/sampled paths are not all the same token.
  tf.tidy(() => {
    for (const v of m.trainableVariables()) if (v.shape.length === 2) v.assign(tf.mul(v, 40));
  });
  return m;
}

afterAll(() => {
  model?.dispose();
  fs.rmSync(dir, { recursive: true, force: true });
});

const PROMPTS = [[5, 9, 11, 3], [7], [12, 4, 4, 8, 20, 21, 2]];

/** Greedy decoding by recomputing one unpadded sequence at a time from the full logits. */
function greedyReference(prompt: number[], steps: number, stop: Set<number>): number[] {
  const seq = [...prompt];
  const out: number[] = [];
  for (let t = 0; t < steps; t++) {
    const row = tf.tidy(() => {
      const logits = model.logits([seq]);
      return logits.slice([0, seq.length - 1, 0], [1, 1, model.vocabSize]).dataSync();
    });
    let best = 0;
    for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
    out.push(best);
    seq.push(best);
    if (stop.has(best)) break;
  }
  return out;
}

describe('scoring shapes', () => {
  it('right padding does not change a row: hidden states and log-probs equal the unbatched ones', async () => {
    const batch = model.hiddenStates([[5, 9, 11, 3], [7, 2]]);
    const alone = model.hiddenStates([[7, 2]]);
    expect(batch.shape).toEqual([2, 4, model.hiddenSize]);
    const a = batch.slice([1, 0, 0], [1, 2, model.hiddenSize]).dataSync();
    const b = alone.dataSync();
    a.forEach((v, i) => expect(Math.abs(v - b[i])).toBeLessThan(1e-5));
    tf.dispose([batch, alone]);
    // tokenLogProbs in several passes (one row per micro-batch) equals one pass.
    const prompts = [[1, 2], [3], [4, 5, 6], [7]];
    const comps = [[8, 9, 10], [11], [], [12, 13]];
    const whole = await model.tokenLogProbs(prompts, comps);
    // The same weights under micro_batch_size 1.
    const oneRow = await loadSharpened({ microBatchSize: 1 });
    try {
      expect(oneRow.planPasses([0, 1, 2, 3], () => ({ width: 3, scored: 1 }), { label: 't', backward: false }).batches).toHaveLength(4);
      const parts = await oneRow.tokenLogProbs(prompts, comps);
      expect(parts.map((r) => r.length)).toEqual([3, 1, 0, 2]);
      parts.forEach((r, i) => r.forEach((v, j) => expect(Math.abs(v - whole[i][j])).toBeLessThan(1e-5)));
    } finally {
      oneRow.dispose();
    }
  });
});

describe('generate', () => {
  it('greedy with the KV cache equals step-by-step recomputation (batched, ragged prompts)', async () => {
    const steps = 12;
    const cached = await model.generate(PROMPTS, { maxNewTokens: steps, greedy: true, eosTokenIds: [] });
    const recomputed = await model.generateWith(PROMPTS, { maxNewTokens: steps, greedy: true, eosTokenIds: [] }, 'recompute');
    expect(cached.sequences).toEqual(recomputed.sequences);
    for (let i = 0; i < PROMPTS.length; i++) {
      expect(cached.sequences[i]).toEqual(greedyReference(PROMPTS[i], steps, new Set()));
      expect(cached.sequences[i]).toHaveLength(steps);
      expect(cached.finished[i]).toBe(false);
    }
    // Not all the same token: the check above would be weak on a degenerate model.
    expect(new Set(cached.sequences.flat()).size).toBeGreaterThan(3);
  });

  it('stops at a stop id (kept in the output) and only that row', async () => {
    const free = await model.generate(PROMPTS, { maxNewTokens: 10, greedy: true, eosTokenIds: [] });
    const stopId = free.sequences[1][3];
    const out = await model.generate(PROMPTS, { maxNewTokens: 10, greedy: true, eosTokenIds: [], stopTokenIds: [stopId] });
    for (let i = 0; i < PROMPTS.length; i++) {
      const k = free.sequences[i].indexOf(stopId);
      const expected = k < 0 ? free.sequences[i] : free.sequences[i].slice(0, k + 1);
      expect(out.sequences[i]).toEqual(expected);
      expect(out.finished[i]).toBe(k >= 0);
      expect(out.logProbs[i]).toHaveLength(expected.length);
    }
  });

  it('a fixed seed repeats; another seed differs; numReturnSequences is prompt-major', async () => {
    const opts = { maxNewTokens: 8, temperature: 1.3, topK: 20, topP: 0.95, numReturnSequences: 3, eosTokenIds: [] };
    const a = await model.generate(PROMPTS, { ...opts, rng: createRng(42) });
    const b = await model.generate(PROMPTS, { ...opts, rng: createRng(42) });
    const c = await model.generate(PROMPTS, { ...opts, rng: createRng(43) });
    expect(a.sequences).toHaveLength(PROMPTS.length * 3);
    expect(a).toEqual(b);
    expect(c.sequences).not.toEqual(a.sequences);
    // Three samples of the same prompt are not all identical.
    expect(new Set(a.sequences.slice(0, 3).map((s) => s.join(','))).size).toBeGreaterThan(1);
  });

  it('at temperature 1 without filtering, sampled log-probs equal teacher-forced log-probs', async () => {
    const out = await model.generate(PROMPTS, { maxNewTokens: 9, rng: createRng(5), numReturnSequences: 2, eosTokenIds: [] });
    const prompts = out.sequences.map((_, i) => PROMPTS[Math.floor(i / 2)]);
    const scored = await model.tokenLogProbs(prompts, out.sequences);
    out.logProbs.forEach((row, i) => row.forEach((lp, j) => expect(Math.abs(lp - scored[i][j])).toBeLessThan(2e-4)));
  });

  it('cached and recomputed generation leave no tensors behind', async () => {
    const before = tf.memory().numTensors;
    await model.generate([[1, 2, 3]], { maxNewTokens: 20, rng: createRng(1), eosTokenIds: [] });
    await model.generateWith([[1, 2, 3]], { maxNewTokens: 20, rng: createRng(1), eosTokenIds: [] }, 'recompute');
    expect(tf.memory().numTensors).toBe(before);
  });

  it('rejects empty prompts and bad options with messages naming them', async () => {
    await expect(model.generate([[]], { maxNewTokens: 2, greedy: true })).rejects.toThrow(/promptIds\[0\]/);
    await expect(model.generate([[1]], { maxNewTokens: -1, greedy: true })).rejects.toThrow(/maxNewTokens/);
    await expect(model.generate([[1]], { maxNewTokens: 2 })).rejects.toThrow(/rng/);
    await expect(model.generate([[1]], { maxNewTokens: 2, greedy: true, numReturnSequences: 0 })).rejects.toThrow(/numReturnSequences/);
  });
});
