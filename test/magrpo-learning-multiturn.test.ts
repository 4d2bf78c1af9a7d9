/**
 * Multi-turn MAGRPO learns: H = 2, discount γ = 0.5, early termination (threshold 0.3) and
 * `joint_mode: cross`, on the retry variant of the toy coordination game (RetryEnv in
 * magrpo-helpers.ts: every turn pays its own score, turn 2 shows the partner's word). So the rollout
 * tree branches on every one of the K² = 4 joint actions, a turn-1 return is r + γ · mean(child
 * returns), a node whose mean reward exceeds the threshold gets no children, and each agent's
 * advantage sums over the joint actions its completion took part in. The mutation — every advantage
 * sign-flipped (SignFlippedMAGRPOTrainer; the tree and its early stops are the true ones) — must
 * fall short of the same bar.
 *
 * Runs: two tiny word-level qwen3 agents (hidden 32, 1 layer) per seed, K = 2, one word per
 * completion at temperature 1, learning rate 5e-3, buffers of 4 node samples, 16 epochs of the 16
 * training tasks (each cue 4 times). The figure is the trained policies' exact expected discounted
 * return E[r_1 + γ·r_2] of an evaluation episode, which ends after a turn paying more than the
 * threshold as training does (test/exact-eval.ts: no sampling noise).
 *
 * The bar: the learning runs' mean over seeds 0–2 minus 3 standard errors must reach BAR, the
 * mutation's mean plus 3 standard errors must stay below it, and BAR is above uniform random play
 * (its exact value is computed below: 0.106). Measured on wasm:
 *   learning: 0.590, 0.509, 0.539 (mean 0.546, SE 0.024: mean − 3 SE = 0.476)
 *   sign-flipped: 0.0006, 0.0003, 0.0002 (mean + 3 SE = 0.0007)
 *   untrained: 0.063 for each seed
 * With buffers of 2 (the default) and learning rate 3e-3 the learning runs spread over 0.37–0.81
 * (seeds 0–6); with turn 2's prompt ending on the partner's word (`cue <c> partner <w>`, the toy
 * env's layout) seed 2 stalled at 0.23 after 16 epochs and 0.22 after 24.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { initBackend } from '../src/backend/init.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { toyEvalTasks, toyTrainTasks, toyWords } from '../envs/toy/index.js';
import { MAGRPOTrainer } from '../trainers/magrpo/trainer.js';
import { agentsPolicy, exactEpisodeValue, uniformPolicy } from './exact-eval.js';
import { expectClears, expectFallsShort, learningRun, ONE_WORD_SAMPLING, overSeeds, toyAgentPair } from './learning-harness.js';
import { RetryEnv, SignFlippedMAGRPOTrainer, tempDir } from './magrpo-helpers.js';
import { backendUnderTest } from './backend-under-test.js';

const SEEDS = [0, 1, 2];
const BAR = 0.3;
const DISCOUNT = 0.5;
const THRESHOLD = 0.3;
const EPISODE = { numTurns: 2, discount: DISCOUNT, earlyTerminationThreshold: THRESHOLD } as const;

let cleanup: () => Promise<void>;
let dir: string;

beforeAll(async () => {
  await initBackend(backendUnderTest('wasm'));
  ({ dir, cleanup } = await tempDir('magrpo-learn-h2'));
});
afterAll(async () => {
  await cleanup();
});

/** One run: the trained policies' exact expected return, and how many items' trees early termination pruned. */
async function run(seed: number, flipped: boolean): Promise<{ finalReturn: number; prunedItems: number }> {
  const env = new RetryEnv();
  let prunedItems = 0;
  const Trainer = flipped ? SignFlippedMAGRPOTrainer : MAGRPOTrainer;
  const r = await learningRun({
    dir: join(dir, `s${seed}-${flipped ? 'flipped' : 'learn'}`),
    agents: toyAgentPair(2 * seed + 1, 2 * seed + 2),
    trainer: (agents: Agent[]) =>
      new Trainer({
        agents,
        env,
        trainTasks: toyTrainTasks,
        config: {
          num_turns: 2,
          num_generations: 2,
          joint_mode: 'cross',
          discount: DISCOUNT,
          early_termination_threshold: THRESHOLD,
          ...ONE_WORD_SAMPLING,
          agent_learning_rate: 5e-3,
          rollout_buffer_size: 4,
          num_train_epochs: 16,
          eval_interval: 0,
          logging_steps: 1,
          seed,
        },
        logger: {
          // Each item's tree: without early termination its root has K² = 4 children.
          log: (_step, m) => {
            if (m['turn_1/nodes'] !== undefined && (m['turn_2/nodes'] ?? 0) < 4) prunedItems++;
          },
        },
      }),
    measure: async (agents) => (await exactEpisodeValue(env, toyEvalTasks, agentsPolicy(agents), EPISODE)).episodeReturn,
  });
  console.log(
    `MAGRPO H=2 cross seed ${seed}${flipped ? ' (sign-flipped)' : ''}: exact expected return ${r.before?.toFixed(4)} → ${r.after?.toFixed(4)}, ${prunedItems} items pruned [${r.seconds.toFixed(1)} s]`,
  );
  return { finalReturn: r.after as number, prunedItems };
}

test('uniform random play sits below the bar', async () => {
  const u = await exactEpisodeValue(new RetryEnv(), toyEvalTasks, uniformPolicy(toyWords), EPISODE);
  console.log(`uniform random play: exact expected return ${u.episodeReturn.toFixed(4)}`);
  expect(u.episodeReturn).toBeGreaterThan(0.1);
  expect(u.episodeReturn).toBeLessThan(BAR);
});

test(`MAGRPO learns with H = 2, discount, early termination and cross mode: mean − 3 SE over seeds ${SEEDS.join(', ')} ≥ ${BAR}`, async () => {
  const runs: { finalReturn: number; prunedItems: number }[] = [];
  for (const seed of SEEDS) runs.push(await run(seed, false));
  expectClears('learning', runs.map((r) => r.finalReturn), BAR);
  // Early termination took part: as the agents learned, some first turns paid enough to end the tree.
  for (const r of runs) expect(r.prunedItems).toBeGreaterThan(0);
}, 600_000);

test(`mutation: with every advantage sign-flipped each seed, and mean + 3 SE, stay below ${BAR}`, async () => {
  expectFallsShort('sign-flipped', await overSeeds(SEEDS, async (seed) => (await run(seed, true)).finalReturn), BAR);
}, 600_000);
