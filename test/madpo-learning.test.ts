/**
 * MADPO learns the single-turn toy coordination task (envs/toy: both agents see a cue and must say
 * the same one of its two answers) from the preferences its joint reward gives, and its mutation —
 * every pair's winner and loser swapped (SwappedMADPOTrainer) — does not.
 *
 * Runs: two tiny word-level qwen3 agents (hidden 32, 1 layer) per seed, K = 8 candidates, one word
 * per completion at temperature 1, up to 16 pairs per item (largest reward gaps), one step per item
 * (16 pairs), dpo_beta 0.5, learning rate 3e-3, EPOCHS epochs of the 16 training tasks. The figure is
 * the trained policies' exact expected reward over the four cues (test/exact-eval.ts: no sampling
 * noise), so the spread is the seeds' alone.
 *
 * The bar: the learning runs' mean over seeds 0–2 minus 3 standard errors must reach BAR, the
 * mutation's mean plus 3 standard errors must stay below it, and BAR is above uniform random play
 * (toyRandomBaseline = 16/225 ≈ 0.071). Measured on wasm (about 55 s per learning run):
 *   learning: 0.950, 0.950, 0.951 (mean 0.950, SE 0.0002: mean − 3 SE = 0.950)
 *   winner/loser swapped: 0.007, 0.007, 0.006 (mean + 3 SE = 0.007)
 *   untrained: 0.042, 0.043, 0.042
 * At 8 epochs the learning runs reached 0.54, 0.51, 0.55 (3e-3) and 0.91, 0.36, 0.79 (1e-2).
 */
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { initBackend } from '../src/backend/init.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { ToyCoordEnv, toyEvalTasks, toyRandomBaseline, toyTrainTasks, toyWords } from '../envs/toy/index.js';
import { MADPOTrainer, type PreferencePair } from '../trainers/index.js';
import { agentsPolicy, exactEpisodeValue, lowerBound, meanAndSE, upperBound } from './exact-eval.js';
import { disposeAgents, tempDir, tinyAgents } from './magrpo-helpers.js';
import { backendUnderTest } from './backend-under-test.js';

const SEEDS = [0, 1, 2];
const BAR = 0.5;
const EPOCHS = 16;
const EPISODE = { numTurns: 1, discount: 1, earlyTerminationThreshold: null } as const;

/**
 * The mutation: each pair's winner and loser swapped (with their reference log-probs and rewards),
 * so every step raises the worse joint candidate's likelihood over the better one's.
 */
class SwappedMADPOTrainer<T, S> extends MADPOTrainer<T, S> {
  override async preferencePairs(task: T): Promise<{ pairs: PreferencePair[]; rewards: number[] }> {
    const { pairs, rewards } = await super.preferencePairs(task);
    const swapped = pairs.map((p) => ({ ...p, winnerIds: p.loserIds, loserIds: p.winnerIds, refWinner: p.refLoser, refLoser: p.refWinner, winnerReward: p.loserReward, loserReward: p.winnerReward }));
    return { pairs: swapped, rewards };
  }
}

let cleanup: () => Promise<void>;
let dir: string;

beforeAll(async () => {
  await initBackend(backendUnderTest('wasm'));
  ({ dir, cleanup } = await tempDir('madpo-learn'));
});
afterAll(async () => {
  await cleanup();
});

/** The trained policies' exact expected reward after one run (fresh agents from seeds 2·seed + 1, 2·seed + 2). */
async function run(seed: number, swapped: boolean): Promise<number> {
  const agents: Agent[] = await tinyAgents(join(dir, `s${seed}-${swapped ? 'swapped' : 'learn'}`), [
    { name: 'a0', arch: 'qwen3', seed: 2 * seed + 1, words: [...toyWords], hiddenSize: 32, numLayers: 1 },
    { name: 'a1', arch: 'qwen3', seed: 2 * seed + 2, words: [...toyWords], hiddenSize: 32, numLayers: 1 },
  ]);
  const env = new ToyCoordEnv();
  const Trainer = swapped ? SwappedMADPOTrainer : MADPOTrainer;
  const trainer = new Trainer({
    agents,
    env,
    trainTasks: toyTrainTasks, // 16 items, each cue 4 times
    config: {
      num_generations: 8,
      // Only the first word counts, so one token per completion is the whole answer.
      max_new_tokens: 1,
      temperature: 1,
      top_p: 1,
      top_k: 0,
      preference_pairs_per_sample: 16,
      pair_selection: 'reward_gap',
      dpo_beta: 0.5,
      rollout_buffer_size: 16,
      train_batch_size: 16,
      agent_learning_rate: 3e-3,
      num_train_epochs: EPOCHS,
      eval_interval: 0,
      logging_steps: 1_000_000,
      seed,
    },
  });
  const t0 = performance.now();
  try {
    const before = await exactEpisodeValue(env, toyEvalTasks, agentsPolicy(agents), EPISODE);
    await trainer.train();
    const after = await exactEpisodeValue(env, toyEvalTasks, agentsPolicy(agents), EPISODE);
    console.log(`MADPO toy seed ${seed}${swapped ? ' (winner/loser swapped)' : ''}: exact expected reward ${before.finalReward.toFixed(3)} → ${after.finalReward.toFixed(3)} [${((performance.now() - t0) / 1000).toFixed(1)} s]`);
    return after.finalReward;
  } finally {
    trainer.dispose();
    disposeAgents(agents);
  }
}

test(`MADPO learns the toy coordination task: mean − 3 SE over seeds ${SEEDS.join(', ')} ≥ ${BAR}`, async () => {
  expect(BAR).toBeGreaterThan(toyRandomBaseline);
  const finals: number[] = [];
  for (const seed of SEEDS) finals.push(await run(seed, false));
  console.log(`learning: ${JSON.stringify(meanAndSE(finals))}, mean − 3 SE = ${lowerBound(finals).toFixed(3)}`);
  expect(lowerBound(finals)).toBeGreaterThanOrEqual(BAR);
}, 900_000);

test(`mutation: with winner and loser swapped each seed, and mean + 3 SE, stay below ${BAR}`, async () => {
  const finals: number[] = [];
  for (const seed of SEEDS) finals.push(await run(seed, true));
  console.log(`swapped: ${JSON.stringify(meanAndSE(finals))}, mean + 3 SE = ${upperBound(finals).toFixed(3)}`);
  for (const f of finals) expect(f).toBeLessThan(BAR);
  expect(upperBound(finals)).toBeLessThan(BAR);
}, 900_000);
