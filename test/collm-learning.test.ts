/**
 * Learning on the multi-turn sparse-reward toy task (2 turns; reward 0 after turn 1, the mean of
 * both turns' scores after turn 2): with fixed seeds CoLLM-CC raises the mean sampled eval reward
 * by the margin asserted below. CoLLM-DC and MAGRPO get the same sample budget (completions
 * generated per agent) and are reported beside it; only CC's learning and that all three run are
 * asserted.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import type { CriticLM } from '../src/critic/value-model.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { ToyCoordEnv, toyRandomBaseline, toyTasks, toyTrainTasks, toyWords } from '../envs/toy/index.js';
import { CoLLMCCTrainer } from '../trainers/collm-cc.js';
import { CoLLMDCTrainer } from '../trainers/collm-dc.js';
import { MAGRPOTrainer } from '../trainers/magrpo.js';
import { tinyCritic } from './collm-helpers.js';
import { disposeAgents, tempDir, tinyAgents } from './magrpo-helpers.js';

const E = Number(process.env.E ?? 40);
const LR = Number(process.env.LR ?? 5e-3);
const CLR = Number(process.env.CLR ?? 3e-2);
const ONLY = process.env.ONLY ?? 'cc,dc,mg';
const AS = Number(process.env.AS ?? 10);

let dir: string;
let cleanup: () => Promise<void>;
const disposers: (() => void)[] = [];

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend('wasm');
  ({ dir, cleanup } = await tempDir('collm-learn'));
});
afterAll(async () => {
  for (const d of disposers) d();
  await cleanup();
});

/** Fresh copies of the same two actors for each method (same seeds, same start). */
async function freshAgents(tag: string): Promise<Agent[]> {
  const agents = await tinyAgents(dir, [
    { name: `${tag}-a0`, arch: 'qwen3', seed: AS + 1, words: [...toyWords], hiddenSize: 32, numLayers: 1 },
    { name: `${tag}-a1`, arch: 'qwen3', seed: AS + 2, words: [...toyWords], hiddenSize: 32, numLayers: 1 },
  ]);
  disposers.push(() => disposeAgents(agents));
  return agents;
}

async function critic(tag: string, seed: number): Promise<CriticLM> {
  const c = await tinyCritic(dir, tag, seed, toyWords, { hiddenSize: Number(process.env.CH ?? 32) });
  disposers.push(() => c.model.dispose());
  return c;
}

const shared = {
  num_turns: 2,
  max_new_tokens: 1, // only the first word counts
  temperature: 1,
  top_p: 1,
  top_k: null,
  early_termination_threshold: null, // rewards are 0 before the last turn; -0.2 would stop every episode at turn 1
  eval_interval: 16, // before each epoch's first item
  eval_num_samples: 16,
  eval_batch_size: 16,
  logging_steps: process.env.DBG ? 1 : 1_000_000,
  seed: 0,
} as const;

const acConfig = {
  ...shared,
  num_train_epochs: E,
  agent_learning_rate: LR,
  critic_learning_rate: CLR,
  rollout_buffer_size: 32, // 16 episodes: every cue 4 times
  update_epochs: 4,
  discount: Number(process.env.GAMMA ?? 0.9),
  advantage_normalization: process.env.NN ? false : true,
  use_importance_ratio: process.env.NR ? false : true,
} as const;

function recorder(curve: number[]) {
  return {
    log: (_step: number, m: Record<string, number>) => {
      const r = m['eval/final_reward_mean'] ?? m['eval/turn_2/mean_reward'];
      if (r !== undefined) curve.push(r);
      if (process.env.DBG && m['turn_1/explained_variance'] !== undefined) dbg.push(`${(m['turn_1/explained_variance'] ?? NaN).toFixed(2)}/${(m['turn_2/explained_variance'] ?? NaN).toFixed(2)} r=${m['turn_2/reward_mean'].toFixed(2)} v=${m['turn_2/value_pred_mean'].toFixed(2)}`);
    },
  };
}

const dbg: string[] = [];
const fmt = (xs: number[]) => xs.map((x) => x.toFixed(2)).join(' ');

test('CoLLM-CC learns the 2-turn sparse toy task; CoLLM-DC and MAGRPO reported at the same sample budget', async () => {
  const env = new ToyCoordEnv({ numTurns: 2 });
  const evalTasks = toyTasks(16, 'eval');
  const budget = E * toyTrainTasks.length * 2; // completions per agent for the actor-critic runs
  const lines: string[] = [];

  let cc: number[] = [];
  if (ONLY.includes('cc')) {
    const t0 = performance.now();
    const trainer = new CoLLMCCTrainer({ agents: await freshAgents('cc'), critic: await critic('cc-critic', 5), env, trainTasks: toyTrainTasks, evalTasks, config: acConfig, logger: recorder(cc) });
    await trainer.train();
    cc.push((await trainer.evaluate()).metrics['eval/final_reward_mean']);
    trainer.dispose();
    lines.push(`CoLLM-CC  (${budget} completions/agent): ${fmt(cc)}  [${((performance.now() - t0) / 1000).toFixed(1)} s]`);
  }

  const dc: number[] = [];
  if (ONLY.includes('dc')) {
    const t0 = performance.now();
    const trainer = new CoLLMDCTrainer({
      agents: await freshAgents('dc'),
      critics: [await critic('dc-critic0', 5), await critic('dc-critic1', 6)],
      env,
      trainTasks: toyTrainTasks,
      evalTasks,
      config: acConfig,
      logger: recorder(dc),
    });
    await trainer.train();
    dc.push((await trainer.evaluate()).metrics['eval/final_reward_mean']);
    trainer.dispose();
    lines.push(`CoLLM-DC  (${budget} completions/agent): ${fmt(dc)}  [${((performance.now() - t0) / 1000).toFixed(1)} s]`);
  }

  const mg: number[] = [];
  if (ONLY.includes('mg')) {
    // K = 2, H = 2: K·(K^H − 1)/(K − 1) = 6 completions per agent per task.
    const tasks = Math.round(budget / 6);
    const t0 = performance.now();
    const trainer = new MAGRPOTrainer({
      agents: await freshAgents('mg'),
      env,
      trainTasks: toyTrainTasks,
      evalTasks,
      config: { ...shared, num_generations: 2, num_train_epochs: Math.ceil(tasks / toyTrainTasks.length), agent_learning_rate: LR, discount: 0.9, rollout_buffer_size: 8 },
      logger: recorder(mg),
    });
    await trainer.train({ maxItems: tasks });
    mg.push((await trainer.evaluate()).metrics['eval/turn_2/mean_reward']);
    trainer.dispose();
    lines.push(`MAGRPO    (${tasks * 6} completions/agent): ${fmt(mg)}  [${((performance.now() - t0) / 1000).toFixed(1)} s]`);
  }
  if (process.env.DBG) console.log(dbg.filter((_, i) => i % 3 === 0).join('\n'));
  console.log(`toy 2-turn sparse, eval mean final reward per epoch (random policy ${toyRandomBaseline.toFixed(3)}):\n${lines.join('\n')}`);

  if (cc.length > 0) {
    const start = cc[0];
    const end = Math.max(...cc.slice(-3));
    expect(start).toBeLessThan(0.1);
    expect(end - start).toBeGreaterThanOrEqual(0.15);
  }
  for (const curve of [dc, mg]) if (ONLY.length > 0) expect(curve.every(Number.isFinite)).toBe(true);
});
