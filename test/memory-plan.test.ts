import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/index.js';
import { wasmHeapBytes } from '../src/logging/memory.js';
import {
  DEFAULT_MEMORY_SETTINGS,
  heldTensorBytes,
  isBackendMemoryCrash,
  MemoryBudgetError,
  parseBytes,
  passBytes,
  planMicroBatches,
  type MemorySettings,
} from '../src/memory/index.js';
import { createTinyModel, loadCausalLM, type TfCausalLM } from '../src/model/index.js';
import { createCriticHead } from '../src/critic/heads.js';
import { ValueModel } from '../src/critic/value-model.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { rngFor } from '../src/util/rng.js';
import { linearPolicyLoss, sequenceLossGradients, type PolicyGradientRow } from '../trainers/core/loss.js';

let root: string;
let model: TfCausalLM;

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend('wasm');
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-memplan-'));
  await createTinyModel({ dir: root, arch: 'qwen3', seed: 7, tokenizer: 'word', hiddenSize: 32, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 64 });
  model = await loadCausalLM(root);
});
afterAll(() => {
  model.dispose();
  fs.rmSync(root, { recursive: true, force: true });
});

/** The default settings with `changes`: what a plan below is made under. */
const settings = (changes: Partial<MemorySettings>): MemorySettings => ({ ...DEFAULT_MEMORY_SETTINGS, ...changes });

/** The test model loaded again with a budget that leaves about `spare` bytes once its weights are in. */
async function tightModel(spare = 1024): Promise<TfCausalLM> {
  const weights = model.trainableVariables().reduce((a, v) => a + v.size * 4, 0);
  return loadCausalLM(root, { memory: { budgetBytes: heldTensorBytes() + weights + spare } });
}

const rng = (seed: number) => () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
function rows(n: number, seed = 1): PolicyGradientRow[] {
  const r = rng(seed);
  return Array.from({ length: n }, (_, i) => ({
    promptIds: Array.from({ length: 3 + Math.floor(r() * 20) }, () => 1 + Math.floor(r() * 40)),
    completionIds: Array.from({ length: 1 + Math.floor(r() * 12) }, () => 1 + Math.floor(r() * 40)),
    coef: (i % 3) - 1 + 0.25,
  }));
}

/** Loss and gradients (keyed by weight name: models loaded apart name their variables apart). */
function gradsOf(m: TfCausalLM, rs: PolicyGradientRow[]): { loss: number; grads: Map<string, Float32Array> } {
  const g = sequenceLossGradients(m, rs, linearPolicyLoss);
  const out = new Map<string, Float32Array>();
  const names = m.weightNames();
  m.trainableVariables().forEach((v, i) => out.set(names[i], g.grads[v.name].dataSync() as Float32Array));
  tf.dispose(Object.values(g.grads));
  return { loss: g.loss, grads: out };
}

/** The checkpoint of `root` loaded with `memory`, handed to `use`, then freed. */
async function withModel<T>(memory: Partial<MemorySettings>, use: (m: TfCausalLM) => T): Promise<T> {
  const m = await loadCausalLM(root, { memory });
  try {
    return use(m);
  } finally {
    m.dispose();
  }
}

