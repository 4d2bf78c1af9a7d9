/**
 * tf.memory().numTensors stays flat across 100 actor-critic updates (buffer flushes) of each
 * critic kind: CoLLM-CC, CoLLM-DC with separate critics, CoLLM-DC with shared heads (value clipping).
 */
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import type { CriticLM } from '../src/critic/value-model.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { ToyCoordEnv, toyTasks, toyWords } from '../envs/toy/index.js';
import { CoLLMCCTrainer } from '../trainers/collm/centralized.js';
import { CoLLMDCTrainer } from '../trainers/collm/decentralized.js';
import { disposeCritics, toyCritics } from './collm-helpers.js';
import { disposeAgents, tempDir, tinyAgents } from './magrpo-helpers.js';
import { backendUnderTest } from './backend-under-test.js';

let cleanup: () => Promise<void>;
let agents: Agent[];
let critics: CriticLM[];

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend(backendUnderTest('wasm'));
  let dir: string;
  ({ dir, cleanup } = await tempDir('collm-mem'));
  agents = await tinyAgents(dir, [
    { name: 'a0', arch: 'qwen3', seed: 1, words: [...toyWords] },
    { name: 'a1', arch: 'qwen3', seed: 2, words: [...toyWords] },
  ]);
  critics = await toyCritics(dir);
});
afterAll(async () => {
  disposeAgents(agents);
  disposeCritics(critics);
  await cleanup();
});

// Every item is one 2-turn episode; a buffer of 1 flushes after every transition: 2 updates per item.
const config = {
  num_turns: 2,
  max_new_tokens: 2,
  temperature: 1,
  top_p: 1,
  early_termination_threshold: null,
  rollout_buffer_size: 1,
  update_epochs: 2,
  agent_learning_rate: 1e-3,
  critic_learning_rate: 1e-3,
  eval_interval: 0,
  logging_steps: 1_000_000,
  num_train_epochs: 1,
} as const;

async function countAcross(trainer: { train: (o: { maxItems: number }) => Promise<void>; updateSteps: number; dispose: () => void }): Promise<number[]> {
  await trainer.train({ maxItems: 5 }); // 10 updates: optimizer moments now exist
  const before = tf.memory().numTensors;
  await trainer.train({ maxItems: 45 }); // 90 more updates, 100 in all
  const after = tf.memory().numTensors;
  trainer.dispose();
  return [before, after];
}

it('tensor count is flat across 100 updates of CoLLM-CC and CoLLM-DC (separate and shared critics)', async () => {
  const env = new ToyCoordEnv({ numTurns: 2 });
  const tasks = toyTasks(50, 'mem');
  const make = [
    () => new CoLLMCCTrainer({ agents, critic: critics[2], env, trainTasks: tasks, config }),
    () => new CoLLMDCTrainer({ agents, critics: [critics[0], critics[1]], env, trainTasks: tasks, config: { ...config, critic_type: 'q' } }),
    () => new CoLLMDCTrainer({ agents, env, trainTasks: tasks, config: { ...config, use_separate_critic: false, value_head_hidden_dim: 8, use_global_info: true } }),
  ];
  const start = tf.memory().numTensors;
  const [cc, dc, shared] = [await countAcross(make[0]()), await countAcross(make[1]()), await countAcross(make[2]())];
  console.log(`numTensors before/after 90 more updates: CC ${cc.join('/')}, DC ${dc.join('/')}, DC shared ${shared.join('/')}`);
  expect(cc[1]).toBe(cc[0]);
  expect(dc[1]).toBe(dc[0]);
  expect(shared[1]).toBe(shared[0]);
  // Disposing the trainers frees their optimizer moments and heads: back to the models only.
  expect(tf.memory().numTensors).toBe(start);
}, 300_000); // ~95 s alone on tensorflow, past 120 s beside another test worker
