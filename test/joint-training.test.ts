// Training with joint passes (`joint_passes`, the default for LoRA agents on one base) against
// training with one pass per agent: after 3 items of MAGRPO and of CoLLM-CC, with 2 and 3 agents,
// prompts of different lengths per agent, completions that stop early and episodes that end early,
// every adapter (and the critic) holds the same weights, and the rollouts saw the same rewards.
// The learning rate is small because AdamW divides by √v: a gradient element near zero whose float
// summation order differs moves by up to the learning rate, which the 1e-5 bound must absorb.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { initBackend, setBackendLogger } from '../src/backend/index.js';
import type { Agent } from '../src/decpomdp/agent.js';
import type { GlobalInfo, LLMDecPOMDP, StepResult } from '../src/decpomdp/types.js';
import { createTinyModel, JointLoraPasses, loadCausalLM, loraSectionSchema, loraSettings } from '../src/model/index.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { toyFirstWord, toyTasks, toyWords, type ToyTask } from '../envs/toy/index.js';
import { MAGRPOTrainer } from '../trainers/magrpo/trainer.js';
import { CoLLMCCTrainer } from '../trainers/collm/centralized.js';
import type { UpdateTraceEvent } from '../trainers/core/trace.js';
import { tinyCritic } from './collm-helpers.js';
import { tempDir } from './magrpo-helpers.js';
import { backendUnderTest } from './backend-under-test.js';

interface CueState {
  readonly task: ToyTask;
  readonly turn: number;
  readonly lastReward: number | null;
}

/**
 * N agents, 2 turns: agent i sees the cue repeated i + 1 times (prompts of different lengths); the
 * joint reward is the share of agents whose first word is the cue, plus 1/8 per word said.
 */
class CueEnv implements LLMDecPOMDP<ToyTask, CueState> {
  readonly name = 'cue-echo';
  readonly horizon = 2;
  constructor(readonly numAgents: number) {}
  initialState(task: ToyTask): CueState {
    return { task, turn: 0, lastReward: null };
  }
  observe(state: CueState, agent: number): string {
    return ['cue', ...new Array<string>(agent + 1).fill(state.task.cue), ...(state.turn > 0 ? ['partner'] : [])].join(' ');
  }
  async step(state: CueState, jointAction: readonly string[]): Promise<StepResult<CueState>> {
    // Hits on the cue, plus a little per word said, so every group's rewards spread.
    const reward = jointAction.reduce((r, a) => r + (toyFirstWord(a) === state.task.cue ? 1 : 0) + a.split(/\s+/).filter((w) => w !== '').length / 8, 0) / this.numAgents;
    const turn = state.turn + 1;
    return { reward, next: { task: state.task, turn, lastReward: reward }, done: turn >= this.horizon, info: {} };
  }
  globalInfo(state: CueState): GlobalInfo {
    return { turn: state.turn, numTurns: this.horizon, lastReward: state.lastReward, maxReward: 1 };
  }
}

const LORA = loraSettings(loraSectionSchema.parse({ r: 4, lora_alpha: 8, target_modules: 'all-linear' }));
let root: string;
let cleanup: () => Promise<void>;
let baseDir: string;

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend(backendUnderTest('wasm'));
  ({ dir: root, cleanup } = await tempDir('joint-training'));
  baseDir = join(root, 'base');
  await createTinyModel({ dir: baseDir, arch: 'qwen3', seed: 21, tokenizer: 'word', words: [...toyWords], hiddenSize: 32, numLayers: 2 });
});
afterAll(async () => {
  setBackendLogger((l) => console.error(l));
  await cleanup();
});

async function loraAgents(n: number): Promise<Agent[]> {
  const tokenizer = await loadTokenizer(baseDir);
  const out: Agent[] = [];
  for (let i = 0; i < n; i++) out.push({ name: `agent_${i}`, model: await loadCausalLM(baseDir, { lora: { settings: LORA, seed: `agent-${i}` } }), tokenizer, chat: false });
  return out;
}

async function weightsOf(models: readonly { trainableVariables(): tf.Variable[] }[]): Promise<number[][]> {
  const out: number[][] = [];
  for (const m of models) for (const v of m.trainableVariables()) out.push(Array.from(await v.data()));
  return out;
}

function maxDiff(a: readonly number[][], b: readonly number[][]): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  a.forEach((row, i) => row.forEach((v, j) => (m = Math.max(m, Math.abs(v - b[i][j])))));
  return m;
}

interface RunResult {
  weights: number[][];
  rewards: number[];
  completions: number[][][];
  lengths: number[];
  jointGenerations: number;
}

const tasks = toyTasks(3, 'joint');