describe('micro-batches', () => {
  it('micro-batched loss and gradients equal the full batch within 1e-5 relative', async () => {
    const rs = rows(9);
    const size = (r: PolicyGradientRow) => ({ width: r.promptIds.length + r.completionIds.length, scored: r.completionIds.length });
    const whole = await withModel({ microBatchSize: 'auto', budgetBytes: 2 ** 34 }, (m) => {
      // The whole batch was one pass under a huge budget.
      expect(m.planPasses(rs, size, { label: 't', backward: true }).batches).toHaveLength(1);
      return gradsOf(m, rs);
    });
    for (const micro of [1, 2, 4] as const) {
      const split = await withModel({ microBatchSize: micro, budgetBytes: 2 ** 34 }, (m) => gradsOf(m, rs));
      expect(Math.abs(split.loss - whole.loss)).toBeLessThanOrEqual(1e-5 * Math.abs(whole.loss));
      for (const [k, g] of whole.grads) {
        const s = split.grads.get(k)!;
        let num = 0;
        let den = 0;
        g.forEach((v, i) => {
          num += (s[i] - v) ** 2;
          den += v * v;
        });
        expect(Math.sqrt(num / Math.max(den, 1e-30)), `${k} with ${micro}-row micro-batches`).toBeLessThan(1e-5);
      }
    }
  });

  it("'auto' splits a batch by the budget: a budget that fits about 3 rows gives about 3 rows per pass", () => {
    const rs = rows(12, 3).map((r) => ({ ...r, promptIds: r.promptIds.slice(0, 10).concat(new Array(Math.max(0, 10 - r.promptIds.length)).fill(2)), completionIds: [5, 6, 7, 8] }));
    const size = (r: PolicyGradientRow) => ({ width: r.promptIds.length + r.completionIds.length, scored: r.completionIds.length });
    const shape = model.decoderConfig;
    const mode = { backward: true, recompute: false, attentionBlockBytes: DEFAULT_MEMORY_SETTINGS.attentionBlockBytes, logitsChunkBytes: DEFAULT_MEMORY_SETTINGS.logitsChunkBytes, embeddingsTrainable: true };
    const three = passBytes(shape, { rows: 3, width: 14, scoredTokens: 12 }, mode);
    const trainable = model.trainableVariables().reduce((a, v) => a + v.size * 4, 0);
    const plan = planMicroBatches(model, rs, size, { label: 't', backward: true, memory: settings({ budgetBytes: heldTensorBytes() + trainable + three + 1, recompute: false }) });
    expect(plan.batches.map((b) => b.length)).toEqual([3, 3, 3, 3]);
    expect(plan.batches.flat()).toEqual(rs);
  });

  it("recompute 'auto' turns layer recomputation on only when a row needs it", () => {
    const rs = rows(2, 5);
    const size = (r: PolicyGradientRow) => ({ width: 200, scored: r.completionIds.length });
    const shape = model.decoderConfig;
    // 1 MiB blocks: the planner never shrinks blocks below that, so its figures equal these.
    const base = { backward: true, attentionBlockBytes: 2 ** 20, logitsChunkBytes: 2 ** 20, embeddingsTrainable: true };
    const plain = passBytes(shape, { rows: 1, width: 200, scoredTokens: 12 }, { ...base, recompute: false });
    const recomputed = passBytes(shape, { rows: 1, width: 200, scoredTokens: 12 }, { ...base, recompute: true });
    expect(recomputed).toBeLessThan(plain);
    const trainable = model.trainableVariables().reduce((a, v) => a + v.size * 4, 0);
    const roomy = settings({ budgetBytes: heldTensorBytes() + trainable + plain + 1, attentionBlockBytes: 2 ** 20, logitsChunkBytes: 2 ** 20 });
    expect(planMicroBatches(model, rs, size, { label: 't', backward: true, memory: roomy }).pass.recompute).toBe(false);
    const tight = settings({ budgetBytes: heldTensorBytes() + trainable + Math.floor((plain + recomputed) / 2), attentionBlockBytes: 2 ** 20, logitsChunkBytes: 2 ** 20 });
    expect(planMicroBatches(model, rs, size, { label: 't', backward: true, memory: tight }).pass.recompute).toBe(true);
  });
  it('a row that does not fit with the largest attention blocks is planned with smaller blocks, not refused', () => {
    const rs = rows(1, 7);
    const size = () => ({ width: 800, scored: 4 });
    const shape = model.decoderConfig;
    const trainable = model.trainableVariables().reduce((a, v) => a + v.size * 4, 0);
    // Blocks as the planner sizes them: an eighth of what is free, divided by the shrink, ≥ 1 MiB.
    const cost = (available: number, shrink: number) => {
      const block = Math.min(DEFAULT_MEMORY_SETTINGS.attentionBlockBytes, Math.max(2 ** 20, Math.floor(available / 8 / shrink)));
      return passBytes(shape, { rows: 1, width: 800, scoredTokens: 4 }, { backward: true, recompute: true, attentionBlockBytes: block, logitsChunkBytes: block, embeddingsTrainable: true });
    };
    // A budget under which the row misses with the largest blocks but fits with blocks 4× smaller.
    let available = 2 ** 20;
    while (available < 2 ** 30 && !(available < cost(available, 1) && cost(available, 4) <= available)) available = Math.ceil(available * 1.01);
    expect(available).toBeLessThan(2 ** 30);
    const plan = planMicroBatches(model, rs, size, { label: 't', backward: true, memory: settings({ budgetBytes: heldTensorBytes() + trainable + available, recompute: true }) });
    expect(plan.batches).toEqual([rs]);
    expect(plan.pass.attentionBlockBytes).toBeLessThan(Math.floor(available / 8));
    // A budget that fits even the smallest blocks nowhere is still refused.
    const none = settings({ budgetBytes: heldTensorBytes() + trainable + Math.floor(cost(available, 16) / 2), recompute: true });
    expect(() => planMicroBatches(model, rs, size, { label: 't', backward: true, memory: none })).toThrow(MemoryBudgetError);
  });
});

