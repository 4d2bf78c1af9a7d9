/**
 * CoLLM-DC learns a sparse task at the library's default critic input, and fails when its critics
 * can read only the turn index.
 *
 * Task: SparseAgreeEnv (collm-helpers.ts), sparse, H = 2: both agents must say the same one of two
 * answers on turn 1, and that is paid only at the end of turn 2, so the first turn's actions get
 * credit only through each critic's bootstrap V_i(h_2) → V_i(h_1). Runs: actorCriticLearningRun
 * (tiny word-level qwen3 actors and critics, hidden 32 / 1 layer; 20 epochs of 16 episodes, the
 * first 3 a critic warm-up; critic learning rate 3e-3), one critic per agent, with every
 * critic-input key at the library's default: the agent's own history (`critic_history: full`), m_t
 * as text (`use_global_info: true`), TD(0) targets (`critic_target` absent). Agent i's turn-2 prompt
 * shows both committed words, its own last, so each critic can value its own agent's first turn.
 * The variant adds numeric m_t (`critic_global_features: true`: each head also reads turn/H and the
 * last reward), with a 6-epoch warm-up (NUMERIC_WARMUP).
 *
 * The mutation: blind critics (bench/paper-runs.ts `blindTokenizer`), which read only m_t's turn
 * index, so they can learn a per-turn baseline and nothing of the history: each agent's turn-1
 * advantage γV_i(h_2) − V_i(h_1) is one number for every episode, z-scored to 0.
 *
 * The figure is the trained policies' exact expected final reward (test/exact-eval.ts). The bar:
 * the learning runs' mean over seeds 1–3 minus 3 standard errors must reach BAR, the blind runs'
 * each and their mean plus 3 standard errors must stay below it, and BAR is above uniform random
 * play over the 9 words (10/81 ≈ 0.123). Measured on wasm, 2026-12-07, AMD EPYC 2-core VM (CPU
 * seconds per run from process.cpuUsage, 13–20 s; the file 145 s of CPU, user + system:
 * `npx vitest run test/collm-learning-dc.test.ts`):
 *   default input: 0.959, 0.997, 0.988 (mean 0.982, SE 0.011: mean − 3 SE = 0.947); seeds 4, 5: 0.996, 0.993
 *   numeric m_t:   0.986, 0.778, 0.887 (mean 0.884, SE 0.060: mean − 3 SE = 0.702); seeds 4, 5: 0.998, 0.995
 *   blind critics: 0.018, 0.018, 0.024 (mean 0.020, SE 0.002: mean + 3 SE = 0.027)
 * The two-answer game has a miscoordinated equilibrium (both answer, different slots: 0.5) and a
 * one-agent one (0.25), and about one DC run in five of those measured ended in one: the default
 * input with a 6-epoch warm-up gave 0.996, 0.250, 0.979, 0.996, 0.996 (seeds 1–5), numeric m_t
 * with the 3-epoch one 0.500, 0.995, 0.997, 0.996, 0.998 (with critic lr 1e-2: seed 1 0.248; with
 * 30 epochs: seed 1 0.500). So each input keeps the warm-up under which its five seeds all learned.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import { hiddenCueRandomBaseline } from '../envs/hidden-cue/index.js';
import { parseCoLLMDCConfig } from '../trainers/collm/config.js';
import { actorCriticLearningConfig, actorCriticLearningRun } from './collm-helpers.js';
import { expectClears, expectFallsShort, overSeeds } from './learning-harness.js';
import { tempDir } from './magrpo-helpers.js';
import { backendUnderTest } from './backend-under-test.js';

const SEEDS = [1, 2, 3];
const BAR = 0.6;
/** Warm-up of the numeric-m_t runs: 6 epochs of 16 episodes. */
const NUMERIC_WARMUP = 6 * 16;
const NUMERIC = { critic_global_features: true, critic_warmup_items: NUMERIC_WARMUP } as const;

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

async function finals(label: string, opts: { control?: 'blind'; config?: Record<string, unknown> } = {}): Promise<number[]> {
  return overSeeds(SEEDS, async (seed) => {
    const r = await actorCriticLearningRun({ method: 'collm-dc', seed, dir, ...opts });
    console.log(`CoLLM-DC ${label} seed ${seed}: exact expected final reward ${r.finalReward.toFixed(3)} [${r.cpuSeconds.toFixed(1)} CPU s, ${r.seconds.toFixed(1)} s]`);
    return r.finalReward;
  });
}

test('the runs leave the critic input at the library defaults', () => {
  const cfg = parseCoLLMDCConfig(actorCriticLearningConfig({ seed: 1 }));
  expect(cfg.critic_history).toBe('full');
  expect(cfg.use_global_info).toBe(true);
  expect(cfg.critic_target).toBeUndefined(); // absent: TD(0)
  expect(cfg.critic_global_features).toBeUndefined();
  const numeric = parseCoLLMDCConfig(actorCriticLearningConfig({ seed: 1, config: NUMERIC }));
  expect([numeric.critic_history, numeric.use_global_info, numeric.critic_target, numeric.critic_global_features]).toEqual(['full', true, undefined, true]);
  expect(BAR).toBeGreaterThan(hiddenCueRandomBaseline);
});

test(`CoLLM-DC at the default critic input learns the sparse 2-turn agreement task: mean − 3 SE over seeds ${SEEDS.join(', ')} ≥ ${BAR} (> uniform random ${hiddenCueRandomBaseline.toFixed(3)})`, async () => {
  expectClears('default input', await finals('default input'), BAR);
}, 900_000);

test(`CoLLM-DC with numeric m_t beside the default input learns it too: mean − 3 SE ≥ ${BAR}`, async () => {
  expectClears('numeric m_t', await finals('numeric m_t', { config: NUMERIC }), BAR);
}, 900_000);

test(`mutation: with blind critics (m_t's turn index only) each seed, and mean + 3 SE, stay below ${BAR}`, async () => {
  expectFallsShort('blind critics', await finals('blind critics', { control: 'blind' }), BAR);
}, 900_000);
