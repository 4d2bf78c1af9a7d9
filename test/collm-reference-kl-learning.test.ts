/**
 * CoLLM with the reference KL as a loss term (`kl_mode: loss`, β·Σ_t k3 added to each actor's
 * loss): a large coefficient β pins the actors to their reference (the starting policies), a small
 * one lets them learn.
 *
 * CoMLRL's reward-penalty form (`kl_mode: reward`, the sampled k3 subtracted from the joint reward)
 * does not pin here: with β = 10, seed 1 ended at a first-turn KL of 1.38 (reward 0.056 → 0.108),
 * on wasm. A likely reason: a sampled k3 used as a reward is largest for the completions the policy
 * has made less likely than the reference, so its policy gradient pushes those further down.
 *
 * Runs: CoLLM-CC on SparseAgreeEnv (collm-helpers.ts: sparse, H = 2, both agents must say the same
 * answer on turn 1, paid at the end of turn 2) through actorCriticLearningRun, with the critic
 * reading the current observations without m_t (`critic_history: current`, `use_global_info:
 * false`, where this tiny critic learns the task; test/collm-learning.test.ts says why the default
 * input does not, on this task), with
 * `reference_kl_enabled` and β = BIG or SMALL, the reference being each actor's starting weights
 * (a frozen copy, as under full fine-tuning). Measured exactly (test/exact-eval.ts), no sampling
 * noise: the trained policies' expected final reward, the starting policies' (the reference's), and
 * each actor's KL(π ‖ π_ref) at its first turn (the word the reward depends on), averaged over the
 * two actors.
 *
 * The bars, over seeds 1–3 (mean ± 3 SE):
 * - β = BIG: the first-turn KL stays below KL_BAR and the reward within RETURN_TOL of the
 *   reference's (mean + 3 SE of |reward − reference reward|);
 * - β = SMALL: the actors learn as without the penalty — the reward's mean − 3 SE reaches BAR
 *   (above uniform random play over the 9 words, 10/81 ≈ 0.123) — and move away from the
 *   reference: the KL's mean − 3 SE reaches KL_BAR.
 * Measured on wasm (reference's expected reward 0.056, 0.053, 0.058 for seeds 1–3):
 *   β 10:   reward 0.060, 0.059, 0.068; first-turn KL 0.0037, 0.0027, 0.0042 (mean + 3 SE 0.0048;
 *           |reward − reference| mean + 3 SE 0.011)
 *   β 0.01: reward 0.835, 0.870, 0.961 (mean − 3 SE 0.776); first-turn KL 2.39, 2.45, 2.77 (mean − 3 SE 2.19)
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import { hiddenCueRandomBaseline } from '../envs/hidden-cue/index.js';
import { actorCriticLearningRun, type ActorCriticLearningResult } from './collm-helpers.js';
import { lowerBound, meanAndSE, upperBound } from './exact-eval.js';
import { tempDir } from './magrpo-helpers.js';
import { backendUnderTest } from './backend-under-test.js';

const SEEDS = [1, 2, 3];
const BIG = 10;
const SMALL = 0.01;
const BAR = 0.6;
const KL_BAR = 0.1;
const RETURN_TOL = 0.05;

let dir: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  setBackendLogger(null);
  await initBackend(backendUnderTest('wasm'));
  ({ dir, cleanup } = await tempDir('collm-kl-learn'));
});
afterAll(async () => {
  await cleanup();
});

async function runs(coef: number): Promise<ActorCriticLearningResult[]> {
  const out: ActorCriticLearningResult[] = [];
  for (const seed of SEEDS) {
    const r = await actorCriticLearningRun({
      method: 'collm-cc',
      seed,
      dir,
      config: { critic_history: 'current', use_global_info: false, reference_kl_enabled: true, reference_kl_coef: coef, kl_mode: 'loss' },
      measureStart: true,
    });
    console.log(`CoLLM-CC, reference KL β ${coef}, seed ${seed}: exact expected final reward ${r.startReward?.toFixed(3)} (reference) → ${r.finalReward.toFixed(3)}, first-turn KL ${r.firstTurnKl?.toFixed(4)} [${r.seconds.toFixed(1)} s]`);
    out.push(r);
  }
  return out;
}

const kls = (rs: readonly ActorCriticLearningResult[]) => rs.map((r) => r.firstTurnKl as number);

test(`β = ${BIG} pins the actors to the reference: first-turn KL (mean + 3 SE) < ${KL_BAR}, reward within ${RETURN_TOL} of the reference's`, async () => {
  const rs = await runs(BIG);
  const drift = rs.map((r) => Math.abs(r.finalReward - (r.startReward as number)));
  console.log(`β ${BIG}: KL ${JSON.stringify(meanAndSE(kls(rs)))} (mean + 3 SE ${upperBound(kls(rs)).toFixed(4)}); |reward − reference| ${JSON.stringify(meanAndSE(drift))} (mean + 3 SE ${upperBound(drift).toFixed(4)})`);
  for (const r of rs) expect(r.firstTurnKl).toBeLessThan(KL_BAR);
  expect(upperBound(kls(rs))).toBeLessThan(KL_BAR);
  expect(upperBound(drift)).toBeLessThan(RETURN_TOL);
}, 900_000);

test(`β = ${SMALL} learns: reward mean − 3 SE ≥ ${BAR}, first-turn KL mean − 3 SE ≥ ${KL_BAR}`, async () => {
  expect(BAR).toBeGreaterThan(hiddenCueRandomBaseline);
  const rs = await runs(SMALL);
  const rewards = rs.map((r) => r.finalReward);
  console.log(`β ${SMALL}: reward ${JSON.stringify(meanAndSE(rewards))} (mean − 3 SE ${lowerBound(rewards).toFixed(3)}); KL ${JSON.stringify(meanAndSE(kls(rs)))} (mean − 3 SE ${lowerBound(kls(rs)).toFixed(4)})`);
  expect(lowerBound(rewards)).toBeGreaterThanOrEqual(BAR);
  expect(lowerBound(kls(rs))).toBeGreaterThanOrEqual(KL_BAR);
}, 900_000);
