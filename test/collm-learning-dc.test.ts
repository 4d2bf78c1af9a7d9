/**
 * CoLLM-DC learns where its critics are needed, and fails without them: the CoLLM-CC learning test
 * (test/collm-learning.test.ts, whose comment describes the task, the runs and the mutation) with
 * one critic per agent, each reading its own agent's history with m_t (the defaults: `critic_history:
 * full`, `use_global_info: true`). The turn-2 prompt shows both committed words, its agent's own
 * last, so each critic can value its own agent's first turn.
 *
 * The bar: the learning runs' mean over seeds 1–3 minus 3 standard errors must reach BAR, the
 * frozen runs' mean plus 3 standard errors must stay below it, and BAR is above uniform random play
 * (10/81 ≈ 0.123). Measured on wasm (exact expected final reward):
 *   learning: 0.959, 0.997, 0.988 (mean 0.982, SE 0.011: mean − 3 SE = 0.947)
 *   frozen critics: 0.000, 0.000, 0.250 (mean 0.083, SE 0.083: mean + 3 SE = 0.333)
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import { hiddenCueRandomBaseline } from '../envs/hidden-cue/index.js';
import { actorCriticLearningRun } from './collm-helpers.js';
import { expectClears, expectFallsShort, overSeeds } from './learning-harness.js';
import { tempDir } from './magrpo-helpers.js';
import { backendUnderTest } from './backend-under-test.js';

const SEEDS = [1, 2, 3];
const BAR = 0.6;

let dir: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  setBackendLogger(null);
  await initBackend(backendUnderTest('wasm'));
  ({ dir, cleanup } = await tempDir('collm-dc-learn'));
});
afterAll(async () => {
  await cleanup();
});

async function finals(frozenCritic: boolean): Promise<number[]> {
  return overSeeds(SEEDS, async (seed) => {
    const r = await actorCriticLearningRun({ method: 'collm-dc', seed, control: frozenCritic ? 'frozen' : undefined, dir });
    console.log(`CoLLM-DC${frozenCritic ? ' (frozen critics)' : ''} seed ${seed}: exact expected final reward ${r.finalReward.toFixed(3)} [${r.seconds.toFixed(1)} s]`);
    return r.finalReward;
  });
}

test(`CoLLM-DC learns the sparse 2-turn agreement task: mean − 3 SE over seeds ${SEEDS.join(', ')} ≥ ${BAR} (> uniform random ${hiddenCueRandomBaseline.toFixed(3)})`, async () => {
  expect(BAR).toBeGreaterThan(hiddenCueRandomBaseline);
  expectClears('learning', await finals(false), BAR);
}, 900_000);

test(`mutation: with the critics frozen each seed, and mean + 3 SE, stay below ${BAR}`, async () => {
  expectFallsShort('frozen critics', await finals(true), BAR);
}, 900_000);
