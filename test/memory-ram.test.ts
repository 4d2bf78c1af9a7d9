import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/index.js';
import { freeTensorMemory, freeTensorMemoryFor, heldTensorBytes, MemoryBudgetError, RAM_HEADROOM, ramLimitBytes } from '../src/memory/index.js';
import { createTinyModel, loadCausalLM, type TfCausalLM } from '../src/model/index.js';
import { linearPolicyLoss, sequenceLossGradients } from '../trainers/core/loss.js';
import { backendUnderTest } from './backend-under-test.js';

// Off wasm, tensors come out of the machine's RAM, where the process also holds what is not a
// tensor: a budget set above what the RAM can give must end in a refusal that says so, not in the
// system's out-of-memory killer (a 0.47 B full fine-tune pair with `memory.budget: 20GB` was
// killed at 24.3 GB RSS on a 24 GB machine). cpu here, tensorflow in the tensorflow pass.

let root: string;
let model: TfCausalLM;

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend(backendUnderTest('cpu'));
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-memram-'));
  await createTinyModel({ dir: root, arch: 'qwen3', seed: 3, tokenizer: 'word', hiddenSize: 32, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 64 });
  model = await loadCausalLM(root);
});
afterAll(() => {
  model.dispose();
  fs.rmSync(root, { recursive: true, force: true });
});

describe("the machine's RAM bounds tensors off wasm", () => {
  it('the RAM limit is the machine’s memory or a lower cgroup limit', () => {
    const limit = ramLimitBytes();
    expect(limit).toBeGreaterThan(0);
    expect(limit).toBeLessThanOrEqual(os.totalmem());
  });

  it('a budget within the RAM is what bounds; one far above it is cut to what the RAM leaves', () => {
    const small = freeTensorMemory({ budgetBytes: heldTensorBytes() + 1e6 });
    expect(small.ram).toBeNull();
    expect(small.bytes).toBeLessThanOrEqual(1e6);

    const huge = { budgetBytes: 100 * ramLimitBytes() };
    const rss = process.memoryUsage.rss();
    const big = freeTensorMemory(huge);
    expect(big.ram).not.toBeNull();
    // Hand derivation: (1 − headroom) · limit − resident set, the resident set read around the call.
    const expected = (1 - RAM_HEADROOM) * ramLimitBytes() - rss;
    expect(Math.abs(big.bytes - expected)).toBeLessThan(64 * 2 ** 20);
    expect(big.bytes).toBeLessThan(ramLimitBytes());
  });

  it('before the RAM refuses, garbage that still counts in the resident set is collected', () => {
    const huge = { budgetBytes: 100 * ramLimitBytes() };
    // 256 MiB of host memory that nobody holds any more, still resident until V8 collects it.
    let garbage: Float32Array | null = new Float32Array(64 * 2 ** 20).fill(1);
    expect(garbage[garbage.length - 1]).toBe(1);
    garbage = null;
    const before = freeTensorMemory(huge).bytes;
    const after = freeTensorMemoryFor(Number.POSITIVE_INFINITY, huge).bytes;
    expect(after - before).toBeGreaterThan(200 * 2 ** 20);
  });

  it('a pass that the budget allows but the RAM cannot hold is refused in words that name the RAM, before it allocates', async () => {
    // A budget 100× the RAM allows the row; the RAM cannot hold one row of 2^22 tokens.
    const unbounded = await loadCausalLM(root, { memory: { budgetBytes: 100 * ramLimitBytes(), microBatchSize: 'auto' } });
    const width = 2 ** 22;
    const rows = [{ promptIds: Array.from({ length: width - 1 }, (_, i) => 1 + (i % 40)), completionIds: [5], coef: 1 }];
    const tensors = tf.memory().numTensors;
    let caught: unknown;
    try {
      sequenceLossGradients(unbounded, rows, linearPolicyLoss, { label: 'agent 0' });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(MemoryBudgetError);
    const message = (caught as Error).message;
    expect(message).toMatch(/not enough memory for agent 0: scoring \(1 row of 4194304 tokens\)/);
    expect(message).toMatch(/of this machine's [\d.]+ GiB of RAM is free \(the process holds [\d.]+ (MiB|GiB), 8% is kept for the system; memory\.budget [\d.]+ (GiB|TiB) is more than this machine can give\)/);
    expect(message).toContain('memory.budget');
    expect(tf.memory().numTensors).toBe(tensors);
    unbounded.dispose();
  });
});
