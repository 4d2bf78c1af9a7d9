/**
 * MAGRPO: config constraints, the rollout tree's size and returns, cross-mode aggregation, buffer
 * updates, metrics, heterogeneous agents, determinism/resume and tensor hygiene, on real tiny
 * checkpoints and the toy environment.
 */
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { initBackend } from '../src/backend/init.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { fromCoMLRL } from '../src/decpomdp/comlrl-adapter.js';
import type { GlobalInfo, LLMDecPOMDP, StepResult } from '../src/decpomdp/types.js';
import { loadCausalLM } from '../src/model/load.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { ToyCoordEnv, toyTrainTasks, toyWords, type ToyState, type ToyTask } from '../envs/toy/index.js';
import {
  agentGroupReturns,
  jointActions,
  MAGRPOTrainer,
  nodeReturns,
  parseMAGRPOConfig,
  terminatesEarly,
  treeNodes,
  treeSamples,
  type MAGRPOConfigInput,
  type RolloutNode,
} from '../trainers/index.js';
import { disposeAgents, tempDir, tinyAgents } from './magrpo-helpers.js';

/** Forwards to an environment and counts the joint steps it is asked for. */
class CountingEnv<T, S> implements LLMDecPOMDP<T, S> {
  steps = 0;
  constructor(private readonly inner: LLMDecPOMDP<T, S>) {}
  get name() {
    return this.inner.name;
  }
  get numAgents() {
    return this.inner.numAgents;
  }
  get horizon() {
    return this.inner.horizon;
  }
  initialState(task: T): S {
    return this.inner.initialState(task);
  }
  observe(state: S, agent: number): string {
    return this.inner.observe(state, agent);
  }
  step(state: S, joint: readonly string[]): Promise<StepResult<S>> {
    this.steps++;
    return this.inner.step(state, joint);
  }
  globalInfo(state: S): GlobalInfo {
    return this.inner.globalInfo(state);
  }
}

/** Small, fast settings: one-token completions, no eval, every item logged. */
const FAST: MAGRPOConfigInput = {
  max_new_tokens: 1,
  temperature: 1,
  top_p: 1,
  top_k: 0,
  eval_interval: 0,
  logging_steps: 1,
  num_train_epochs: 1,
};

