/**
 * Learning: each REINFORCE-family trainer (advantage_normalization off, so its own baseline shapes
 * the update) learns the single-turn toy coordination task (envs/toy: both agents see a cue and must
 * say the same one of its two answers) with two tiny random-init agents, and its mutation does not.
 *
 * Two tests per trainer:
 * - over seeds 0–2, the trained policies' exact expected reward over the four cues
 *   (test/exact-eval.ts: no sampling noise, so the spread is the seeds' alone): the learning runs'
 *   mean − 3 SE must reach the trainer's bar, which is above uniform random play
 *   (toyRandomBaseline = 16/225 ≈ 0.071), and the mutation's — every advantage sign-flipped
 *   (signFlipAdvantages: the returns negated before the advantages; exactly −A for raw and rloo,
 *   ReMax on the negated reward for max) — mean + 3 SE must stay below it;
 * - one seed's sampled eval reward (16 episodes per eval) rises well above its start and above
 *   uniform play; trained on the negated reward it does not.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { initBackend } from '../src/backend/init.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { ToyCoordEnv, toyEvalTasks, toyRandomBaseline, toyTasks, toyTrainTasks, toyWords, type ToyState, type ToyTask } from '../envs/toy/index.js';
import { MAREINFORCETrainer, MAReMaxTrainer, MARLOOTrainer, type MAGRPOConfigInput, type MAGRPOTrainerOptions } from '../trainers/index.js';
import type { MAGRPOTrainer } from '../trainers/magrpo/trainer.js';
import { agentsPolicy, exactEpisodeValue, uniformPolicy } from './exact-eval.js';
import { expectClears, expectFallsShort, learningRun, ONE_WORD_SAMPLING, overSeeds, signFlipAdvantages, toyAgentPair } from './learning-harness.js';
import { NegatedToyEnv, tempDir } from './magrpo-helpers.js';
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
 * Each trainer with the gain its sampled-eval run must reach and the bar of its exact runs.
 *
 * Sampled eval, measured on wasm (seed 0, 8 epochs, learning rate 1e-2): MAREINFORCE 0.00 → 0.67,
 * MARLOO 0.00 → 0.81, MAReMax 0.00 → 0.25; trained on the negated reward all three stay at 0.00.
 * MAReMax's advantages are never positive (the group's best return is the baseline): it only
 * pushes down the worse completions, and once a group's samples agree (zero spread) it stops
 * learning — larger steps or more epochs did not take it further (0.13–0.25).
 *
 * Exact expected reward, seeds 0–2 (untrained 0.042 / 0.043 / 0.042), measured on wasm:
 *   MAREINFORCE 0.630, 0.437, 0.554 (mean − 3 SE = 0.372; bar 0.3); sign-flipped ≤ 0.001 (mean + 3 SE 0.0006)
 *   MAReMax     0.247, 0.314, 0.175 (mean − 3 SE = 0.125; bar 0.1); sign-flipped ≤ 0.001 (mean + 3 SE 0.0006)
 *   MARLOO      0.795, 0.748, 0.681 (mean − 3 SE = 0.642; bar 0.3); sign-flipped ≤ 0.002 (mean + 3 SE 0.0036)
 * The sign-flipped runs end below even the untrained policies: they learn to miscoordinate.
 */
const FAMILY: readonly [string, Ctor, number, number][] = [
  ['MAREINFORCE', MAREINFORCETrainer, 0.4, 0.3],
  ['MAReMax', MAReMaxTrainer, 0.15, 0.1],
  ['MARLOO', MARLOOTrainer, 0.4, 0.3],
];

const EPOCHS = 8;
const SEEDS = [0, 1, 2];
const EPISODE = { numTurns: 1, discount: 1, earlyTerminationThreshold: null } as const;

const CONFIG = {
  num_turns: 1,
  num_generations: 8,
  ...ONE_WORD_SAMPLING,
  advantage_normalization: false,
  agent_learning_rate: 1e-2,
  num_train_epochs: EPOCHS,
  logging_steps: 1_000_000,
} as const;

