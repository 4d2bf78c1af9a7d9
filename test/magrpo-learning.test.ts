/**
 * Learning: with a fixed seed, MAGRPO on the single-turn toy coordination task raises the mean
 * (sampled) eval reward of two tiny random-init agents far above its start and above what a uniform
 * random policy gets (toyRandomBaseline = 16/225 ≈ 0.071). The mutation (agents that never update:
 * learning rate 0) runs the same rollouts and must stay under the same bars.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { initBackend } from '../src/backend/init.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { ToyCoordEnv, toyRandomBaseline, toyTasks, toyTrainTasks, toyWords } from '../envs/toy/index.js';
import { MAGRPOTrainer } from '../trainers/magrpo.js';
import { disposeAgents, tempDir, tinyAgents } from './magrpo-helpers.js';
import { backendUnderTest } from './backend-under-test.js';

let cleanup: () => Promise<void>;
let dir: string;

beforeAll(async () => {
  await initBackend(backendUnderTest('wasm'));
  ({ dir, cleanup } = await tempDir('magrpo-learn'));
});
afterAll(async () => {
  await cleanup();
});

const SEEDS = [0, 1];

/**
 * Eval rewards of one MAGRPO run (once per epoch and after training) and its seconds: trainer seed
 * `seed`, fresh agents initialised from seeds 2·seed + 1 and 2·seed + 2.
 */
async function run(seed: number, agentLearningRate: number): Promise<{ evalReward: number[]; seconds: number }> {
  const agents: Agent[] = await tinyAgents(join(dir, `s${seed}-lr${agentLearningRate}`), [
    { name: 'a0', arch: 'qwen3', seed: 2 * seed + 1, words: [...toyWords], hiddenSize: 32, numLayers: 1 },
    { name: 'a1', arch: 'qwen3', seed: 2 * seed + 2, words: [...toyWords], hiddenSize: 32, numLayers: 1 },
  ]);
  const evalReward: number[] = [];
  const trainer = new MAGRPOTrainer({
    agents,
    env: new ToyCoordEnv(),
    trainTasks: toyTrainTasks, // 16 items, each cue 4 times
    evalTasks: toyTasks(16, 'eval'),
    config: {
      num_turns: 1,
      num_generations: 8,
      // Only the first word counts, so one token per completion is the whole answer.
      max_new_tokens: 1,
      temperature: 1,
      top_p: 1,
      top_k: null,
      agent_learning_rate: agentLearningRate,
      num_train_epochs: 14,
      eval_interval: 16, // once per epoch, before its first item
      eval_num_samples: 16,
      eval_batch_size: 16,
      logging_steps: 1_000_000,
      seed,
    },
    logger: {
      log: (_step, m) => {
        const r = m['eval/turn_1/mean_reward'];
        if (r !== undefined) evalReward.push(r);
      },
    },
  });
  const t0 = performance.now();
  try {
    await trainer.train();
    await trainer.evaluate();
  } finally {
    trainer.dispose();
    disposeAgents(agents);
  }
  return { evalReward, seconds: (performance.now() - t0) / 1000 };
}

test.each(SEEDS)('MAGRPO learns the toy coordination task (seed %i)', async (seed) => {
  const { evalReward, seconds } = await run(seed, 3e-3);
  const start = evalReward[0];
  const end = evalReward[evalReward.length - 1];
  console.log(`MAGRPO toy seed ${seed}: eval reward ${evalReward.map((r) => r.toFixed(2)).join(' ')} in ${seconds.toFixed(1)} s`);
  // Measured on wasm: seed 0 0.00 → 1.00 (both agents agree on an answer for every cue), seed 1 0.00 → 0.83;
  // with learning rate 0 both stay at 0.00.
  expect(start).toBeLessThan(0.1);
  expect(end - start).toBeGreaterThanOrEqual(0.5);
  expect(end).toBeGreaterThan(toyRandomBaseline + 0.5);
});

test.each(SEEDS)('mutation: agents that never update (learning rate 0) stay under the same bars (seed %i)', async (seed) => {
  const { evalReward } = await run(seed, 0);
  const start = evalReward[0];
  const end = evalReward[evalReward.length - 1];
  console.log(`MAGRPO toy seed ${seed}, learning rate 0: eval reward ${evalReward.map((r) => r.toFixed(2)).join(' ')}`);
  expect(end - start < 0.5 || end <= toyRandomBaseline + 0.5).toBe(true);
});