describe('config', () => {
  test('defaults are CoMLRL 1.3.6 MAGRPOConfig defaults', () => {
    const c = parseMAGRPOConfig({});
    expect(c).toMatchObject({
      num_train_epochs: 20,
      agent_learning_rate: 5e-6,
      logging_steps: 50,
      num_generations: 4,
      max_new_tokens: 256,
      temperature: 0.6,
      top_p: 0.6,
      top_k: 50,
      num_turns: 2,
      discount: 1,
      joint_mode: 'aligned',
      early_termination_threshold: -0.2,
      external_prompt_passthrough: false,
      eval_interval: 16,
      eval_num_samples: 4,
      eval_batch_size: 1,
      rollout_buffer_size: 2,
      train_batch_size: null,
      advantage_normalization: true,
      advantage_mode: 'mean',
      weight_decay: 0.01,
      adam_betas: [0.9, 0.999],
      adam_eps: 1e-8,
      max_grad_norm: null,
    });
    expect(c.num_agents).toBeUndefined();
  });

  // CoMLRL's test_config_constraints: every ">= 1" field rejects 0, every ">= 0" field rejects -1,
  // num_generations rejects 1; plus comlrl's own ranges and enums.
  const bad: [string, unknown, RegExp][] = [
    ['num_train_epochs', 0, /num_train_epochs must be an integer >= 1/],
    ['logging_steps', 0, /logging_steps must be an integer >= 1/],
    ['num_agents', 0, /num_agents must be an integer >= 1/],
    ['num_turns', 0, /num_turns must be an integer >= 1/],
    ['eval_batch_size', 0, /eval_batch_size must be an integer >= 1/],
    ['rollout_buffer_size', 0, /rollout_buffer_size must be an integer >= 1/],
    ['train_batch_size', 0, /train_batch_size must be an integer >= 1/],
    ['max_new_tokens', 0, /max_new_tokens must be an integer >= 1/],
    ['eval_interval', -1, /eval_interval must be an integer >= 0/],
    ['eval_num_samples', -1, /eval_num_samples must be an integer >= 0/],
    ['num_generations', 1, /num_generations must be an integer >= 2/],
    ['num_generations', 2.5, /num_generations must be an integer >= 2/],
    ['advantage_mode', 'x', /advantage_mode must be one of 'mean', 'raw', 'max', 'rloo'/],
    ['joint_mode', 'align', /joint_mode must be one of 'aligned', 'cross'.*'align'\/'crossed' are not accepted/],
    ['joint_mode', 'crossed', /joint_mode must be one of 'aligned', 'cross'/],
    ['temperature', 0, /temperature must be a finite number > 0/],
    ['top_p', 0, /top_p must be a finite number in \(0, 1\]/],
    ['top_p', 1.5, /top_p must be a finite number in \(0, 1\]/],
    ['top_k', -1, /top_k must be an integer >= 0/],
    ['discount', 1.5, /discount must be a finite number in \[0, 1\]/],
    ['early_termination_threshold', 'high', /early_termination_threshold must be a finite number/],
    ['agent_learning_rate', -1, /agent_learning_rate must be a finite number >= 0/],
    ['advantage_normalization', 'yes', /advantage_normalization must be true or false/],
    ['max_grad_norm', 0, /max_grad_norm must be a finite number > 0/],
    ['adam_betas', [0.9, 1], /adam_betas\[1\] must be a number in \[0, 1\) \(got 1\)/],
    ['seed', -1, /seed must be an integer >= 0/],
  ];
  test.each(bad)('%s = %j is rejected with a message naming the field', (field, value, message) => {
    expect(() => parseMAGRPOConfig({ [field]: value })).toThrow(message);
    if (!Array.isArray(value)) expect(() => parseMAGRPOConfig({ [field]: value })).toThrow(`(got ${JSON.stringify(value)})`);
  });

  test('boundary values are accepted; unknown and camelCase keys are not', () => {
    const c = parseMAGRPOConfig({ eval_interval: 0, eval_num_samples: 0, num_generations: 2, early_termination_threshold: null, top_k: null, joint_mode: 'cross' });
    expect(c.eval_interval).toBe(0);
    expect(c.joint_mode).toBe('cross');
    expect(() => parseMAGRPOConfig({ numGenerations: 4 } as Record<string, unknown>)).toThrow(/did you mean 'num_generations'/);
    // Several problems are reported together.
    expect(() => parseMAGRPOConfig({ num_turns: 0, rollout_buffer_size: 0 })).toThrow(/num_turns.*; rollout_buffer_size/);
  });
});

