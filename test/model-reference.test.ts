import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/index.js';
import { loadCausalLM } from '../src/model/index.js';
import { backendsUnderTest } from './backend-under-test.js';

// Expected values: float64 PyTorch log-probs from ../shared/reference/ref_logprobs.py, written by
// scripts/make_model_fixtures.py next to each random checkpoint (make_model.py).
const FIXTURES = path.join(import.meta.dirname, 'fixtures', 'model');
const NAMES = ['qwen3-sharded-bf16', 'qwen2-tied-bias-f16', 'llama-bf16', 'qwen3-own-dims-f32', 'llama3-rope-scaling'];
const TOL = 2e-4;

interface Case {
  prompt: number[];
  completion: number[];
}

function fixture(name: string): { dir: string; cases: Case[]; expected: number[][] } {
  const dir = path.join(FIXTURES, name);
  return {
    dir,
    cases: JSON.parse(fs.readFileSync(path.join(dir, 'cases.json'), 'utf8')) as Case[],
    expected: JSON.parse(fs.readFileSync(path.join(dir, 'expected.json'), 'utf8')) as number[][],
  };
}

for (const backend of backendsUnderTest(['wasm', 'cpu'])) {
  describe(`reference log-probs on ${backend}`, () => {
    beforeAll(async () => {
      setBackendLogger(null);
      await initBackend(backend);
    });
    afterAll(() => setBackendLogger((l) => console.error(l)));

    for (const name of NAMES) {
      it(`${name} matches PyTorch float64 within ${TOL} per token (batched, padded)`, async () => {
        const { dir, cases, expected } = fixture(name);
        const model = await loadCausalLM(dir);
        try {
          const got = await model.tokenLogProbs(
            cases.map((c) => c.prompt),
            cases.map((c) => c.completion),
          );
          expect(got.map((r) => r.length)).toEqual(cases.map((c) => c.completion.length));
          let worst = 0;
          got.forEach((row, i) => row.forEach((v, j) => (worst = Math.max(worst, Math.abs(v - expected[i][j])))));
          expect(worst).toBeLessThan(TOL);
        } finally {
          model.dispose();
        }
      });
    }
  });
}
