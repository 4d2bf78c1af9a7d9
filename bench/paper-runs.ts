/**
 * One training run of the paper's comparison in miniature (`npm run bench -- paper`): MAGRPO, CoLLM-DC or CoLLM-CC on the hidden-cue
 * task family (envs/hidden-cue) with tiny word-level qwen3 checkpoints (hidden 32, 1 layer), at a
 * matched budget of completions generated per agent.
 *
 * Settings shared by every method: one word per completion (max_new_tokens 1), temperature 1, no
 * nucleus/top-k, no early termination, γ = 0.9, actor learning rate 5e-3, 16 training tasks (each
 * cue pair four times), 16 eval tasks evaluated (sampled, not greedy) before every epoch and once
 * at the end. Actor-critic: one sample per agent per turn, one buffer flush per epoch (16
 * episodes) in minibatches of 4, 2 update epochs, critic learning rate 1e-2 (0 for the
 * frozen-critic control), the first 6 epochs a critic warm-up (only the critics learn); critics
 * are tiny qwen3 checkpoints of hidden 64 and 2 layers (they read the joint history).
 * MAGRPO: K = 2 samples per node, a K-ary tree of K·(K^H − 1)/(K − 1) completions per agent and
 * task, buffer of 8 tasks.
 */
import { join } from 'node:path';
import { CRITIC_LAYOUT_WORDS } from '../src/critic/inputs.js';
import type { CriticLM } from '../src/critic/value-model.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { createTinyModel } from '../src/model/tiny.js';
import { loadCausalLM } from '../src/model/load.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { HiddenCueEnv, hiddenCueTasks, hiddenCueWords } from '../envs/hidden-cue/index.js';
import { CoLLMCCTrainer } from '../trainers/collm/centralized.js';
import { CoLLMDCTrainer } from '../trainers/collm/decentralized.js';
import { MAGRPOTrainer } from '../trainers/magrpo/trainer.js';

/** The methods compared. */
export const PAPER_METHODS = ['magrpo', 'collm-dc', 'collm-cc'] as const;
export type PaperMethod = (typeof PAPER_METHODS)[number];

/** One run's settings. */
export interface PaperRunOptions {
  readonly method: PaperMethod;
  /** Horizon H of the hidden-cue task (1: dense; ≥ 2: sparse). */
  readonly horizon: number;
  /** Seeds the actors', critics' and heads' init and the sampling/minibatch streams. */
  readonly seed: number;
  /** Actor-critic epochs over the 16 training tasks; MAGRPO gets the same completions per agent. */
  readonly epochs: number;
  /** Actor-critic only: a critic that never learns (critic learning rate 0). */
  readonly frozenCritic?: boolean;
  /** Scratch directory for the tiny checkpoints. */
  readonly dir: string;
  /** Extra actor-critic config (e.g. `comlrl136()`). */
  readonly acConfig?: Record<string, unknown>;
}

/** One run's results. */
export interface PaperRunResult {
  /** Mean eval reward of the episode's last turn (what the task pays), per evaluation, the last after training. */
  readonly curve: number[];
  /** Completions generated per agent in training. */
  readonly completionsPerAgent: number;
  /** Explained variance of the critic's values for the last turn's targets (the reward) at each flush (actor-critic only). */
  readonly explainedVariance: number[];
  /** Wall time of the run, seconds. */
  readonly seconds: number;
}

const TRAIN_TASKS = hiddenCueTasks(16, 'hc-train');
const EVAL_TASKS = hiddenCueTasks(16, 'hc-eval');
const ACTOR_LR = 5e-3;
/** Critics are a little larger than the actors: they must read the joint history. */
const CRITIC_SIZE = { hiddenSize: 64, numLayers: 2 };

/** Completions per agent of a MAGRPO tree with K samples per node over H turns. */
function treeCompletions(k: number, h: number): number {
  let total = 0;
  for (let t = 1; t <= h; t++) total += k ** t;
  return total;
}

async function tinyLM(
  dir: string,
  name: string,
  seed: number,
  words: readonly string[],
  size: { hiddenSize: number; numLayers: number } = { hiddenSize: 32, numLayers: 1 },
): Promise<{ model: Awaited<ReturnType<typeof loadCausalLM>>; tokenizer: Awaited<ReturnType<typeof loadTokenizer>> }> {
  const d = join(dir, name);
  await createTinyModel({ dir: d, arch: 'qwen3', seed, tokenizer: 'word', words: [...words], ...size });
  return { model: await loadCausalLM(d), tokenizer: await loadTokenizer(d) };
}

