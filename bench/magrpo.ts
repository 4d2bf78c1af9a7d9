/**
 * Benchmark (not a test): one MAGRPO step — 2 agents, K = 4, 1 turn, 32 new tokens — on tiny
 * random checkpoints, split into generation, reward, scoring (teacher-forced forward), backward and
 * optimizer time, plus the same step run end to end through MAGRPOTrainer.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { initBackend } from '../src/backend/init.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { createTinyModel } from '../src/model/tiny.js';
import { loadCausalLM } from '../src/model/load.js';
import { AdamW } from '../src/optim/adamw.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { rngFor } from '../src/util/rng.js';
import { ToyCoordEnv, toyTrainTasks } from '../envs/toy/index.js';
import { groupAdvantages } from '../trainers/magrpo/advantage.js';
import { encodePrompt, generateGroup, type CompletionGroup } from '../trainers/core/generation.js';
import { applyGradients, linearPolicyLoss, sequenceLossGradients, type PolicyGradientRow } from '../trainers/core/loss.js';
import { MAGRPOTrainer } from '../trainers/magrpo/trainer.js';

const K = 4;
const MAX_NEW_TOKENS = 32;
const REPEATS = 3;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

/**
 * Runs the step once to warm up, then {@link REPEATS} times, and returns medians in milliseconds
 * (`*_ms`) plus token counts. Uses the backend from `COMLRL_BACKEND` (default wasm).
 */
export async function benchMagrpoStep(): Promise<Record<string, number>> {
  await initBackend();
  const dir = await mkdtemp(join(tmpdir(), 'comlrl-bench-magrpo-'));
  const agents: Agent[] = [];
  try {
    for (let i = 0; i < 2; i++) {
      const d = join(dir, `agent_${i}`);
      // The tiny BPE model (vocab ~500, hidden 64, 2 layers) so 32 sampled tokens are varied text.
      await createTinyModel({ dir: d, arch: 'qwen3', seed: 100 + i, tokenizer: 'bpe', hiddenSize: 64, numLayers: 2 });
      agents.push({ name: `agent_${i}`, model: await loadCausalLM(d), tokenizer: await loadTokenizer(d), chat: false });
    }
    const env = new ToyCoordEnv();
    const settings = { maxNewTokens: MAX_NEW_TOKENS, temperature: 1, topP: 1, topK: 0 };
    const rng = rngFor(0, 'sampling');
    const optimizers = agents.map((a) => new AdamW(a.model.trainableVariables(), { lr: 1e-5 }));
    const phases: Record<string, number[]> = { generation: [], reward: [], scoring: [], backward: [], optimizer: [], step: [] };
    const tokens: number[] = [];

    for (let rep = 0; rep <= REPEATS; rep++) {
      const task = toyTrainTasks[rep % toyTrainTasks.length];
      const state = env.initialState(task);
      const t0 = performance.now();
      // Generation: K completions per agent, one generate call each.
      const groups: CompletionGroup[] = [];
      for (let i = 0; i < agents.length; i++) {
        groups.push(await generateGroup(agents[i], encodePrompt(agents[i], env.observe(state, i)), K, settings, rng));
      }
      const t1 = performance.now();
      // Reward: K aligned joint actions.
      const rewards: number[] = [];
      for (let k = 0; k < K; k++) rewards.push((await env.step(state, groups.map((g) => g.texts[k]))).reward);
      const t2 = performance.now();
      // Per agent: scoring forward alone, then forward+backward, then the AdamW step.
      let scoring = 0;
      let fwdBwd = 0;
      let opt = 0;
      // Random returns so the loss is not zero whatever the reward (the toy pays 0 to random text).
      const adv = groupAdvantages(rewards.map((r, k) => r + k * 0.1), 'mean', true);
      for (let i = 0; i < agents.length; i++) {
        const rows: PolicyGradientRow[] = groups[i].ids.map((c, k) => ({ promptIds: groups[i].promptIds, completionIds: c, coef: adv[k] / K }));
        const s0 = performance.now();
        const seq = tf.tidy(() =>
          tf.sum(
            agents[i].model.scoreCompletions(
              rows.map((r) => [...r.promptIds]),
              rows.map((r) => [...r.completionIds]),
            ).tokenLogProbs,
            1,
          ),
        );
        await seq.data();
        seq.dispose();
        const s1 = performance.now();
        const g = sequenceLossGradients(agents[i].model, rows, linearPolicyLoss);
        const s2 = performance.now();
        applyGradients(optimizers[i], g.grads, null);
        // Force the assignment to finish before stopping the clock.
        await agents[i].model.trainableVariables()[0].data();
        const s3 = performance.now();
        scoring += s1 - s0;
        fwdBwd += s2 - s1;
        opt += s3 - s2;
      }
      const t3 = performance.now();
      if (rep === 0) continue; // warm-up
      phases.generation.push(t1 - t0);
      phases.reward.push(t2 - t1);
      phases.scoring.push(scoring);
      phases.backward.push(Math.max(0, fwdBwd - scoring));
      phases.optimizer.push(opt);
      phases.step.push(t3 - t0);
      tokens.push(groups.reduce((s, g) => s + g.ids.reduce((a, c) => a + c.length, 0), 0));
    }
    for (const o of optimizers) o.dispose();

    // The same step through the trainer (rollout tree, buffer of 1 node sample, one update per agent).
    const trainer = new MAGRPOTrainer({
      agents,
      env,
      trainTasks: toyTrainTasks,
      config: {
        num_turns: 1,
        num_generations: K,
        max_new_tokens: MAX_NEW_TOKENS,
        temperature: 1,
        top_p: 1,
        top_k: 0,
        rollout_buffer_size: 1,
        eval_interval: 0,
        num_train_epochs: 1,
      },
    });
    await trainer.train({ maxItems: 1 });
    const trainerSteps: number[] = [];
    for (let rep = 0; rep < REPEATS; rep++) {
      const t0 = performance.now();
      await trainer.train({ maxItems: 1 });
      trainerSteps.push(performance.now() - t0);
    }
    trainer.dispose();

    const genMs = median(phases.generation);
    const genTokens = median(tokens);
    return {
      generation_ms: genMs,
      reward_ms: median(phases.reward),
      scoring_ms: median(phases.scoring),
      backward_ms: median(phases.backward),
      optimizer_ms: median(phases.optimizer),
      step_ms: median(phases.step),
      trainer_step_ms: median(trainerSteps),
      tokens_generated: genTokens,
      generation_tokens_per_s: genTokens / (genMs / 1000),
    };
  } finally {
    for (const a of agents) a.model.dispose();
    await rm(dir, { recursive: true, force: true });
  }
}