describe('estimates against measured peaks', () => {
  for (const [rowsN, width, recompute] of [[1, 40, false], [4, 30, false], [2, 120, false], [2, 120, true]] as const) {
    // "Measured" is tfjs's own accounting (tf.profile's peak), which counts views as buffers too.
    it(`${rowsN} rows × ${width} tokens, recompute ${recompute}: estimate ≥ measured peak and ≤ 2× it`, () => {
      const rs = Array.from({ length: rowsN }, (_, i) => ({ promptIds: new Array(width - 8).fill(3 + i), completionIds: new Array(8).fill(5), coef: 1 }));
      const pass = { attentionBlockBytes: DEFAULT_MEMORY_SETTINGS.attentionBlockBytes, logitsChunkBytes: DEFAULT_MEMORY_SETTINGS.logitsChunkBytes, recompute };
      const held = tf.memory().numBytes;
      const info = tf.profile(() => {
        const { grads } = tf.variableGrads(
          () => tf.tidy(() => linearPolicyLoss(tf.sum(model.scoreCompletions(rs.map((r) => r.promptIds), rs.map((r) => r.completionIds), pass).tokenLogProbs, 1) as tf.Tensor1D, rs)),
          model.trainableVariables(),
        );
        tf.dispose(Object.values(grads));
      });
      return info.then((p) => {
        const measured = p.peakBytes - held;
        const estimate =
          passBytes(model.decoderConfig, { rows: rowsN, width, scoredTokens: rowsN * 8 }, {
            backward: true,
            recompute,
            attentionBlockBytes: DEFAULT_MEMORY_SETTINGS.attentionBlockBytes,
            logitsChunkBytes: DEFAULT_MEMORY_SETTINGS.logitsChunkBytes,
            embeddingsTrainable: true,
          }) + model.trainableVariables().reduce((a, v) => a + v.size * 4, 0);
        expect(estimate).toBeGreaterThanOrEqual(measured);
        expect(estimate).toBeLessThanOrEqual(2 * measured);
      });
    });
  }
});

