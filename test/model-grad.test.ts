import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/index.js';
import { createTinyModel, loadCausalLM, type TfCausalLM } from '../src/model/index.js';
import { createRng } from '../src/util/rng.js';
import { backendsUnderTest } from './backend-under-test.js';

// Gradient of the summed completion log-prob vs central finite differences, on the float32 cpu
// and wasm backends (wasm kernels have differed from cpu ones before: OneHot, gather batchDims). Float32 tolerances: f ≈ -100 carries ~1e-5 rounding, so with h = 1e-2 the difference
// quotient has ~1e-3 absolute noise; truncation error is O(h²). We accept |fd - g| <= 2e-3 + 1e-2·|g|.
const H = 1e-2;
const ABS = 2e-3;
const REL = 1e-2;

const PROMPTS = [[3, 8, 1], [12], [4, 4, 9, 20, 7]];
const COMPLETIONS = [[5, 6, 2, 11], [9, 9], [1]];

let root: string;
beforeAll(async () => {
  setBackendLogger(null);
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-grad-'));
});
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

function objective(model: TfCausalLM): tf.Scalar {
  return tf.tidy(() => tf.sum(model.scoreCompletions(PROMPTS, COMPLETIONS).tokenLogProbs));
}

function value(model: TfCausalLM): number {
  const s = objective(model);
  const v = s.dataSync()[0];
  s.dispose();
  return v;
}

for (const [backend, arch] of backendsUnderTest(['cpu', 'wasm']).flatMap((b) => (['qwen3', 'qwen2', 'llama'] as const).map((a) => [b, a] as const))) {
  describe(`gradients (${arch}, ${backend})`, () => {
    let model: TfCausalLM;
    beforeAll(async () => {
      await initBackend(backend);
      const dir = path.join(root, `${backend}-${arch}`);
      await createTinyModel({ dir, arch, seed: 3, tokenizer: 'word', hiddenSize: 16, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 24 });
      model = await loadCausalLM(dir);
      // Scale up the 0.02 init so every path carries signal, and give biases non-zero values.
      const rng = createRng(99);
      tf.tidy(() => {
        for (const v of model.trainableVariables()) {
          const n = v.size;
          const noise = tf.tensor(Float32Array.from({ length: n }, () => rng.normal()), v.shape);
          v.assign(v.shape.length === 2 ? tf.mul(v, 15) : tf.add(v, tf.mul(noise, 0.2)));
        }
      });
    });
    afterAll(() => model.dispose());

    it('every weight gets a gradient that matches central differences', () => {
      const vars = model.trainableVariables();
      const names = model.weightNames();
      const { grads } = tf.variableGrads(() => objective(model), vars);
      const rng = createRng(5);
      try {
        for (let k = 0; k < vars.length; k++) {
          const v = vars[k];
          const g = grads[v.name];
          expect(g, names[k]).toBeDefined();
          const gd = g.dataSync();
          // The largest-gradient element and one random element of every tensor.
          let arg = 0;
          for (let i = 1; i < gd.length; i++) if (Math.abs(gd[i]) > Math.abs(gd[arg])) arg = i;
          for (const i of [arg, rng.int(gd.length)]) {
            const orig = v.dataSync().slice();
            const bump = (delta: number): number => {
              const data = orig.slice();
              data[i] += delta;
              v.assign(tf.tensor(data, v.shape));
              return value(model);
            };
            const fd = (bump(H) - bump(-H)) / (2 * H);
            v.assign(tf.tensor(orig, v.shape));
            expect(Math.abs(fd - gd[i]), `${names[k]}[${i}] fd=${fd} grad=${gd[i]}`).toBeLessThanOrEqual(ABS + REL * Math.abs(gd[i]));
          }
        }
      } finally {
        tf.dispose(Object.values(grads));
      }
    });
  });
}
