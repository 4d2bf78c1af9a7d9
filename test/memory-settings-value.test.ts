// Memory settings are a value each model is loaded with, and a plan is what the planner returns:
// two models in one process plan by their own settings (a process-wide setting could not do
// this), and planning, scoring, generating or a training step leave the model object as it was.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/index.js';
import { BackendMemoryError, DEFAULT_MEMORY_SETTINGS, heldTensorBytes, inMemoryCrashWords, isBackendMemoryCrash, MemoryBudgetError } from '../src/memory/index.js';
import { createTinyModel, loadCausalLM, type TfCausalLM } from '../src/model/index.js';
import { linearPolicyLoss, sequenceLossGradients, type PolicyGradientRow } from '../trainers/core/loss.js';
import { backendUnderTest } from './backend-under-test.js';

let root: string;
beforeAll(async () => {
  setBackendLogger(null);
  await initBackend(backendUnderTest('wasm'));
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-memvalue-'));
  await createTinyModel({ dir: root, arch: 'qwen3', seed: 4, tokenizer: 'word', hiddenSize: 32, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 64 });
});
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const ROWS: PolicyGradientRow[] = Array.from({ length: 6 }, (_, i) => ({ promptIds: [1 + i, 2, 3, 4], completionIds: [5, 6 + i], coef: i % 2 === 0 ? 1 : -0.5 }));
const size = (r: PolicyGradientRow) => ({ width: r.promptIds.length + r.completionIds.length, scored: r.completionIds.length });

/** The model object's own fields, each by identity: what a write into the model would change. */
function fieldsOf(model: TfCausalLM): Map<string, unknown> {
  return new Map(Object.entries(model));
}

function expectUnchanged(model: TfCausalLM, before: Map<string, unknown>, memory: unknown): void {
  const after = fieldsOf(model);
  expect([...after.keys()]).toEqual([...before.keys()]);
  for (const [k, v] of before) expect(after.get(k), k).toBe(v);
  expect(model.memory).toEqual(memory);
}

describe('memory settings travel with each model', () => {
  it('two models in one process plan by their own settings, whatever the other planned', async () => {
    const pairs = await loadCausalLM(root, { memory: { microBatchSize: 2, recompute: true } });
    const fives = await loadCausalLM(root, { memory: { microBatchSize: 5 } });
    try {
      expect(pairs.memory).toEqual({ ...DEFAULT_MEMORY_SETTINGS, microBatchSize: 2, recompute: true });
      expect(fives.memory).toEqual({ ...DEFAULT_MEMORY_SETTINGS, microBatchSize: 5 });
      const options = { label: 't', backward: true };
      for (let round = 0; round < 2; round++) {
        const a = pairs.planPasses(ROWS, size, options);
        const b = fives.planPasses(ROWS, size, options);
        expect(a.batches.map((x) => x.length)).toEqual([2, 2, 2]);
        expect(b.batches.map((x) => x.length)).toEqual([5, 1]);
        expect(a.batches.flat()).toEqual(ROWS);
        // recompute: true in one model's settings, 'auto' (not needed here) in the other's.
        expect(a.pass.recompute).toBe(true);
        expect(b.pass.recompute).toBe(false);
      }
      // The same step on both: the loss of one set of weights, however each split it.
      const la = sequenceLossGradients(pairs, ROWS, linearPolicyLoss);
      const lb = sequenceLossGradients(fives, ROWS, linearPolicyLoss);
      tf.dispose([...Object.values(la.grads), ...Object.values(lb.grads)]);
      expect(Math.abs(la.loss - lb.loss)).toBeLessThanOrEqual(1e-5 * Math.abs(lb.loss));
    } finally {
      pairs.dispose();
      fives.dispose();
    }
  });

  it("one model's budget refuses its own training step and leaves the other model's alone", async () => {
    const roomy = await loadCausalLM(root);
    const weights = roomy.trainableVariables().reduce((a, v) => a + v.size * 4, 0);
    const tight = await loadCausalLM(root, { memory: { budgetBytes: heldTensorBytes() + weights + 1024 } });
    try {
      for (let round = 0; round < 2; round++) {
        expect(() => sequenceLossGradients(tight, ROWS, linearPolicyLoss, { label: 'tight' })).toThrow(MemoryBudgetError);
        const g = sequenceLossGradients(roomy, ROWS, linearPolicyLoss, { label: 'roomy' });
        tf.dispose(Object.values(g.grads));
        expect(Number.isFinite(g.loss)).toBe(true);
      }
    } finally {
      tight.dispose();
      roomy.dispose();
    }
  });

  it('planning, scoring, generating and a training step leave the model object unchanged', async () => {
    const memory = { budgetBytes: 2 ** 30, microBatchSize: 2 as const, attentionBlockBytes: 2 ** 20 };
    const model = await loadCausalLM(root, { memory });
    try {
      const before = fieldsOf(model);
      const settings = { ...DEFAULT_MEMORY_SETTINGS, ...memory };
      const plan = model.planPasses(ROWS, size, { label: 't', backward: true });
      expect(plan.pass.attentionBlockBytes).toBeLessThanOrEqual(2 ** 20);
      expectUnchanged(model, before, settings);
      await model.tokenLogProbs(ROWS.map((r) => [...r.promptIds]), ROWS.map((r) => [...r.completionIds]));
      expectUnchanged(model, before, settings);
      await model.generate([[1, 2, 3]], { maxNewTokens: 3, greedy: true, eosTokenIds: [] });
      expectUnchanged(model, before, settings);
      const g = sequenceLossGradients(model, ROWS, linearPolicyLoss);
      tf.dispose(Object.values(g.grads));
      expectUnchanged(model, before, settings);
    } finally {
      model.dispose();
    }
  });
});

