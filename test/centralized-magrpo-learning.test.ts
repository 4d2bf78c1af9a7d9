/**
 * Learning: CentralizedMAGRPO — one tiny random-init policy writing both roles' words in one
 * completion — learns the single-turn toy coordination task, and its mutation does not.
 *
 * Two tests:
 * - over seeds 0–2, the trained policy's exact expected reward over the four cues
 *   (test/exact-eval.ts, ShortCompletionPolicies: every two-token joint completion enumerated, so
 *   no sampling noise): the learning runs' mean − 3 SE must reach BAR, which is above uniform
 *   random play (toyRandomBaseline = 16/225 ≈ 0.071), and the mutation's — every advantage
 *   sign-flipped (signFlipAdvantages) — mean + 3 SE must stay below it;
 * - one seed's sampled eval reward (16 episodes per eval) rises well above its start and above
 *   uniform play; trained on the negated reward it does not.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { initBackend } from '../src/backend/init.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { CentralizedEnv } from '../src/decpomdp/centralized.js';
import { toyCentralizedAdapter, ToyCoordEnv, toyEvalTasks, toyRandomBaseline, toyTasks, toyTrainTasks, toyWords, type ToyState, type ToyTask } from '../envs/toy/index.js';
import { CentralizedMAGRPOTrainer } from '../trainers/index.js';
import { exactEpisodeValue, shortCompletionPolicy, uniformPolicy } from './exact-eval.js';
import { expectClears, expectFallsShort, learningRun, overSeeds, signFlipAdvantages } from './learning-harness.js';
import { NegatedToyEnv, tempDir } from './magrpo-helpers.js';
import { backendUnderTest } from './backend-under-test.js';

let cleanup: () => Promise<void>;
let dir: string;

beforeAll(async () => {
  await initBackend(backendUnderTest('wasm'));
  ({ dir, cleanup } = await tempDir('centralized-learn'));
});
afterAll(async () => cleanup());

// Sampled eval, measured on wasm (seed 0): eval reward 0.00 → 0.80 (0.52 after 4 epochs); on the
// negated reward it stays at 0.00. At learning rate 3e-3 (MAGRPO's test) 8 epochs reach only 0.33.
// Exact expected reward, seeds 0–2 (untrained 0.041 each), measured on wasm:
//   learning 0.785, 0.807, 0.998 (mean 0.863, SE 0.067: mean − 3 SE = 0.661)
//   sign-flipped 0.001, 0.000, 0.000 (mean + 3 SE = 0.0007)
const EPOCHS = 8;
const LR = 1e-2;
const SEEDS = [0, 1, 2];
const BAR = 0.5;
const EPISODE = { numTurns: 1, discount: 1, earlyTerminationThreshold: null } as const;

const CONFIG = {
  num_generations: 8,
  // Two words: role 0's answer, then role 1's.
  max_new_tokens: 2,
  temperature: 1,
  top_p: 1,
  top_k: 0,
  agent_learning_rate: LR,
  num_train_epochs: EPOCHS,
  logging_steps: 1_000_000,
} as const;

const policySpec = (seed: number) => [{ name: 'policy', arch: 'qwen3' as const, seed, words: [...toyWords], hiddenSize: 32, numLayers: 1 }];

/** Eval rewards (per epoch and after training, on the true reward) of one seed-0 run. */
async function sampledRun(negate: boolean): Promise<number[]> {
  const evalReward: number[] = [];
  await learningRun({
    dir: join(dir, negate ? 'neg' : 'pos'),
    agents: policySpec(1),
    trainer: (agents: Agent[]) =>
      new CentralizedMAGRPOTrainer<ToyTask, ToyState>({
        agents,
        env: negate ? new NegatedToyEnv() : new ToyCoordEnv(),
        trainTasks: toyTrainTasks,
        evalTasks: toyTasks(16, 'eval'),
        centralizedAdapter: toyCentralizedAdapter,
        config: { ...CONFIG, eval_interval: 16, eval_num_samples: 16, eval_batch_size: 16, seed: 0 },
        logger: {
          log: (_step, m) => {
            const r = m['eval/turn_1/mean_reward'];
            if (r !== undefined) evalReward.push(negate ? -r : r);
          },
        },
      }),
    afterTrain: (trainer) => trainer.evaluate(),
  });
  return evalReward;
}

