/**
 * Learning: each REINFORCE-family trainer (advantage_normalization off, so its own baseline shapes
 * the update) raises the mean sampled eval reward of two tiny random-init agents on the single-turn
 * toy coordination task well above its start and above a uniform random policy (toyRandomBaseline =
 * 16/225 ≈ 0.071). The mutation trains on the negated reward (the same trainer climbing the wrong
 * way) and must stay under the same bars. One seed and few epochs: CI runs this on 2 cores.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { initBackend } from '../src/backend/init.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { ToyCoordEnv, toyRandomBaseline, toyTasks, toyTrainTasks, toyWords, type ToyState, type ToyTask } from '../envs/toy/index.js';
import { MAREINFORCETrainer, MAReMaxTrainer, MARLOOTrainer, type MAGRPOConfigInput, type MAGRPOTrainerOptions } from '../trainers/index.js';
import type { MAGRPOTrainer } from '../trainers/magrpo/trainer.js';
import { disposeAgents, NegatedToyEnv, tempDir, tinyAgents } from './magrpo-helpers.js';
import { backendUnderTest } from './backend-under-test.js';

type Ctor = new (options: Omit<MAGRPOTrainerOptions<ToyTask, ToyState>, 'config'> & { config?: MAGRPOConfigInput }) => MAGRPOTrainer<ToyTask, ToyState>;

let cleanup: () => Promise<void>;
let dir: string;

beforeAll(async () => {
  await initBackend(backendUnderTest('wasm'));
  ({ dir, cleanup } = await tempDir('reinforce-learn'));
});
afterAll(async () => cleanup());

/**
 * Each trainer with the gain its run must reach. Measured on wasm (seed 0, 8 epochs, learning rate
 * 1e-2): MAREINFORCE 0.00 → 0.67, MARLOO 0.00 → 0.81, MAReMax 0.00 → 0.25; trained on the negated
 * reward all three stay at 0.00. MAReMax's advantages are never positive (the group's best return is
 * the baseline): it only pushes down the worse completions, and once a group's samples agree
 * (zero spread) it stops learning — larger steps or more epochs did not take it further (0.13–0.25).
 */
const FAMILY: readonly [string, Ctor, number][] = [
  ['MAREINFORCE', MAREINFORCETrainer, 0.4],
  ['MAReMax', MAReMaxTrainer, 0.15],
  ['MARLOO', MARLOOTrainer, 0.4],
];

const EPOCHS = 8;

/** Eval rewards (per epoch and after training, on the true reward) of one run. */
async function run(label: string, Trainer: Ctor, negate: boolean): Promise<number[]> {
  const agents: Agent[] = await tinyAgents(join(dir, `${label}-${negate ? 'neg' : 'pos'}`), [
    { name: 'a0', arch: 'qwen3', seed: 1, words: [...toyWords], hiddenSize: 32, numLayers: 1 },
    { name: 'a1', arch: 'qwen3', seed: 2, words: [...toyWords], hiddenSize: 32, numLayers: 1 },
  ]);
  const evalReward: number[] = [];
  const trainer = new Trainer({
    agents,
    env: negate ? new NegatedToyEnv() : new ToyCoordEnv(),
    trainTasks: toyTrainTasks,
    evalTasks: toyTasks(16, 'eval'),
    config: {
      num_turns: 1,
      num_generations: 8,
      max_new_tokens: 1,
      temperature: 1,
      top_p: 1,
      top_k: null,
      advantage_normalization: false,
      agent_learning_rate: 1e-2,
      num_train_epochs: EPOCHS,
      eval_interval: 16,
      eval_num_samples: 16,
      eval_batch_size: 16,
      logging_steps: 1_000_000,
      seed: 0,
    },
    // The eval reward is the env's: negated back for the mutation, so both are on the true scale.
    logger: {
      log: (_step, m) => {
        const r = m['eval/turn_1/mean_reward'];
        if (r !== undefined) evalReward.push(negate ? -r : r);
      },
    },
  });
  try {
    await trainer.train();
    await trainer.evaluate();
  } finally {
    trainer.dispose();
    disposeAgents(agents);
  }
  return evalReward;
}

test.each(FAMILY)('%s learns the toy coordination task; trained on the negated reward it does not', async (label, Trainer, bar) => {
  const learned = await run(label, Trainer, false);
  const mutated = await run(label, Trainer, true);
  console.log(`${label} toy: eval reward ${learned.map((r) => r.toFixed(2)).join(' ')}; negated reward: ${mutated.map((r) => r.toFixed(2)).join(' ')}`);
  const gain = (r: number[]) => r[r.length - 1] - r[0];
  expect(learned[0]).toBeLessThan(0.1);
  expect(gain(learned)).toBeGreaterThanOrEqual(bar);
  expect(learned[learned.length - 1]).toBeGreaterThan(toyRandomBaseline + bar);
  expect(gain(mutated) < bar || mutated[mutated.length - 1] <= toyRandomBaseline + bar).toBe(true);
});