describe('tree pieces (hand-derived)', () => {
  test('joint actions: aligned pairs k with k; cross is the product, last agent fastest', () => {
    expect(jointActions(2, 3, 'aligned')).toEqual([
      [0, 0],
      [1, 1],
      [2, 2],
    ]);
    expect(jointActions(2, 2, 'cross')).toEqual([
      [0, 0],
      [0, 1],
      [1, 0],
      [1, 1],
    ]);
    expect(jointActions(3, 2, 'cross')).toHaveLength(8);
    expect(jointActions(3, 3, 'cross')[5]).toEqual([0, 1, 2]);
    expect(jointActions(1, 3, 'cross')).toEqual([[0], [1], [2]]);
  });

  test('returns: r + γ·mean(child returns), leaves keep their reward', () => {
    // γ = 0.9; child of joint 0 has returns [0.5, 1.5] (mean 1) → 1 + 0.9 = 1.9; joint 1 is a leaf → 0.
    const r = nodeReturns([1, 0], [[0.5, 1.5], null], 0.9);
    expect(r[0]).toBeCloseTo(1.9, 12);
    expect(r[1]).toBe(0);
    // Two levels, γ = 0.5: grandchild [4, 0] → child return 1 + 0.5·2 = 2; root 0 + 0.5·mean([2, 3]) = 1.25.
    const child = nodeReturns([1, 3], [[4, 0], null], 0.5);
    expect(child).toEqual([2, 3]);
    expect(nodeReturns([0], [child], 0.5)).toEqual([1.25]);
  });

  test('early termination is a strict > on the node mean; null never stops', () => {
    expect(terminatesEarly([0, 0], -0.2)).toBe(true); // CoMLRL's default stops non-negative tasks after turn 1
    expect(terminatesEarly([0.4, 0], 0.2)).toBe(false); // mean 0.2 is not > 0.2
    expect(terminatesEarly([0.5, 0], 0.2)).toBe(true);
    expect(terminatesEarly([100], null)).toBe(false);
  });

  test('cross mode: each completion gets the sum of the joint returns that used it', () => {
    const joints = jointActions(2, 2, 'cross'); // (0,0) (0,1) (1,0) (1,1)
    const R = [1, 2, 3, 4];
    expect(agentGroupReturns(R, joints, 0, 2, 'cross')).toEqual([1 + 2, 3 + 4]);
    expect(agentGroupReturns(R, joints, 1, 2, 'cross')).toEqual([1 + 3, 2 + 4]);
    expect(agentGroupReturns([1, 2], jointActions(2, 2, 'aligned'), 1, 2, 'aligned')).toEqual([1, 2]);
  });

  test('tree samples: one per agent per node, parents first, with per-agent returns', () => {
    const group = (p: number) => ({ promptIds: [p], ids: [[p, 1], [p, 2]], texts: ['a', 'b'], logProbSums: [0, 0], tokenLogProbs: [[], []], finished: [true, true] });
    const leaf: RolloutNode<null> = {
      turn: 1,
      state: null,
      observations: [],
      groups: [group(7), group(8)],
      joints: jointActions(2, 2, 'cross'),
      rewards: [1, 0, 0, 1],
      children: [null, null, null, null],
      returns: [1, 0, 0, 1],
      envStep: 8,
    };
    const root: RolloutNode<null> = {
      turn: 0,
      state: null,
      observations: [],
      groups: [group(3), group(4)],
      joints: jointActions(2, 2, 'cross'),
      rewards: [0, 0, 0, 1],
      children: [null, leaf, null, null],
      // γ = 1: joint 1 → 0 + mean([1,0,0,1]) = 0.5.
      returns: nodeReturns([0, 0, 0, 1], [null, leaf.returns, null, null], 1),
      envStep: 4,
    };
    expect(root.returns).toEqual([0, 0.5, 0, 1]);
    const samples = treeSamples(root, 2, 2, 'cross');
    expect(samples[0].map((s) => s.turn)).toEqual([0, 1]);
    expect(samples[0][0].promptIds).toEqual([3]);
    expect(samples[1][1].promptIds).toEqual([8]);
    // Agent 0, root: completion 0 in joints 0,1 → 0 + 0.5; completion 1 in joints 2,3 → 0 + 1.
    expect(samples[0][0].returns).toEqual([0.5, 1]);
    // Agent 1, root: completion 0 in joints 0,2 → 0; completion 1 in joints 1,3 → 1.5.
    expect(samples[1][0].returns).toEqual([0, 1.5]);
    expect(samples[0][0].nodeMeanReward).toBe(0.25);
    expect(samples[0][0].nodeMeanReturn).toBe(0.375);
    expect(treeNodes(root)).toEqual([root, leaf]);
  });
});