/** The trained policy's exact expected reward after one run (policy from seed seed + 1). */
async function exactRun(seed: number, flipped: boolean): Promise<number> {
  const env = new ToyCoordEnv();
  const joint = new CentralizedEnv(env, toyCentralizedAdapter);
  const r = await learningRun({
    dir: join(dir, `s${seed}-${flipped ? 'flipped' : 'learn'}`),
    agents: policySpec(seed + 1),
    trainer: (agents: Agent[]) => {
      const trainer = new CentralizedMAGRPOTrainer<ToyTask, ToyState>({ agents, env, trainTasks: toyTrainTasks, centralizedAdapter: toyCentralizedAdapter, config: { ...CONFIG, eval_interval: 0, seed } });
      return flipped ? signFlipAdvantages(trainer) : trainer;
    },
    measure: async (agents) => (await exactEpisodeValue(joint, toyEvalTasks, shortCompletionPolicy(agents, CONFIG.max_new_tokens), EPISODE)).finalReward,
  });
  console.log(`CentralizedMAGRPO toy seed ${seed}${flipped ? ' (sign-flipped)' : ''}: exact expected reward ${r.before?.toFixed(3)} → ${r.after?.toFixed(3)} [${r.seconds.toFixed(1)} s]`);
  return r.after as number;
}

test('the exact evaluation of the joint policy: uniform random words for each role give the closed form; BAR sits above it', async () => {
  // A joint policy saying each role's word uniformly at random, written as the joint texts.
  const pairs = new Map(toyWords.flatMap((a) => toyWords.map((b) => [`${a} ${b}`, 1 / toyWords.length ** 2] as const)));
  const joint = new CentralizedEnv(new ToyCoordEnv(), toyCentralizedAdapter);
  const u = await exactEpisodeValue(joint, toyEvalTasks, async (_i, obs) => obs.map(() => pairs), EPISODE);
  expect(u.finalReward).toBeCloseTo(toyRandomBaseline, 12);
  expect((await exactEpisodeValue(new ToyCoordEnv(), toyEvalTasks, uniformPolicy(toyWords), EPISODE)).finalReward).toBeCloseTo(u.finalReward, 12);
  expect(BAR).toBeGreaterThan(toyRandomBaseline);
});

test(`CentralizedMAGRPO learns the toy coordination task: mean − 3 SE of the exact expected reward over seeds ${SEEDS.join(', ')} ≥ ${BAR}`, async () => {
  expectClears('CentralizedMAGRPO learning', await overSeeds(SEEDS, (seed) => exactRun(seed, false)), BAR);
}, 600_000);

test(`mutation: with every advantage sign-flipped each seed, and mean + 3 SE, stay below ${BAR}`, async () => {
  expectFallsShort('CentralizedMAGRPO sign-flipped', await overSeeds(SEEDS, (seed) => exactRun(seed, true)), BAR);
}, 600_000);

test('CentralizedMAGRPO learns the toy coordination task (sampled eval); trained on the negated reward it does not', async () => {
  const learned = await sampledRun(false);
  const mutated = await sampledRun(true);
  console.log(`CentralizedMAGRPO toy: eval reward ${learned.map((r) => r.toFixed(2)).join(' ')}; negated reward: ${mutated.map((r) => r.toFixed(2)).join(' ')}`);
  const gain = (r: number[]) => r[r.length - 1] - r[0];
  expect(learned[0]).toBeLessThan(0.1);
  expect(gain(learned)).toBeGreaterThanOrEqual(0.4);
  expect(learned[learned.length - 1]).toBeGreaterThan(toyRandomBaseline + 0.4);
  expect(gain(mutated) < 0.4 || mutated[mutated.length - 1] <= toyRandomBaseline + 0.4).toBe(true);
});