/** Runs one method on one variant with one seed (see the module comment). */
export async function paperRun(opts: PaperRunOptions): Promise<PaperRunResult> {
  const t0 = performance.now();
  const { method, horizon, seed, epochs, dir } = opts;
  const tag = `${method}-h${horizon}-s${seed}${opts.frozenCritic ? '-frozen' : ''}`;
  const agents: Agent[] = [];
  const critics: CriticLM[] = [];
  const criticWords = [...new Set([...hiddenCueWords, ...CRITIC_LAYOUT_WORDS])];
  try {
    for (let i = 0; i < 2; i++) agents.push({ name: `${tag}-a${i}`, chat: false, ...(await tinyLM(dir, `${tag}-a${i}`, 1000 * seed + i + 1, hiddenCueWords)) });
    const env = new HiddenCueEnv({ numTurns: horizon });
    const curve: number[] = [];
    const ev: number[] = [];
    const finalKey = method === 'magrpo' ? `eval/turn_${horizon}/mean_reward` : 'eval/final_reward_mean';
    const logger = {
      log: (_step: number, m: Record<string, number>) => {
        if (m[finalKey] !== undefined) curve.push(m[finalKey]);
        // The last turn's: the critic's fit of the reward itself (earlier turns regress to bootstraps).
        const e = m[`turn_${horizon}/explained_variance`];
        if (e !== undefined) ev.push(e);
      },
    };
    const shared = {
      num_turns: horizon,
      max_new_tokens: 1,
      temperature: 1,
      top_p: 1,
      top_k: null,
      early_termination_threshold: null,
      discount: 0.9,
      agent_learning_rate: ACTOR_LR,
      eval_interval: TRAIN_TASKS.length,
      eval_num_samples: EVAL_TASKS.length,
      eval_batch_size: EVAL_TASKS.length,
      logging_steps: 1,
      seed,
    } as const;
    const budget = epochs * TRAIN_TASKS.length * horizon;
    if (method === 'magrpo') {
      const perTask = treeCompletions(2, horizon);
      const tasks = Math.max(1, Math.round(budget / perTask));
      const trainer = new MAGRPOTrainer({
        agents,
        env,
        trainTasks: TRAIN_TASKS,
        evalTasks: EVAL_TASKS,
        config: { ...shared, num_generations: 2, num_train_epochs: Math.ceil(tasks / TRAIN_TASKS.length), rollout_buffer_size: 8 },
        logger,
      });
      await trainer.train({ maxItems: tasks });
      await trainer.evaluate();
      trainer.dispose();
      return { curve, completionsPerAgent: tasks * perTask, explainedVariance: [], seconds: (performance.now() - t0) / 1000 };
    }
    const acConfig = {
      ...shared,
      num_train_epochs: epochs,
      critic_learning_rate: opts.frozenCritic ? 0 : 1e-2,
      rollout_buffer_size: TRAIN_TASKS.length * horizon, // one flush per epoch
      train_batch_size: 4,
      update_epochs: 2,
      // The first 6 epochs train only the critic(s), on the initial policies' episodes.
      critic_warmup_items: 6 * TRAIN_TASKS.length,
      ...(opts.acConfig ?? {}),
    };
    const critic = async (i: number) => {
      const lm = await tinyLM(dir, `${tag}-c${i}`, 1000 * seed + 10 + i, criticWords, CRITIC_SIZE);
      const c: CriticLM = { name: `${tag}-c${i}`, ...lm };
      critics.push(c);
      return c;
    };
    const trainer =
      method === 'collm-cc'
        ? new CoLLMCCTrainer({ agents, critic: await critic(0), env, trainTasks: TRAIN_TASKS, evalTasks: EVAL_TASKS, config: acConfig, logger })
        : new CoLLMDCTrainer({ agents, critics: [await critic(0), await critic(1)], env, trainTasks: TRAIN_TASKS, evalTasks: EVAL_TASKS, config: acConfig, logger });
    await trainer.train();
    await trainer.evaluate();
    trainer.dispose();
    return { curve, completionsPerAgent: budget, explainedVariance: ev, seconds: (performance.now() - t0) / 1000 };
  } finally {
    for (const a of agents) a.model.dispose();
    for (const c of critics) c.model.dispose();
  }
}

/** Mean of the last `n` points of a curve (the final eval reward of a run). */
export function finalReward(curve: readonly number[], n = 3): number {
  const tail = curve.slice(-n);
  return tail.reduce((a, b) => a + b, 0) / tail.length;
}

/** Area under the learning curve: the mean eval reward over all evaluations (trapezoids on a unit grid, normalized). */
export function curveArea(curve: readonly number[]): number {
  if (curve.length < 2) return curve[0] ?? 0;
  let s = 0;
  for (let i = 1; i < curve.length; i++) s += (curve[i - 1] + curve[i]) / 2;
  return s / (curve.length - 1);
}