describe('a backend crash', () => {
  it('is said in words with the budget of the settings the run used, and only once', () => {
    const crash = new Error('memory access out of bounds');
    const said = inMemoryCrashWords(crash, 'wasm', 3 * 2 ** 30);
    expect(said).toBeInstanceOf(BackendMemoryError);
    expect((said as Error).message).toMatch(/^ran out of memory: the wasm backend's heap .*comlrl's budget was 3(\.0+)? GiB/);
    expect((said as Error).cause).toBe(crash);
    // The CLI's last resort (cli/main.ts) leaves an error already said alone.
    expect(isBackendMemoryCrash(said)).toBe(false);
    const bug = new TypeError("Cannot read properties of undefined (reading 'shape')");
    expect(inMemoryCrashWords(bug, 'wasm', 3 * 2 ** 30)).toBe(bug);
  });
});

describe('the planner is called from one layer', () => {
  // src/model plans (CausalLM.planPasses, generate, tokenLogProbs); value models and trainers ask it.
  const files = (dir: string): string[] =>
    fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : []));

  it('only src/model/causal-lm.ts calls planMicroBatches / planGeneration, and nothing sets memory globally', () => {
    const callers: string[] = [];
    const globals: string[] = [];
    for (const top of ['src', 'trainers', 'cli', 'envs', 'rewards', 'bench']) {
      for (const f of files(path.join(process.cwd(), top))) {
        const rel = path.relative(process.cwd(), f);
        const text = fs.readFileSync(f, 'utf8');
        if (/\b(planMicroBatches|planGeneration)\(/.test(text) && !rel.startsWith(path.join('src', 'memory'))) callers.push(rel);
        if (/\bconfigureMemory\b|\b(model|backbone|this)\.memory\s*=[^=]/.test(text)) globals.push(rel);
      }
    }
    expect(callers).toEqual([path.join('src', 'model', 'causal-lm.ts')]);
    // (`memory` is readonly on CausalLM too: a write into a model does not compile.)
    expect(globals).toEqual([]);
  });
});