/** Eval rewards (per epoch and after training, on the true reward) of one seed-0 run. */
async function sampledRun(label: string, Trainer: Ctor, negate: boolean): Promise<number[]> {
  const evalReward: number[] = [];
  await learningRun({
    dir: join(dir, `${label}-${negate ? 'neg' : 'pos'}`),
    agents: toyAgentPair(1, 2),
    trainer: (agents: Agent[]) =>
      new Trainer({
        agents,
        env: negate ? new NegatedToyEnv() : new ToyCoordEnv(),
        trainTasks: toyTrainTasks,
        evalTasks: toyTasks(16, 'eval'),
        config: { ...CONFIG, eval_interval: 16, eval_num_samples: 16, eval_batch_size: 16, seed: 0 },
        // The eval reward is the env's: negated back for the mutation, so both are on the true scale.
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

/** The trained policies' exact expected reward after one run (agents from seeds 2·seed + 1, 2·seed + 2). */
async function exactRun(label: string, Trainer: Ctor, seed: number, flipped: boolean): Promise<number> {
  const env = new ToyCoordEnv();
  const r = await learningRun({
    dir: join(dir, `${label}-s${seed}-${flipped ? 'flipped' : 'learn'}`),
    agents: toyAgentPair(2 * seed + 1, 2 * seed + 2),
    trainer: (agents: Agent[]) => {
      const trainer = new Trainer({ agents, env, trainTasks: toyTrainTasks, config: { ...CONFIG, eval_interval: 0, seed } });
      return flipped ? signFlipAdvantages(trainer) : trainer;
    },
    measure: async (agents) => (await exactEpisodeValue(env, toyEvalTasks, agentsPolicy(agents), EPISODE)).finalReward,
  });
  console.log(`${label} toy seed ${seed}${flipped ? ' (sign-flipped)' : ''}: exact expected reward ${r.before?.toFixed(3)} → ${r.after?.toFixed(3)} [${r.seconds.toFixed(1)} s]`);
  return r.after as number;
}

test('the bars sit above uniform random play', async () => {
  const u = await exactEpisodeValue(new ToyCoordEnv(), toyEvalTasks, uniformPolicy(toyWords), EPISODE);
  expect(u.finalReward).toBeCloseTo(toyRandomBaseline, 12);
  for (const [, , , bar] of FAMILY) expect(bar).toBeGreaterThan(toyRandomBaseline);
});

test.each(FAMILY)(`%s learns the toy coordination task: mean − 3 SE of the exact expected reward over seeds ${SEEDS.join(', ')} ≥ its bar`, async (label, Trainer, _gain, bar) => {
  expectClears(`${label} learning`, await overSeeds(SEEDS, (seed) => exactRun(label, Trainer, seed, false)), bar);
}, 600_000);

test.each(FAMILY)('mutation: %s with every advantage sign-flipped stays below its bar (each seed, and mean + 3 SE)', async (label, Trainer, _gain, bar) => {
  expectFallsShort(`${label} sign-flipped`, await overSeeds(SEEDS, (seed) => exactRun(label, Trainer, seed, true)), bar);
}, 600_000);

test.each(FAMILY)('%s learns the toy coordination task (sampled eval); trained on the negated reward it does not', async (label, Trainer, bar) => {
  const learned = await sampledRun(label, Trainer, false);
  const mutated = await sampledRun(label, Trainer, true);
  console.log(`${label} toy: eval reward ${learned.map((r) => r.toFixed(2)).join(' ')}; negated reward: ${mutated.map((r) => r.toFixed(2)).join(' ')}`);
  const gain = (r: number[]) => r[r.length - 1] - r[0];
  expect(learned[0]).toBeLessThan(0.1);
  expect(gain(learned)).toBeGreaterThanOrEqual(bar);
  expect(learned[learned.length - 1]).toBeGreaterThan(toyRandomBaseline + bar);
  expect(gain(mutated) < bar || mutated[mutated.length - 1] <= toyRandomBaseline + bar).toBe(true);
});
