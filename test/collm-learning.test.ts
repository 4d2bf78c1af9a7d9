/**
 * CoLLM-CC learns where its critic is needed, and fails without it.
 *
 * Task: SparseAgreeEnv (collm-helpers.ts), sparse, H = 2: both agents must say the same one of two
 * answers on turn 1, and that is paid only at the end of turn 2 — so the first turn's actions get
 * credit only through the critic's V(h_2) → V(h_1) bootstrap. Runs: actorCriticLearningRun (tiny
 * word-level qwen3 actors and critic, hidden 32 / 1 layer; 20 epochs of 16 episodes, the first 3 a
 * critic warm-up), with the centralized critic reading the agents' current observations without
 * m_t (`critic_history: current`, `use_global_info: false`): the turn-2 observations hold both
 * committed words. With the default joint history and m_t (~60 tokens) this tiny random-init critic
 * credited mostly the agent whose word came last: seeds 1–3 reached 0.252, 0.488, 0.903.
 *
 * The mutation: the same runs with the critic frozen at its random init (critic learning rate 0).
 * Then the first turn's advantage γV(h_2) − V(h_1) is a fixed random function of the words; the
 * actors settle on whatever words it favours, an answer only by chance.
 *
 * The figure is the trained policies' exact expected final reward (test/exact-eval.ts). The bar:
 * the learning runs' mean over seeds 1–3 minus 3 standard errors must reach BAR, the frozen runs'
 * mean plus 3 standard errors must stay below it, and BAR is above uniform random play over the 9
 * words (10/81 ≈ 0.123). Measured on wasm:
 *   learning: 0.991, 0.950, 0.967 (mean 0.969, SE 0.012: mean − 3 SE = 0.933)
 *   frozen critic: 0.000, 0.133, 0.236 (mean 0.123, SE 0.068: mean + 3 SE = 0.328)
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import { hiddenCueRandomBaseline, hiddenCueWords } from '../envs/hidden-cue/index.js';
import { actorCriticLearningRun, SparseAgreeEnv } from './collm-helpers.js';
import { exactEpisodeValue, uniformPolicy } from './exact-eval.js';
import { expectClears, expectFallsShort, overSeeds } from './learning-harness.js';
import { tempDir } from './magrpo-helpers.js';
import { backendUnderTest } from './backend-under-test.js';

const SEEDS = [1, 2, 3];
const BAR = 0.6;
const CONFIG = { critic_history: 'current', use_global_info: false } as const;

let dir: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  setBackendLogger(null);
  await initBackend(backendUnderTest('wasm'));
  ({ dir, cleanup } = await tempDir('collm-cc-learn'));
});
afterAll(async () => {
  await cleanup();
});

async function finals(frozenCritic: boolean): Promise<number[]> {
  return overSeeds(SEEDS, async (seed) => {
    const r = await actorCriticLearningRun({ method: 'collm-cc', seed, control: frozenCritic ? 'frozen' : undefined, dir, config: CONFIG });
    console.log(`CoLLM-CC${frozenCritic ? ' (frozen critic)' : ''} seed ${seed}: exact expected final reward ${r.finalReward.toFixed(3)} [${r.seconds.toFixed(1)} s]`);
    return r.finalReward;
  });
}

test('uniform random play sits below the bar', async () => {
  const u = await exactEpisodeValue(new SparseAgreeEnv(), [{ id: 'u' }], uniformPolicy(hiddenCueWords), { numTurns: 2, discount: 0.9, earlyTerminationThreshold: null });
  expect(u.finalReward).toBeCloseTo(hiddenCueRandomBaseline, 12);
  expect(BAR).toBeGreaterThan(hiddenCueRandomBaseline);
});

test(`CoLLM-CC learns the sparse 2-turn agreement task: mean − 3 SE over seeds ${SEEDS.join(', ')} ≥ ${BAR}`, async () => {
  expectClears('learning', await finals(false), BAR);
}, 900_000);

test(`mutation: with the critic frozen each seed, and mean + 3 SE, stay below ${BAR}`, async () => {
  expectFallsShort('frozen critic', await finals(true), BAR);
}, 900_000);
