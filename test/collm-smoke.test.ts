import { afterAll, beforeAll, expect, test } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import type { Agent } from '../src/decpomdp/agent.js';
import type { CriticLM } from '../src/critic/value-model.js';
import { ToyCoordEnv, toyTasks, toyTrainTasks, toyWords } from '../envs/toy/index.js';
import { CoLLMCCTrainer } from '../trainers/collm-cc.js';
import { CoLLMDCTrainer } from '../trainers/collm-dc.js';
import { disposeAgents, tempDir, tinyAgents } from './magrpo-helpers.js';
import { tinyCritic } from './collm-helpers.js';

let cleanup: () => Promise<void>;
let agents: Agent[];
let critics: CriticLM[];
beforeAll(async () => {
  setBackendLogger(null);
  await initBackend('wasm');
  let dir: string;
  ({ dir, cleanup } = await tempDir('collm-smoke'));
  agents = await tinyAgents(dir, [
    { name: 'a0', arch: 'qwen3', seed: 1, words: [...toyWords] },
    { name: 'a1', arch: 'qwen3', seed: 2, words: [...toyWords] },
  ]);
  critics = [await tinyCritic(dir, 'c0', 3, toyWords), await tinyCritic(dir, 'c1', 4, toyWords), await tinyCritic(dir, 'cc', 5, toyWords)];
});
afterAll(async () => { disposeAgents(agents); await cleanup(); });

test('smoke', async () => {
  const env = new ToyCoordEnv({ numTurns: 2 });
  const cc = new CoLLMCCTrainer({ agents, env, critic: critics[2], trainTasks: toyTrainTasks.slice(0, 4), evalTasks: toyTasks(4, 'e'),
    config: { num_turns: 2, max_new_tokens: 2, num_train_epochs: 1, early_termination_threshold: null, rollout_buffer_size: 4, eval_interval: 4, update_epochs: 2 } });
  const t0 = performance.now();
  await cc.train();
  console.log('cc', cc.lastUpdateMetrics, (performance.now() - t0) / 1000);
  const ev = await cc.evaluate();
  console.log(ev.metrics);
  const dc = new CoLLMDCTrainer({ agents, env, critics: critics.slice(0, 2), trainTasks: toyTrainTasks.slice(0, 4),
    config: { num_turns: 2, max_new_tokens: 2, num_train_epochs: 1, early_termination_threshold: null, rollout_buffer_size: 4, update_epochs: 2, critic_type: 'q' } });
  await dc.train();
  console.log('dc', dc.lastUpdateMetrics);
  const dcs = new CoLLMDCTrainer({ agents, env, trainTasks: toyTrainTasks.slice(0, 4),
    config: { use_separate_critic: false, num_turns: 1, num_generations: 3, max_new_tokens: 2, num_train_epochs: 1, rollout_buffer_size: 4, update_epochs: 2, use_global_info: true } });
  await dcs.train();
  console.log('dcs', dcs.lastUpdateMetrics, tf.memory().numTensors);
  expect(1).toBe(1);
});
