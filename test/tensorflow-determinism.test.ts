import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { backendUnderTest } from './backend-under-test.js';

// The guarantee comlrl documents for its backends: the same computation, with the same seed, on
// the same backend and machine gives bit-identical results in every process. (On tensorflow the
// intra-op thread count is part of "machine": TF_NUM_INTRAOP_THREADS pins it across machines.)
// Each run is a separate Node process over the built library (dist/, made by `npm test`'s build).

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const backend = backendUnderTest('wasm');

// Forward + gradient through the primitives a training step uses (matmul, linear, embedding
// gather with its scatter-add gradient, logsumexp), big enough that TF splits work over threads.
const PROBE = `
const tf = await import('@tensorflow/tfjs');
const { initBackend, setBackendLogger, gatherRows, linear, matMul, logSumExpRows } = await import(${JSON.stringify(path.join(root, 'dist/src/backend/index.js'))});
const { createHash } = await import('node:crypto');
setBackendLogger(null);
await initBackend(process.argv[1]);
let s = 7;
const rnd = () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648) - 0.5;
const mk = (shape) => tf.tensor(Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, rnd), shape);
const emb = mk([500, 256]), w1 = mk([1024, 256]), w2 = mk([256, 1024]), q = mk([4, 64, 64]);
const ids = Int32Array.from({ length: 256 }, (_, i) => (i * 37) % 500);
const loss = (e, a, b, k) => {
  const h = tf.relu(linear(gatherRows(e, ids), a));
  const o = linear(h, b);
  const att = tf.sum(matMul(k, tf.transpose(k, [0, 2, 1])));
  return tf.add(tf.sum(logSumExpRows(o)), att);
};
const h = createHash('sha256');
for (const g of tf.grads(loss)([emb, w1, w2, q])) h.update(Buffer.from(g.dataSync().buffer));
h.update(Buffer.from(loss(emb, w1, w2, q).dataSync().buffer));
console.log('hash ' + h.digest('hex') + ' ' + tf.getBackend());
`;

function probe(env: Record<string, string> = {}): string {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', PROBE, backend], { cwd: root, encoding: 'utf8', env: { ...process.env, ...env } });
  expect(r.status, r.stderr).toBe(0);
  const m = /hash ([0-9a-f]{64}) (\S+)/.exec(r.stdout);
  expect(m, r.stdout + r.stderr).not.toBeNull();
  expect(m?.[2]).toBe(backend === 'tensorflow-gpu' ? 'tensorflow' : backend);
  return m?.[1] ?? '';
}

describe(`bit-identical repeats on ${backend}`, () => {
  it('two processes computing the same forward and gradients agree bit for bit', () => {
    expect(probe()).toBe(probe());
  });

  it.runIf(backend === 'tensorflow')('with TF_NUM_INTRAOP_THREADS=1 too (the setting that fixes results across machines)', () => {
    const one = { TF_NUM_INTRAOP_THREADS: '1', TF_NUM_INTEROP_THREADS: '1' };
    expect(probe(one)).toBe(probe(one));
  });
});
