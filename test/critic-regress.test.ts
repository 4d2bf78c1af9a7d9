/**
 * A critic alone regresses toward a known value function on the toy task: the centralized critic
 * input of every (cue, turn) of the 2-turn toy coordination task, a value per input that a constant
 * cannot fit, and noisy targets (the value plus seeded uniform noise in ±0.2, as sampled returns
 * would be) fed to the trainers' critic step. The squared error against the noise-free value
 * function falls by at least 10× within 80 steps.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import { createCriticHead } from '../src/critic/heads.js';
import { centralizedCriticIds } from '../src/critic/inputs.js';
import { ValueModel, type CriticLM } from '../src/critic/value-model.js';
import { AdamW } from '../src/optim/adamw.js';
import { createRng, rngFor } from '../src/util/rng.js';
import { ToyCoordEnv, toyCues, toyWords } from '../envs/toy/index.js';
import { criticStep } from '../trainers/collm/steps.js';
import { tinyCritic } from './collm-helpers.js';
import { tempDir } from './magrpo-helpers.js';

let cleanup: () => Promise<void>;
let lm: CriticLM;
beforeAll(async () => {
  setBackendLogger(null);
  await initBackend('wasm');
  let dir: string;
  ({ dir, cleanup } = await tempDir('critic-regress'));
  lm = await tinyCritic(dir, 'critic', 9, toyWords);
});
afterAll(async () => {
  lm.model.dispose();
  await cleanup();
});

test('a centralized critic regresses toward a known value function (error falls ≥ 10×)', async () => {
  const env = new ToyCoordEnv({ numTurns: 2 });
  // The known V: 0.2 per cue index plus 0.1 at turn 1 / 0.5 at turn 2 (range 0.1–1.1).
  const inputs: number[][] = [];
  const truth: number[] = [];
  for (const [c, cue] of toyCues.entries()) {
    let state = env.initialState({ id: `t-${cue}`, cue });
    for (let turn = 0; turn < 2; turn++) {
      inputs.push(centralizedCriticIds(lm.tokenizer, { observations: [env.observe(state, 0), env.observe(state, 1)], globalInfo: env.globalInfo(state) }));
      truth.push(0.2 * c + (turn === 0 ? 0.1 : 0.5));
      state = (await env.step(state, ['sky', 'sea'])).next;
    }
  }
  const critic = new ValueModel(lm.model, createCriticHead(lm.model.hiddenSize, { type: 'linear' }, rngFor(0, 'init')), lm.tokenizer, false);
  const opt = new AdamW(critic.ownVariables(), { lr: 1e-2 });
  const noise = createRng(17);
  const error = async () => {
    const v = await critic.predict(inputs);
    return v.reduce((a, x, i) => a + (x - truth[i]) ** 2, 0) / v.length;
  };
  const before = await error();
  for (let step = 0; step < 80; step++) {
    const rows = inputs.map((criticIds, i) => ({ criticIds, target: truth[i] + (noise.next() - 0.5) * 0.4, oldValue: 0 }));
    criticStep(critic, opt, rows, 0.6, null, { maxGradNorm: null, chunkSize: null, label: 'critic regression' });
  }
  const after = await error();
  console.log(`critic regression: mean squared error to the true V ${before.toFixed(4)} → ${after.toFixed(5)} (${(before / after).toFixed(0)}×)`);
  expect(after).toBeLessThan(before / 10);
  opt.dispose();
  critic.head.dispose();
});
