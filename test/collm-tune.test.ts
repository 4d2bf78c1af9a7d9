import { afterAll, beforeAll, expect, test } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import type { Agent } from '../src/decpomdp/agent.js';
import type { CriticLM } from '../src/critic/value-model.js';
import { ToyCoordEnv, toyTasks, toyTrainTasks, toyWords } from '../envs/toy/index.js';
import { CoLLMCCTrainer } from '../trainers/collm-cc.js';
import { tempDir, tinyAgents } from './magrpo-helpers.js';
import { tinyCritic } from './collm-helpers.js';

const E = Number(process.env.E ?? 10);
const LR = Number(process.env.LR ?? 3e-3);
const CLR = Number(process.env.CLR ?? 1e-3);
const BUF = Number(process.env.BUF ?? 8);
const EP = Number(process.env.EP ?? 1);
const SEED = Number(process.env.SEED ?? 0);
let agents: Agent[]; let critic: CriticLM;
beforeAll(async () => {
  setBackendLogger(null);
  await initBackend('wasm');
  const { dir } = await tempDir('collm-tune');
  agents = await tinyAgents(dir, [
    { name: 'a0', arch: 'qwen3', seed: 1 + Number(process.env.AS ?? 0), words: [...toyWords], hiddenSize: Number(process.env.AH ?? 32), numLayers: Number(process.env.AL ?? 1) },
    { name: 'a1', arch: 'qwen3', seed: 2 + Number(process.env.AS ?? 0), words: [...toyWords], hiddenSize: Number(process.env.AH ?? 32), numLayers: Number(process.env.AL ?? 1) },
  ]);
  critic = await tinyCritic(dir, 'cc', 5, toyWords, { hiddenSize: Number(process.env.CH ?? 32) });
});

test('tune', async () => {
  const env = new ToyCoordEnv({ numTurns: Number(process.env.T ?? 2) });
  const evals: number[] = [];
  const tr = new CoLLMCCTrainer({ agents, env, critic, trainTasks: toyTrainTasks, evalTasks: toyTasks(16, 'e'),
    config: { num_turns: Number(process.env.T ?? 2), use_importance_ratio: process.env.NR ? false : true, advantage_normalization: process.env.NN ? false : true, max_new_tokens: 1, temperature: 1, top_p: 1, top_k: null, num_train_epochs: E, early_termination_threshold: null,
      rollout_buffer_size: BUF, eval_interval: 16, eval_num_samples: 16, eval_batch_size: 16, agent_learning_rate: LR, critic_learning_rate: CLR,
      update_epochs: EP, seed: SEED, logging_steps: 1 },
    logger: { log: (_s, m) => { if (m['eval/final_reward_mean'] !== undefined) evals.push(m['eval/final_reward_mean']); if (m['turn_2/value_loss'] !== undefined) vl.push(m['turn_2/value_loss']); } } });
  const vl: number[] = [];
  const t0 = performance.now();
  await tr.train();
  const ev = await tr.evaluate();
  for (const e of ev.episodes.slice(0, 8)) console.log(JSON.stringify(e.task), JSON.stringify(e.completions), e.rewards);
  console.log(`E=${E} LR=${LR} CLR=${CLR} BUF=${BUF} EP=${EP}: ${evals.map((r) => r.toFixed(2)).join(' ')} in ${((performance.now() - t0) / 1000).toFixed(1)}s; vl ${vl.filter((_, i) => i % 8 === 0).map((v) => v.toFixed(3)).join(' ')}`);
  expect(1).toBe(1);
});