describe('over budget', () => {
  it('a critic pass over budget names critic_max_length before the general knobs', async () => {
    const tight = await tightModel();
    const critic = new ValueModel(tight, createCriticHead(tight.hiddenSize, { type: 'linear' }, rngFor(0, 'init')), await loadTokenizer(root), false);
    try {
      await expect(critic.predict([[1, 2, 3, 4]])).rejects.toThrow(/not enough memory for critic values \(1 row of 4 tokens\).*Reduce one of: critic_max_length .*; max_new_tokens/s);
    } finally {
      critic.dispose();
    }
  });

  it('a step over budget gets the named-knob error before it allocates', async () => {
    const rs = rows(3);
    const tight = await tightModel();
    try {
      const tensors = tf.memory().numTensors;
      const heap = wasmHeapBytes();
      let caught: unknown;
      try {
        sequenceLossGradients(tight, rs, linearPolicyLoss, { label: 'agent 0' });
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(MemoryBudgetError);
      const message = (caught as Error).message;
      for (const knob of ['max_new_tokens', 'num_generations', 'memory.micro_batch_size', 'lora', 'smaller model', 'memory.budget']) expect(message).toContain(knob);
      expect(message).toMatch(/agent 0: scoring \(1 row of \d+ tokens\)/);
      expect(message).toMatch(/needs about [\d.]+ (KiB|MiB|GiB)/);
      expect(tf.memory().numTensors).toBe(tensors);
      expect(wasmHeapBytes()).toBe(heap);
    } finally {
      tight.dispose();
    }
  });

  it('generation that cannot fit one sequence is refused by name', async () => {
    const tight = await tightModel();
    try {
      await expect(tight.generate([[1, 2, 3]], { maxNewTokens: 4, greedy: true })).rejects.toThrow(/not enough memory for generation \(1 sequence: 3 prompt \+ 4 new tokens\)/);
    } finally {
      tight.dispose();
    }
  });

  it('a model whose weights alone exceed the budget is refused by name before a tensor is made, full and LoRA alike', async () => {
    const memory = { budgetBytes: heldTensorBytes() + 1024 };
    const tensors = tf.memory().numTensors;
    await expect(loadCausalLM(root, { memory })).rejects.toThrow(/not enough memory for loading the model .* \(\d+ M parameters as float32\).*a smaller model/);
    const lora = { settings: { r: 2, loraAlpha: 4, loraDropout: 0, targetModules: ['q_proj'], useRslora: false, layersToTransform: null, baseModelNameOrPath: null, revision: null }, seed: 's' };
    await expect(loadCausalLM(root, { lora, memory })).rejects.toThrow(/not enough memory for loading the frozen LoRA base/);
    expect(tf.memory().numTensors).toBe(tensors);
  });
});

describe('sizes and crashes', () => {
  it('parseBytes reads decimal and binary units and names the field', () => {
    expect(parseBytes('3.5GiB')).toBe(3.5 * 2 ** 30);
    expect(parseBytes('800MB')).toBe(800e6);
    expect(parseBytes('2e9')).toBe(2e9);
    expect(parseBytes(1024)).toBe(1024);
    expect(() => parseBytes('lots', 'memory.budget')).toThrow(/memory.budget: 'lots' is not a size/);
    expect(() => parseBytes(-1, 'memory.budget')).toThrow(/memory.budget/);
  });

  it('a view past the end of a full wasm heap counts as running out of memory; a plain bug does not', () => {
    expect(isBackendMemoryCrash(new RangeError('Invalid typed array length: 155582464'))).toBe(true);
    expect(isBackendMemoryCrash(new TypeError("Cannot read properties of undefined (reading 'shape')"))).toBe(false);
  });

  it("a real wasm heap exhaustion is recognised as the backend running out of memory", () => {
    // A separate process fills wasm's 4 GiB heap with 256 MiB tensors until the backend fails.
    const script = `
      import * as tf from '@tensorflow/tfjs';
      import '@tensorflow/tfjs-backend-wasm';
      await tf.setBackend('wasm');
      const keep = [];
      try { for (let i = 0; i < 64; i++) keep.push(tf.zeros([64 * 1024 * 1024])); console.log('NO CRASH'); }
      catch (err) { console.log('MESSAGE ' + (err instanceof Error ? err.name + ': ' + err.message : String(err))); }`;
    const file = path.join(process.cwd(), 'test', `.tmp-oom-${process.pid}.mjs`);
    fs.writeFileSync(file, script);
    try {
      const out = execFileSync(process.execPath, [file], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
      const line = out.split('\n').find((l) => l.startsWith('MESSAGE ')) ?? out;
      expect(line.startsWith('MESSAGE ')).toBe(true);
      expect(isBackendMemoryCrash(new Error(line.slice(8)))).toBe(true);
    } finally {
      fs.rmSync(file, { force: true });
    }
  });
});
