/**
 * Benchmark (not a test): one CoLLM-CC item — 2 agents and a centralized critic (tiny BPE
 * checkpoints, hidden 64, 2 layers), the 2-turn toy task, 32 new tokens per turn, a rollout buffer
 * of one episode so every item ends with an actor and critic update — through CoLLMCCTrainer.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { initBackend } from '../src/backend/init.js';
import type { CriticLM } from '../src/critic/value-model.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { createTinyModel } from '../src/model/tiny.js';
import { loadCausalLM } from '../src/model/load.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { ToyCoordEnv, toyTrainTasks } from '../envs/toy/index.js';
import { CoLLMCCTrainer } from '../trainers/collm/centralized.js';

const REPEATS = 3;
const MAX_NEW_TOKENS = 32;

async function tiny(dir: string, name: string, seed: number): Promise<{ d: string }> {
  const d = join(dir, name);
  await createTinyModel({ dir: d, arch: 'qwen3', seed, tokenizer: 'bpe', hiddenSize: 64, numLayers: 2 });
  return { d };
}

/** Warms up with one item, then returns the median of {@link REPEATS} items (ms). */
export async function benchCollmCCItem(): Promise<Record<string, number>> {
  await initBackend();
  const dir = await mkdtemp(join(tmpdir(), 'comlrl-bench-collm-'));
  const agents: Agent[] = [];
  let critic: CriticLM | null = null;
  try {
    for (let i = 0; i < 2; i++) {
      const { d } = await tiny(dir, `agent_${i}`, 200 + i);
      agents.push({ name: `agent_${i}`, model: await loadCausalLM(d), tokenizer: await loadTokenizer(d), chat: false });
    }
    const { d } = await tiny(dir, 'critic', 210);
    critic = { name: 'critic', model: await loadCausalLM(d), tokenizer: await loadTokenizer(d) };
    const trainer = new CoLLMCCTrainer({
      agents,
      critic,
      env: new ToyCoordEnv({ numTurns: 2 }),
      trainTasks: toyTrainTasks,
      config: {
        num_turns: 2,
        max_new_tokens: MAX_NEW_TOKENS,
        temperature: 1,
        top_p: 1,
        top_k: 0,
        early_termination_threshold: null,
        rollout_buffer_size: 2, // one 2-turn episode: an update every item
        update_epochs: 1,
        eval_interval: 0,
        num_train_epochs: REPEATS + 1,
        logging_steps: 1_000_000,
      },
    });
    await trainer.train({ maxItems: 1 });
    const ts: number[] = [];
    for (let rep = 0; rep < REPEATS; rep++) {
      const t0 = performance.now();
      await trainer.train({ maxItems: 1 });
      ts.push(performance.now() - t0);
    }
    trainer.dispose();
    ts.sort((a, b) => a - b);
    return { collm_cc_item_ms: ts[Math.floor(ts.length / 2)] };
  } finally {
    for (const a of agents) a.model.dispose();
    critic?.model.dispose();
    await rm(dir, { recursive: true, force: true });
  }
}
