// Joint passes of LoRA agents on one frozen base (src/model/lora/joint.ts) against each agent's
// own passes: the same sampled tokens, log-probs and gradients, with 2 and 3 agents, prompts of
// different lengths (left padding in generation, right padding in scoring), different numbers of
// samples and token limits per agent, and rows that stop early.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/index.js';
import { createTinyModel, JointLoraPasses, loadCausalLM, loraSectionSchema, loraSettings, type GenerationOutput, type SamplingOptions, type TfCausalLM } from '../src/model/index.js';
import { unplannedPass } from '../src/memory/plan.js';
import { createRng } from '../src/util/rng.js';
import { backendUnderTest } from './backend-under-test.js';

const VOCAB = 600;
let tmp: string;
let baseDir: string;
let otherDir: string;
const models: TfCausalLM[] = [];

const settings = (dropout = 0) => loraSettings(loraSectionSchema.parse({ r: 4, lora_alpha: 8, lora_dropout: dropout, target_modules: 'all-linear' }));

/** Gives adapter B matrices values (fresh ones are zero, which would make every agent the base). */
function perturb(model: TfCausalLM, seed: string): void {
  const rng = createRng(seed);
  for (const v of model.trainableVariables()) {
    if (!v.name.endsWith('lora_B')) continue;
    const data = Float32Array.from({ length: v.size }, () => (rng.next() - 0.5) * 0.6);
    tf.tidy(() => v.assign(tf.tensor(data, v.shape)));
  }
}

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend(backendUnderTest('wasm'));
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-joint-'));
  baseDir = path.join(tmp, 'base');
  otherDir = path.join(tmp, 'other');
  await createTinyModel({ dir: baseDir, arch: 'qwen3', seed: 5, hiddenSize: 32, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 48, vocabSize: VOCAB });
  fs.cpSync(baseDir, otherDir, { recursive: true });
  for (let i = 0; i < 3; i++) {
    const m = await loadCausalLM(baseDir, { lora: { settings: settings(), seed: `agent${i}` } });
    perturb(m, `b${i}`);
    models.push(m);
  }
});
afterAll(() => {
  for (const m of models) m.dispose();
  setBackendLogger((l) => console.error(l));
  fs.rmSync(tmp, { recursive: true, force: true });
});

// Per agent: prompts of different lengths, K, token limit and sampling settings; a few frequent
// ids stop rows early.
const requests = (n: number) =>
  [
    { prompts: [[3, 9, 14, 2, 7, 11]], k: 4, options: { maxNewTokens: 12, temperature: 1, topP: 1, topK: 0 } },
    { prompts: [[5, 6], [8, 1, 4]], k: 2, options: { maxNewTokens: 9, temperature: 0.7, topP: 0.9, topK: 0 } },
    { prompts: [[12, 13, 40, 41, 42, 43, 44, 45, 46]], k: 3, options: { maxNewTokens: 12, temperature: 1.3, topP: 1, topK: 20 } },
  ].slice(0, n);
const STOPS = Array.from({ length: 40 }, (_, i) => 100 + i);

function samplingOptions(i: number, r: ReturnType<typeof requests>[number]): SamplingOptions {
  return { ...r.options, numReturnSequences: r.k, eosTokenIds: [0], stopTokenIds: STOPS, rng: createRng(`draws${i}`) };
}

function maxAbsDiff(a: readonly number[], b: readonly number[]): number {
  expect(a.length).toBe(b.length);
  return a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);
}

