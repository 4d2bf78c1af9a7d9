/**
 * MAGRPO learns the single-turn toy coordination task (envs/toy: both agents see a cue and must say
 * the same one of its two answers), and its mutation — every advantage sign-flipped
 * (SignFlippedMAGRPOTrainer) — does not.
 *
 * Runs: two tiny word-level qwen3 agents (hidden 32, 1 layer) per seed, K = 8, one word per
 * completion at temperature 1, learning rate 3e-3, 14 epochs of the 16 training tasks. The figure
 * is the trained policies' exact expected reward over the four cues (test/exact-eval.ts: no
 * sampling noise), so the spread is the seeds' alone.
 *
 * The bar: the learning runs' mean over seeds 0–2 minus 3 standard errors must reach BAR, the
 * mutation's mean plus 3 standard errors must stay below it (so the two means are more than 3
 * standard errors of their difference apart), and BAR is above uniform random play
 * (toyRandomBaseline = 16/225 ≈ 0.071). Measured on wasm:
 *   learning: 0.938, 0.877, 0.971 (mean 0.928, SE 0.028: mean − 3 SE = 0.845)
 *   sign-flipped: 0.003, 0.004, 0.004 (mean + 3 SE = 0.005)
 *   untrained: 0.042, 0.043, 0.042
 */
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { initBackend } from '../src/backend/init.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { ToyCoordEnv, toyEvalTasks, toyRandomBaseline, toyTrainTasks, toyWords } from '../envs/toy/index.js';
import { MAGRPOTrainer } from '../trainers/magrpo/trainer.js';
import { agentsPolicy, exactEpisodeValue, uniformPolicy } from './exact-eval.js';
import { expectClears, expectFallsShort, learningRun, ONE_WORD_SAMPLING, overSeeds, toyAgentPair } from './learning-harness.js';
import { SignFlippedMAGRPOTrainer, tempDir } from './magrpo-helpers.js';
import { backendUnderTest } from './backend-under-test.js';

const SEEDS = [0, 1, 2];
const BAR = 0.5;
const EPISODE = { numTurns: 1, discount: 1, earlyTerminationThreshold: null } as const;

let cleanup: () => Promise<void>;
let dir: string;

beforeAll(async () => {
  await initBackend(backendUnderTest('wasm'));
  ({ dir, cleanup } = await tempDir('magrpo-learn'));
});
afterAll(async () => {
  await cleanup();
});

/** The trained policies' exact expected reward after one run (fresh agents from seeds 2·seed + 1, 2·seed + 2). */
async function run(seed: number, flipped: boolean): Promise<number> {
  const env = new ToyCoordEnv();
  const Trainer = flipped ? SignFlippedMAGRPOTrainer : MAGRPOTrainer;
  const r = await learningRun({
    dir: join(dir, `s${seed}-${flipped ? 'flipped' : 'learn'}`),
    agents: toyAgentPair(2 * seed + 1, 2 * seed + 2),
    trainer: (agents: Agent[]) =>
      new Trainer({
        agents,
        env,
        trainTasks: toyTrainTasks, // 16 items, each cue 4 times
        config: {
          num_turns: 1,
          num_generations: 8,
          // Only the first word counts, so one token per completion is the whole answer.
          ...ONE_WORD_SAMPLING,
          agent_learning_rate: 3e-3,
          num_train_epochs: 14,
          eval_interval: 0,
          logging_steps: 1_000_000,
          seed,
        },
      }),
    measure: async (agents) => (await exactEpisodeValue(env, toyEvalTasks, agentsPolicy(agents), EPISODE)).finalReward,
  });
  console.log(`MAGRPO toy seed ${seed}${flipped ? ' (sign-flipped)' : ''}: exact expected reward ${r.before?.toFixed(3)} → ${r.after?.toFixed(3)} [${r.seconds.toFixed(1)} s]`);
  return r.after as number;
}

test('the exact evaluation gives uniform random play its closed form', async () => {
  const u = await exactEpisodeValue(new ToyCoordEnv(), toyEvalTasks, uniformPolicy(toyWords), EPISODE);
  expect(u.finalReward).toBeCloseTo(toyRandomBaseline, 12);
  expect(BAR).toBeGreaterThan(toyRandomBaseline);
});

test(`MAGRPO learns the toy coordination task: mean − 3 SE over seeds ${SEEDS.join(', ')} ≥ ${BAR}`, async () => {
  expectClears('learning', await overSeeds(SEEDS, (seed) => run(seed, false)), BAR);
}, 600_000);

test(`mutation: with every advantage sign-flipped each seed, and mean + 3 SE, stay below ${BAR}`, async () => {
  expectFallsShort('sign-flipped', await overSeeds(SEEDS, (seed) => run(seed, true)), BAR);
}, 600_000);