async function runMagrpo(n: number, joint: boolean): Promise<RunResult> {
  const agents = await loraAgents(n);
  const events: UpdateTraceEvent[] = [];
  const spy = vi.spyOn(JointLoraPasses.prototype, 'generate');
  try {
    const trainer = new MAGRPOTrainer({
      agents,
      env: new CueEnv(n),
      trainTasks: tasks,
      trace: (e) => events.push(e),
      config: {
        num_turns: 2,
        num_generations: 2,
        max_new_tokens: 4,
        temperature: 1,
        top_p: 1,
        top_k: 0,
        agent_learning_rate: 1e-3,
        rollout_buffer_size: 3,
        early_termination_threshold: 0.9,
        num_train_epochs: 1,
        eval_interval: 0,
        logging_steps: 1000,
        seed: 3,
        joint_passes: joint,
      },
    });
    await trainer.train({ maxItems: 3 });
    // Per agent, in the order each agent trained on them (joint updates interleave the agents' events).
    const groups = events.filter((e) => e.kind === 'group_advantages').sort((x, y) => x.agent - y.agent);
    const result: RunResult = {
      weights: await weightsOf(agents.map((a) => a.model)),
      rewards: groups.flatMap((e) => e.returns),
      completions: groups.map((e) => e.completionIds.map((c) => [...c])),
      lengths: groups.flatMap((e) => e.completionIds.map((c) => c.length)),
      jointGenerations: spy.mock.calls.length,
    };
    trainer.dispose();
    return result;
  } finally {
    spy.mockRestore();
    for (const a of agents) a.model.dispose();
  }
}

async function runCC(n: number, joint: boolean): Promise<RunResult & { critic: number[][] }> {
  const agents = await loraAgents(n);
  const critic = await tinyCritic(root, `critic-${n}-${joint}`, 31, toyWords);
  const events: UpdateTraceEvent[] = [];
  const spy = vi.spyOn(JointLoraPasses.prototype, 'generate');
  try {
    const trainer = new CoLLMCCTrainer({
      agents,
      critic,
      env: new CueEnv(n),
      trainTasks: tasks,
      trace: (e) => events.push(e),
      config: {
        num_turns: 2,
        max_new_tokens: 4,
        temperature: 1,
        top_p: 1,
        top_k: 0,
        agent_learning_rate: 1e-3,
        rollout_buffer_size: 2,
        early_termination_threshold: 0.9,
        update_epochs: 1,
        num_train_epochs: 1,
        eval_interval: 0,
        logging_steps: 1000,
        seed: 4,
        joint_passes: joint,
      },
    });
    await trainer.train({ maxItems: 3 });
    const steps = events.filter((e) => e.kind === 'policy_step');
    const result = {
      weights: await weightsOf(agents.map((a) => a.model)),
      critic: await weightsOf([critic.model]),
      rewards: steps.map((e) => e.loss),
      completions: [],
      lengths: [],
      jointGenerations: spy.mock.calls.length,
    };
    trainer.dispose();
    return result;
  } finally {
    spy.mockRestore();
    for (const a of agents) a.model.dispose();
    critic.model.dispose();
  }
}

describe.each([2, 3])('%i LoRA agents on one base', (n) => {
  it('MAGRPO: joint passes sample, score and update exactly as per-agent passes', async () => {
    const joint = await runMagrpo(n, true);
    const alone = await runMagrpo(n, false);
    expect(joint.jointGenerations).toBeGreaterThan(0);
    expect(alone.jointGenerations).toBe(0);
    expect(joint.completions).toEqual(alone.completions);
    expect(joint.rewards).toEqual(alone.rewards);
    // The case named: completions that stopped before the limit beside full-length ones, and training moved the adapters.
    expect(Math.min(...joint.lengths)).toBeLessThan(4);
    expect(Math.max(...joint.lengths)).toBe(4);
    expect(Math.max(...joint.weights.filter((_, i) => i % 2 === 1).map((b) => Math.max(...b.map(Math.abs))))).toBeGreaterThan(1e-3);
    expect(maxDiff(joint.weights, alone.weights)).toBeLessThan(1e-5);
  });

  it('CoLLM-CC: joint actor passes leave the actors and the critic as per-agent passes do', async () => {
    const joint = await runCC(n, true);
    const alone = await runCC(n, false);
    expect(joint.jointGenerations).toBeGreaterThan(0);
    expect(alone.jointGenerations).toBe(0);
    expect(joint.rewards.length).toBeGreaterThan(0);
    joint.rewards.forEach((l, i) => expect(l).toBeCloseTo(alone.rewards[i], 5));
    expect(maxDiff(joint.weights, alone.weights)).toBeLessThan(1e-5);
    expect(maxDiff(joint.critic, alone.critic)).toBeLessThan(1e-5);
  });
});