describe.each([2, 3])('joint passes of %i LoRA agents on one base', (n) => {
  it('sample the same tokens with the same log-probs as per-agent generation', async () => {
    const reqs = requests(n);
    const alone: GenerationOutput[] = [];
    for (let i = 0; i < n; i++) alone.push(await models[i].generate(reqs[i].prompts, samplingOptions(i, reqs[i])));
    const joint = JointLoraPasses.of(models.slice(0, n));
    expect(joint).not.toBeNull();
    const before = tf.memory().numTensors;
    const together = await joint!.generate(reqs.map((r, i) => ({ promptIds: r.prompts, options: samplingOptions(i, r) })));
    expect(tf.memory().numTensors).toBe(before);
    for (let i = 0; i < n; i++) {
      expect(together[i].sequences).toEqual(alone[i].sequences);
      expect(together[i].finished).toEqual(alone[i].finished);
      expect(maxAbsDiff(together[i].logProbs.flat(), alone[i].logProbs.flat())).toBeLessThan(1e-5);
    }
    // The case is the one named: rows stopped early beside rows that ran to their limit, and the
    // agents' adapters matter (a pass that gave every row agent 0's delta would not match).
    const lengths = alone.flatMap((o) => o.sequences.map((s) => s.length));
    expect(lengths.some((l, j) => l < Math.max(...lengths) && alone.flatMap((o) => o.finished)[j])).toBe(true);
    expect(alone.flatMap((o) => o.finished).some((f) => !f)).toBe(true);
    const probe = [[3, 9, 14]];
    const lp0 = await models[0].tokenLogProbs(probe, [[20, 21]]);
    const lp1 = await models[1].tokenLogProbs(probe, [[20, 21]]);
    expect(maxAbsDiff(lp0[0], lp1[0])).toBeGreaterThan(1e-3);
  });

  it('score and differentiate each agent as its own passes do', async () => {
    const groups = Array.from({ length: n }, (_, i) => ({
      promptIds: [[2, 3, 4 + i], [9, 8, 7, 6, 5], [11]],
      completionIds: [[30, 31, 32, 33], [34], [35 + i, 36, 37]],
    }));
    const alone = await Promise.all(groups.map((g, i) => models[i].tokenLogProbs(g.promptIds, g.completionIds)));
    const joint = JointLoraPasses.of(models.slice(0, n))!;
    const together = await joint.tokenLogProbs(groups);
    for (let i = 0; i < n; i++) expect(maxAbsDiff(together[i].flat(), alone[i].flat())).toBeLessThan(1e-5);

    // loss = −Σ_i Σ_rows c_{i,r} · Σ_t log p: each agent's gradient is its own loss's.
    const coefs = groups.map((g, i) => g.promptIds.map((_, r) => (r + 1) * (i % 2 === 0 ? 1 : -0.5)));
    const pass = unplannedPass(models[0].memory);
    const lossOf = (scores: tf.Tensor2D, c: number[]) => tf.neg(tf.sum(tf.mul(tf.sum(scores, 1), tf.tensor1d(c))));
    const own = groups.map((g, i) =>
      tf.variableGrads(() => lossOf(models[i].scoreCompletions(g.promptIds, g.completionIds, pass).tokenLogProbs, coefs[i]) as tf.Scalar, models[i].trainableVariables()),
    );
    const before = tf.memory().numTensors;
    const both = tf.variableGrads(
      () => tf.tidy(() => tf.addN(joint.scoreCompletions(groups, pass).map((s, i) => lossOf(s.tokenLogProbs, coefs[i]))) as tf.Scalar),
      joint.trainableVariables(),
    );
    expect(both.value.dataSync()[0]).toBeCloseTo(own.reduce((a, o) => a + o.value.dataSync()[0], 0), 4);
    for (let i = 0; i < n; i++) {
      for (const v of models[i].trainableVariables()) {
        const a = own[i].grads[v.name].dataSync();
        const b = both.grads[v.name].dataSync();
        expect(maxAbsDiff(Array.from(b), Array.from(a))).toBeLessThan(1e-5);
      }
    }
    both.value.dispose();
    tf.dispose(Object.values(both.grads));
    expect(tf.memory().numTensors).toBe(before);
    for (const o of own) {
      o.value.dispose();
      tf.dispose(Object.values(o.grads));
    }
  });
});

describe('where joint passes apply', () => {
  it('only to LoRA models on one loaded base, and taped passes only without dropout', async () => {
    const other = await loadCausalLM(otherDir, { lora: { settings: settings(), seed: 'x' } });
    const full = await loadCausalLM(baseDir);
    const dropped = await loadCausalLM(baseDir, { lora: { settings: settings(0.1), seed: 'd' } });
    try {
      expect(JointLoraPasses.of([models[0]])).toBeNull();
      expect(JointLoraPasses.of([models[0], other])).toBeNull();
      expect(JointLoraPasses.of([models[0], full])).toBeNull();
      const withDropout = JointLoraPasses.of([models[0], dropped])!;
      expect(withDropout.trainable).toBe(false);
      const g = { promptIds: [[1, 2]], completionIds: [[3]] };
      expect(() => tf.variableGrads(() => tf.sum(withDropout.scoreCompletions([g, g], unplannedPass(models[0].memory))[0].tokenLogProbs) as tf.Scalar, withDropout.trainableVariables())).toThrow(/lora_dropout.*joint_passes: false/);
    } finally {
      other.dispose();
      full.dispose();
      dropped.dispose();
    }
  });
});