describe('with tiny checkpoints', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let agents: Agent[];

  const fresh = async (name: string): Promise<Agent[]> =>
    tinyAgents(dir, [
      { name: `${name}-a`, arch: 'qwen3', seed: 11, words: [...toyWords] },
      { name: `${name}-b`, arch: 'qwen3', seed: 12, words: [...toyWords] },
    ]);

  beforeAll(async () => {
    await initBackend('wasm');
    ({ dir, cleanup } = await tempDir('magrpo'));
    agents = await fresh('shared');
  });
  afterAll(async () => {
    disposeAgents(agents);
    await cleanup();
  });

  // Proposition 3.2 of the CoLLM paper: K·(K^H − 1)/(K − 1) completions per agent with H turns.
  test.each([
    [2, 3],
    [3, 2],
    [4, 1],
  ])('aligned tree with K=%i, H=%i: completions per agent and env steps = K(K^H−1)/(K−1)', async (k, h) => {
    const env = new CountingEnv(new ToyCoordEnv({ numTurns: h }));
    const trainer = new MAGRPOTrainer({
      agents,
      env,
      trainTasks: toyTrainTasks,
      config: { ...FAST, num_generations: k, num_turns: h, early_termination_threshold: null, discount: 0.5 },
    });
    const root = await trainer.rolloutTree(toyTrainTasks[0]);
    const expected = (k * (k ** h - 1)) / (k - 1);
    const nodes = treeNodes(root);
    expect(nodes).toHaveLength((k ** h - 1) / (k - 1));
    for (let a = 0; a < 2; a++) expect(nodes.reduce((s, n) => s + n.groups[a].ids.length, 0)).toBe(expected);
    expect(env.steps).toBe(expected);
    expect(trainer.envSteps).toBe(expected);
    // Leaves sit at the last turn; every inner node has K children; returns follow the recursion.
    for (const n of nodes) {
      expect(n.joints).toHaveLength(k);
      if (n.turn === h - 1) expect(n.children.every((c) => c === null)).toBe(true);
      else expect(n.children.every((c) => c !== null && c.turn === n.turn + 1)).toBe(true);
      n.returns.forEach((ret, j) => {
        const c = n.children[j];
        const want = c ? n.rewards[j] + 0.5 * (c.returns.reduce((x, y) => x + y, 0) / c.returns.length) : n.rewards[j];
        expect(ret).toBeCloseTo(want, 12);
      });
    }
    trainer.dispose();
  });

  test('cross mode evaluates K^n joint actions per node (n=2, K=2, H=2: 4 + 16 env steps)', async () => {
    const env = new CountingEnv(new ToyCoordEnv({ numTurns: 2 }));
    const trainer = new MAGRPOTrainer({
      agents,
      env,
      trainTasks: toyTrainTasks,
      config: { ...FAST, num_generations: 2, num_turns: 2, joint_mode: 'cross', early_termination_threshold: null },
    });
    const root = await trainer.rolloutTree(toyTrainTasks[1]);
    expect(root.joints).toEqual(jointActions(2, 2, 'cross'));
    expect(root.rewards).toHaveLength(4);
    expect(root.children.filter((c) => c !== null)).toHaveLength(4);
    for (const c of root.children) expect(c?.rewards).toHaveLength(4);
    expect(env.steps).toBe(20);
    expect(trainer.envSteps).toBe(20);
    // Each agent still samples K completions per node: 5 nodes × 2.
    expect(treeNodes(root).reduce((s, n) => s + n.groups[0].ids.length, 0)).toBe(10);
    // The joint texts are the cross product of the agents' completions.
    const texts = root.children.map((c) => (c ? (c.state as ToyState).words[0] : null));
    root.joints.forEach(([i, j], idx) => {
      const said = texts[idx] as readonly (string | null)[];
      expect(said[0]).toBe(root.groups[0].texts[i].split(/\s+/).find((w) => w !== '')?.toLowerCase() ?? null);
      expect(said[1]).toBe(root.groups[1].texts[j].split(/\s+/).find((w) => w !== '')?.toLowerCase() ?? null);
    });
    trainer.dispose();
  });

  test('early termination: the default threshold -0.2 cuts a zero-reward first turn; null expands', async () => {
    // The sparse two-turn toy pays 0 at turn 1: mean 0 > -0.2 → no children (CoMLRL quirk 4).
    const env = new CountingEnv(new ToyCoordEnv({ numTurns: 2 }));
    const cut = new MAGRPOTrainer({ agents, env, trainTasks: toyTrainTasks, config: { ...FAST, num_generations: 3, num_turns: 2 } });
    const root = await cut.rolloutTree(toyTrainTasks[0]);
    expect(root.children.every((c) => c === null)).toBe(true);
    expect(root.returns).toEqual(root.rewards);
    expect(env.steps).toBe(3);
    // Threshold 0: 0 > 0 is false, so the tree grows.
    const grow = new MAGRPOTrainer({ agents, env, trainTasks: toyTrainTasks, config: { ...FAST, num_generations: 3, num_turns: 2, early_termination_threshold: 0 } });
    expect(treeNodes(await grow.rolloutTree(toyTrainTasks[0]))).toHaveLength(4);
    cut.dispose();
    grow.dispose();
  });

  test('staged env (CoMLRL adapter): rewards for every joint action, transitions only where the tree grows; returns hand-derived', async () => {
    let rewardCalls = 0;
    let transitions = 0;
    const env = (firstTurnReward: number) =>
      fromCoMLRL<{ prompt: string }>({
        numAgents: 2,
        numTurns: 2,
        // Reward by turn only, so returns are known whatever the tiny models say.
        rewardFunc: (_c, ctx) => {
          rewardCalls++;
          return ctx.turn === 0 ? firstTurnReward : 2;
        },
        externalTransition: ({ agentCompletions }) => {
          transitions++;
          return agentCompletions.map(() => 'cue red partner none');
        },
      });
    const tasks = [{ prompt: 'cue red' }];
    const grow = new MAGRPOTrainer({ agents, env: env(1), trainTasks: tasks, config: { ...FAST, num_generations: 2, num_turns: 2, discount: 0.5, early_termination_threshold: null } });
    const root = await grow.rolloutTree(tasks[0]);
    // K = 2: the root's 2 rewards + 2 children × 2 rewards; transitions only out of the root.
    expect(rewardCalls).toBe(6);
    expect(transitions).toBe(2);
    expect(grow.envSteps).toBe(6);
    // Children: returns = rewards = [2, 2]. Root: 1 + 0.5 · mean([2, 2]) = 2.
    for (const c of root.children) expect(c?.returns).toEqual([2, 2]);
    expect(root.returns).toEqual([2, 2]);
    grow.dispose();

    rewardCalls = 0;
    transitions = 0;
    // Turn-1 mean reward 1 > threshold 0.5: the node stops, and no feedback is computed.
    const stop = new MAGRPOTrainer({ agents, env: env(1), trainTasks: tasks, config: { ...FAST, num_generations: 2, num_turns: 2, early_termination_threshold: 0.5 } });
    const leaf = await stop.rolloutTree(tasks[0]);
    expect(rewardCalls).toBe(2);
    expect(transitions).toBe(0);
    expect(leaf.returns).toEqual([1, 1]);
    stop.dispose();
  });

  test('buffers are consumed by turn group into minibatches: optimizer step count (hand-derived)', async () => {
    const own = await fresh('buffers');
    const logged: Record<string, number>[] = [];
    const trainer = new MAGRPOTrainer({
      agents: own,
      env: new ToyCoordEnv({ numTurns: 2 }),
      trainTasks: toyTrainTasks.slice(0, 2),
      config: {
        ...FAST,
        num_generations: 2,
        num_turns: 2,
        early_termination_threshold: null,
        rollout_buffer_size: 4,
        train_batch_size: 2,
        agent_learning_rate: 1e-3,
      },
      logger: { log: (_s, m) => void logged.push(m) },
    });
    // Per item and agent: 3 node samples (turn 1: root; turn 2: 2 children).
    // Item 1 → buffer 3. Item 2: its root makes 4 → flush: turn-1 group (2 roots) = 1 step, turn-2
    // group (2 children of item 1) = 1 step; item 2's 2 children wait → epoch end: 1 step.
    // 3 steps per agent, 2 agents.
    await trainer.train();
    expect(trainer.updateSteps).toBe(6);
    expect(trainer.optimizers.map((o) => o.stepCount)).toEqual([3, 3]);
    expect(trainer.envSteps).toBe(2 * (2 + 4));
    // Epoch-end metrics with CoMLRL's names.
    const epochEnd = logged.find((m) => 'turn_1/epoch_reward_mean' in m);
    expect(epochEnd).toBeDefined();
    expect(epochEnd).toHaveProperty('turn_2/epoch_avg_return');
    trainer.dispose();
    disposeAgents(own);
  });

  test('metrics carry CoMLRL names plus per-agent, timing, token and zero-spread values; eval callbacks log under eval/', async () => {
    const own = await fresh('metrics');
    const logged: { step: number; m: Record<string, number> }[] = [];
    let seen = 0;
    const trainer = new MAGRPOTrainer<ToyTask, ToyState>({
      agents: own,
      env: new ToyCoordEnv(),
      trainTasks: toyTrainTasks.slice(0, 3),
      evalTasks: toyTrainTasks.slice(0, 2),
      config: { ...FAST, num_turns: 1, num_generations: 3, rollout_buffer_size: 1, eval_interval: 2, eval_num_samples: 2, eval_batch_size: 2 },
      evalCallbacks: [
        (eps) => {
          seen += eps.length;
          return { said_anything: eps.filter((e) => e.completions[0].some((c) => c.trim() !== '')).length / eps.length };
        },
      ],
      logger: { log: (step, m) => void logged.push({ step, m }) },
    });
    await trainer.train();
    const train = logged.filter((l) => 'turn_1/reward_mean' in l.m);
    expect(train).toHaveLength(3);
    for (const key of [
      'turn_1/reward_mean',
      'turn_1/expected_return',
      'turn_1/zero_reward_spread_frac',
      'agent_0/loss',
      'agent_1/grad_norm',
      'agent_0/tokens_generated',
      'agent_1/completion_length_mean',
      'tokens_generated',
      'time/generation_s',
      'time/reward_s',
      'time/training_s',
    ]) {
      expect(train[0].m, key).toHaveProperty(key);
    }
    // One-token completions: 3 per agent per item.
    expect(train[0].m['agent_0/tokens_generated']).toBe(3);
    // The x-axis is env_step: 3 joint actions per item.
    expect(train.map((l) => l.step)).toEqual([3, 6, 9]);
    // Evals before items 0 and 2 (index % eval_interval == 0), each on 2 tasks.
    const evals = logged.filter((l) => 'eval/turn_1/mean_reward' in l.m);
    expect(evals.map((l) => l.step)).toEqual([0, 6]);
    expect(evals[0].m).toHaveProperty('eval/turn_1/mean_return');
    expect(evals[0].m).toHaveProperty('eval/said_anything');
    expect(seen).toBe(4);
    trainer.dispose();
    disposeAgents(own);
  });

  test('heterogeneous agents (qwen3 word vocab + llama BPE vocab) train together', async () => {
    const het = await tinyAgents(dir, [
      { name: 'het-qwen3', arch: 'qwen3', seed: 21, words: [...toyWords], hiddenSize: 32 },
      { name: 'het-llama', arch: 'llama', seed: 22, tokenizer: 'bpe', hiddenSize: 48, numLayers: 2 },
    ]);
    expect(het[0].model.vocabSize).not.toBe(het[1].model.vocabSize);
    expect(het[0].model.architecture).toBe('qwen3');
    expect(het[1].model.architecture).toBe('llama');
    const before = het.map((a) => a.model.trainableVariables().map((v) => Array.from(v.dataSync())));
    const trainer = new MAGRPOTrainer({
      agents: het,
      env: new ToyCoordEnv(),
      trainTasks: toyTrainTasks.slice(0, 2),
      config: { ...FAST, num_turns: 1, max_new_tokens: 3, num_generations: 3, rollout_buffer_size: 1, agent_learning_rate: 1e-3, advantage_normalization: false, advantage_mode: 'raw' },
    });
    const root = await trainer.rolloutTree(toyTrainTasks[0]);
    // Each agent's ids are in its own vocabulary.
    root.groups.forEach((g, a) => g.ids.flat().forEach((id) => expect(id).toBeLessThan(het[a].model.vocabSize)));
    await trainer.train();
    expect(trainer.optimizers.map((o) => o.stepCount)).toEqual([2, 2]);
    // Raw advantages of non-negative rewards: a nonzero reward anywhere moves the weights; with zero
    // rewards AdamW's weight decay still moves them. Either way both agents were updated.
    het.forEach((a, i) => {
      const changed = a.model.trainableVariables().some((v, j) => Array.from(v.dataSync()).some((x, e) => x !== before[i][j][e]));
      expect(changed).toBe(true);
    });
    trainer.dispose();
    disposeAgents(het);
  });

  test('resume: save + exportState mid-run, reload, importState → the same final weights as an uninterrupted run', async () => {
    const config: MAGRPOConfigInput = {
      ...FAST,
      num_turns: 1,
      num_generations: 3,
      num_train_epochs: 2,
      rollout_buffer_size: 3,
      train_batch_size: 2,
      agent_learning_rate: 1e-2,
      seed: 7,
      max_new_tokens: 2,
    };
    const tasks = toyTrainTasks.slice(0, 5);
    const weights = (as: readonly Agent[]) => as.map((a) => a.model.trainableVariables().map((v) => Array.from(v.dataSync())));

    const straightAgents = await fresh('straight');
    const straight = new MAGRPOTrainer({ agents: straightAgents, env: new ToyCoordEnv(), trainTasks: tasks, config });
    await straight.train();

    const firstAgents = await fresh('first');
    const first = new MAGRPOTrainer({ agents: firstAgents, env: new ToyCoordEnv(), trainTasks: tasks, config });
    await first.train({ maxItems: 4 }); // stops with 1 node sample per agent pending in the buffers
    const state = first.exportState();
    expect(state.cursor).toEqual({ epoch: 0, index: 4 });
    expect(state.extra.buffers.map((b) => b.length)).toEqual([1, 1]);
    const saved = `${dir}/resume-ckpt`;
    await first.save(saved);
    // The state must survive JSON-like cloning (the checkpoint layer serialises it).
    const restoredState = structuredClone(state);
    first.dispose();
    disposeAgents(firstAgents);

    const resumedAgents: Agent[] = [];
    for (let i = 0; i < 2; i++) {
      resumedAgents.push({ name: `r${i}`, model: await loadCausalLM(`${saved}/agent_${i}`), tokenizer: await loadTokenizer(`${saved}/agent_${i}`), chat: false });
    }
    const resumed = new MAGRPOTrainer({ agents: resumedAgents, env: new ToyCoordEnv(), trainTasks: tasks, config });
    resumed.importState(restoredState);
    await resumed.train();

    expect(resumed.envSteps).toBe(straight.envSteps);
    expect(resumed.updateSteps).toBe(straight.updateSteps);
    expect(weights(resumedAgents)).toEqual(weights(straightAgents));
    expect(() => resumed.importState({ ...restoredState, trainer: 'collm-cc' })).toThrow(/from trainer 'collm-cc'/);
    straight.dispose();
    resumed.dispose();
    disposeAgents(straightAgents);
    disposeAgents(resumedAgents);
  });

  test('repeated training items keep the tensor count flat', async () => {
    const own = await fresh('memory');
    const trainer = new MAGRPOTrainer({
      agents: own,
      env: new ToyCoordEnv({ numTurns: 2 }),
      trainTasks: toyTrainTasks,
      evalTasks: toyTrainTasks.slice(0, 2),
      config: { ...FAST, num_turns: 2, early_termination_threshold: null, num_generations: 2, rollout_buffer_size: 2, eval_interval: 2, max_new_tokens: 2, max_grad_norm: 1 },
    });
    await trainer.train({ maxItems: 2 }); // the Adam moments exist after the first update
    const n0 = tf.memory().numTensors;
    await trainer.train({ maxItems: 4 });
    expect(trainer.updateSteps).toBeGreaterThan(4);
    expect(tf.memory().numTensors).toBe(n0);
    trainer.dispose();
    disposeAgents(own);
  });

  test('constructor checks: agent count, horizon, shared model objects; non-finite rewards raise', async () => {
    const env = new ToyCoordEnv();
    expect(() => new MAGRPOTrainer({ agents, env, trainTasks: toyTrainTasks, config: { num_agents: 3 } })).toThrow(/num_agents is 3 but 2 agents/);
    expect(() => new MAGRPOTrainer({ agents: agents.slice(0, 1), env, trainTasks: toyTrainTasks })).toThrow(/env 'toy-coord' has 2 agents but 1/);
    expect(() => new MAGRPOTrainer({ agents, env, trainTasks: toyTrainTasks, config: { num_turns: 2 } })).toThrow(/num_turns 2 exceeds env 'toy-coord' horizon 1/);
    expect(() => new MAGRPOTrainer({ agents: [agents[0], { ...agents[1], model: agents[0].model }], env, trainTasks: toyTrainTasks, config: { num_turns: 1 } })).toThrow(
      /share one model object/,
    );
    expect(() => new MAGRPOTrainer({ agents, env, trainTasks: [], config: { num_turns: 1 } })).toThrow(/trainTasks is empty/);
    const nan = new MAGRPOTrainer({ agents, env: new ToyCoordEnv({ rewardProcessor: () => Number.NaN }), trainTasks: toyTrainTasks, config: { ...FAST, num_turns: 1 } });
    await expect(nan.train({ maxItems: 1 })).rejects.toThrow(/non-finite reward \(NaN\) at turn 1/);
    nan.dispose();
  });
});
