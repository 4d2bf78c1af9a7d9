/**
 * Loading holds one weight on the host at a time: a checkpoint's tensors are read from their
 * files when a model is built from them (not all decoded first), and on tensorflow each weight is
 * handed to TensorFlow at once (tfjs-node would otherwise keep every JS array until the first pass
 * read it, then hold both copies until V8 collected: 2 × 12 GB at 3 B parameters).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBackend, setBackendLogger, uploadNow } from '../src/backend/index.js';
import { parseDecoderConfig } from '../src/model/config.js';
import { createTinyModel, loadCausalLM } from '../src/model/index.js';
import { readSafetensorsHeader } from '../src/model/safetensors.js';
import { loadCheckpointWeights } from '../src/model/weights.js';
import { backendUnderTest } from './backend-under-test.js';

let root: string;
const backend = backendUnderTest('wasm');

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend(backend);
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-loadstream-'));
  await createTinyModel({ dir: root, arch: 'qwen3', seed: 5, tokenizer: 'word', hiddenSize: 32, numLayers: 1, numHeads: 4, numKvHeads: 2, intermediateSize: 64 });
});
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

describe('streamed loading', () => {
  it("a checkpoint's tensors are read from the file when used, not when listed", () => {
    const cfg = parseDecoderConfig(JSON.parse(fs.readFileSync(path.join(root, 'config.json'), 'utf8')), 'config.json');
    const file = path.join(root, 'model.safetensors');
    const weights = loadCheckpointWeights(root, cfg);
    const name = 'model.norm.weight';
    const before = Array.from(weights.get(name)!.data);
    // Overwrite that tensor's bytes in place after listing: a listing that had decoded everything would not see it.
    const header = readSafetensorsHeader(file);
    const entry = header.entries.get(name)!;
    expect(entry.dtype).toBe('F32');
    const fd = fs.openSync(file, 'r+');
    try {
      fs.writeSync(fd, Buffer.from(new Float32Array(before.length).fill(7).buffer), 0, before.length * 4, header.dataStart + entry.dataOffsets[0]);
    } finally {
      fs.closeSync(fd);
    }
    expect(Array.from(weights.get(name)!.data)).toEqual(new Array(before.length).fill(7));
    expect(before.some((v) => v !== 7)).toBe(true);
  });

  it('loaded weights live in the backend, not in JS arrays awaiting a first op', async () => {
    const model = await loadCausalLM(root);
    const t = tf.tensor1d([1, 2, 3]);
    const held = uploadNow(t);
    if (backend === 'tensorflow') {
      // tfjs-node's record of a tensor keeps `values` (the JS array) until TensorFlow holds it.
      const map = (tf.backend() as unknown as { tensorMap: { get(id: object): { values: unknown } } }).tensorMap;
      expect(t.isDisposed).toBe(true);
      expect(map.get(held.dataId).values).toBeNull();
      for (const v of model.trainableVariables()) expect(map.get(v.dataId).values).toBeNull();
    } else {
      expect(held).toBe(t);
    }
    expect(Array.from(held.dataSync())).toEqual([1, 2, 3]);
    held.dispose();
    model.dispose();
  });
});
