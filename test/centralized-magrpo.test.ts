/**
 * CentralizedMAGRPO: its config (CoMLRL 1.4's names), the centralized adapters (the general tagged
 * one, the toy task's, the contract checks), its loss on a hand-computed case, the joint rollout
 * on real tiny checkpoints (one policy, roles split for the reward and the eval metrics), exact
 * resume and a flat tensor count.
 */
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import '../envs/tasks.js';
import { initBackend } from '../src/backend/init.js';
import { parseRunConfig } from '../src/config/schema.js';
import { CentralizedEnv, CENTRALIZED_ROLES_KEY, roleEpisode, taggedRolesAdapter, type CentralizedAdapter } from '../src/decpomdp/centralized.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { loadCausalLM } from '../src/model/load.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { hiddenCueCentralizedAdapter } from '../envs/hidden-cue/centralized.js';
import { HiddenCueEnv, hiddenCueScore } from '../envs/hidden-cue/index.js';
import { toyCentralizedAdapter, ToyCoordEnv, toyScore, toyTrainTasks, toyWords, type ToyState, type ToyTask } from '../envs/toy/index.js';
import {
  CentralizedMAGRPOTrainer,
  getTrainer,
  linearPolicyLoss,
  minibatchRows,
  parseCentralizedMAGRPOConfig,
  parseMAGRPOConfig,
  treeNodes,
  type CentralizedMAGRPOConfigInput,
  type NodeSample,
} from '../trainers/index.js';
import { disposeAgents, tempDir, tinyAgents } from './magrpo-helpers.js';

describe('config', () => {
  test("MAGRPO's fields and defaults, one turn, collaboration_mode 'centralized'", () => {
    expect(parseCentralizedMAGRPOConfig()).toEqual({ ...parseMAGRPOConfig(), num_turns: 1, collaboration_mode: 'centralized' });
    expect(() => parseCentralizedMAGRPOConfig({ num_turns: 2 })).toThrow(/num_turns must be 1: CentralizedMAGRPO is single-turn/);
    expect(() => parseCentralizedMAGRPOConfig({ collaboration_mode: 'decentralized' })).toThrow(/collaboration_mode must be one of 'centralized'/);
    // num_agents counts the roles, as in CoMLRL.
    expect(parseCentralizedMAGRPOConfig({ num_agents: 2 }).num_agents).toBe(2);
  });

  test('a run config selects it by `centralized_magrpo:`; the CLI loads one agent model for the roles', () => {
    const config = parseRunConfig({ model: { agent_model: '/m' }, dataset: { task: 'toy-coord' }, centralized_magrpo: { num_agents: 2, max_new_tokens: 2 } });
    expect(config.trainer).toBe('centralized-magrpo');
    const t = getTrainer('centralized-magrpo');
    expect(t.section).toBe('centralized_magrpo');
    expect(t.agentCount(config.trainerConfig, 2)).toBe(1);
    // The other trainers load one agent per role.
    expect(getTrainer('magrpo').agentCount(parseRunConfig({ model: { agent_model: '/m' }, dataset: { task: 'toy-coord' }, magrpo: {} }).trainerConfig, 2)).toBe(2);
  });
});

describe('adapters', () => {
  test('the tagged adapter: prompt lists each role under its name; the completion is cut at the tags', () => {
    const a = taggedRolesAdapter<null>({ roleNames: ['Summary', 'Elaboration'] });
    const prompt = a.buildPrompt(null, ['Summarize P briefly.', 'Elaborate on P.']);
    expect(prompt).toBe(
      'You write the responses of 2 collaborators. Answer each one\'s task after its tag, in order: [Summary], [Elaboration].\n\n### Summary\nSummarize P briefly.\n\n### Elaboration\nElaborate on P.',
    );
    expect(a.parseCompletion('[Summary] short one [Elaboration]  a longer one\n', null, 2)).toEqual(['short one', 'a longer one']);
    expect(a.parseCompletion('preamble [Summary]x[Elaboration]', null, 2)).toEqual(['x', '']);
    // A missing tag or tags out of order: no parse.
    expect(a.parseCompletion('[Summary] only', null, 2)).toBeNull();
    expect(a.parseCompletion('[Elaboration] b [Summary] a', null, 2)).toBeNull();
  });

  test("the toy adapter: the cue as the prompt; the completion's first two words are the roles' answers", () => {
    const env = new ToyCoordEnv();
    const s = env.initialState({ id: 't', cue: 'red' });
    expect(toyCentralizedAdapter.buildPrompt(s, [env.observe(s, 0), env.observe(s, 1)])).toBe('cue red');
    expect(toyCentralizedAdapter.parseCompletion(' rose  apple sky', s, 2)).toEqual(['rose', 'apple']);
    expect(toyCentralizedAdapter.parseCompletion('rose', s, 2)).toEqual(['rose', '']);
  });

  test('the hidden-cue adapter: both private cues in role order; the first two words answer them', async () => {
    const env = new CentralizedEnv(new HiddenCueEnv(), hiddenCueCentralizedAdapter);
    const s = env.initialState({ id: 'h', cues: ['red', 'blue'] });
    expect(env.observe(s, 0)).toBe('cue red cue blue');
    const r = await env.step(s, ['rose sea']);
    expect(r.info[CENTRALIZED_ROLES_KEY]).toEqual(['rose', 'sea']);
    expect(r.reward).toBe(hiddenCueScore(['red', 'blue'], ['rose', 'sea']));
    expect(r.reward).toBe(1);
  });

  test('the centralized env: one agent, the roles split for the reward, parse failures give every role an empty response, contract errors name the task', async () => {
    const toy = new ToyCoordEnv();
    const env = new CentralizedEnv(toy, toyCentralizedAdapter);
    expect([env.numAgents, env.numRoles, env.horizon, env.name]).toEqual([1, 2, 1, 'toy-coord']);
    const s = env.initialState({ id: 't', cue: 'blue' });
    expect(env.observe(s, 0)).toBe('cue blue');
    expect(() => env.observe(s, 1)).toThrow(/has one agent, got agent 1/);
    const r = await env.step(s, ['sea sea']);
    expect(r.reward).toBe(1);
    expect(r.info[CENTRALIZED_ROLES_KEY]).toEqual(['sea', 'sea']);
    expect((await env.step(s, ['sea sky'])).reward).toBe(toyScore('blue', 'sea', 'sky'));

    const never: CentralizedAdapter<ToyState> = { buildPrompt: () => 'cue blue', parseCompletion: () => null };
    const failed = await new CentralizedEnv(toy, never).step(s, ['sea sea']);
    expect(failed.info[CENTRALIZED_ROLES_KEY]).toEqual(['', '']);
    expect(failed.reward).toBe(0);
    const wrong: CentralizedAdapter<ToyState> = { buildPrompt: () => ' ', parseCompletion: () => ['sea'] };
    await expect(new CentralizedEnv(toy, wrong).step(s, ['sea'])).rejects.toThrow(/centralized adapter of 'toy-coord': parseCompletion must return 2 strings/);
    expect(() => new CentralizedEnv(toy, wrong).observe(s, 0)).toThrow(/buildPrompt must return a non-empty prompt/);

    const ep = { completions: [['sea sky']], infos: [r.info], rewards: [1] };
    expect(roleEpisode(ep)).toEqual({ completions: [['sea', 'sea']], infos: [r.info], rewards: [1] });
    expect(() => roleEpisode({ completions: [['x']], infos: [{}] })).toThrow(/not a centralized episode/);
  });
});

describe('loss (hand-computed)', () => {
  // One task, K = 3 joint completions with joint rewards R = (1, 0, 0.5) and joint sequence
  // log-probs ℓ = (−2, −3, −1) (every token of both roles' text). With the defaults (mean
  // baseline, z-score with the population std): mean 0.5, std = √((0.25 + 0.25 + 0)/3) = √(1/6), so
  // A = (0.5, −0.5, 0)/√(1/6) = (√1.5, −√1.5, 0) and
  //   loss = (1/3) Σ −A_k ℓ_k = −(√1.5·(−2) + (−√1.5)·(−3) + 0)/3 = −√1.5/3 ≈ −0.408248.
  // Without the z-score: A = (0.5, −0.5, 0), loss = −(−1 + 1.5)/3 = −1/6.
  const sample: NodeSample = { agent: 0, turn: 0, envStep: 3, promptIds: [1], completionIds: [[2, 3], [4, 5], [6, 7]], returns: [1, 0, 0.5], nodeMeanReward: 0.5, nodeMeanReturn: 0.5 };
  const lossOf = (input: CentralizedMAGRPOConfigInput) => {
    const c = parseCentralizedMAGRPOConfig(input);
    return tf.tidy(() => linearPolicyLoss(tf.tensor1d([-2, -3, -1]), minibatchRows([sample], c.advantage_mode, c.advantage_normalization)).dataSync()[0]);
  };
  test('defaults (mean baseline, z-scored)', () => expect(lossOf({})).toBeCloseTo(-Math.sqrt(1.5) / 3, 6));
  test('advantage_normalization off', () => expect(lossOf({ advantage_normalization: false })).toBeCloseTo(-1 / 6, 6));
});

describe('with tiny checkpoints', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  const FAST: CentralizedMAGRPOConfigInput = { max_new_tokens: 2, temperature: 1, top_p: 1, top_k: 0, eval_interval: 0, logging_steps: 1, num_train_epochs: 1 };
  const policy = async (name: string): Promise<Agent[]> => tinyAgents(dir, [{ name, arch: 'qwen3', seed: 21, words: [...toyWords] }]);

  beforeAll(async () => {
    await initBackend('wasm');
    ({ dir, cleanup } = await tempDir('centralized'));
  });
  afterAll(async () => cleanup());

  test("one policy's K joint completions per task, each scored on the roles' split words; eval callbacks see the roles", async () => {
    const own = await policy('rollout');
    const seen: string[][][] = [];
    const trainer = new CentralizedMAGRPOTrainer<ToyTask, ToyState>({
      agents: own,
      env: new ToyCoordEnv(),
      trainTasks: toyTrainTasks.slice(0, 2),
      evalTasks: toyTrainTasks.slice(0, 2),
      centralizedAdapter: toyCentralizedAdapter,
      config: { ...FAST, num_generations: 4, eval_num_samples: 2, eval_batch_size: 2 },
      evalCallbacks: [
        (eps) => {
          for (const e of eps) seen.push(e.completions);
          return { episodes: eps.length };
        },
      ],
    });
    expect(trainer.numRoles).toBe(2);
    const root = await trainer.rolloutTree(toyTrainTasks[0]);
    expect(treeNodes(root)).toHaveLength(1);
    expect(root.observations).toEqual(['cue red']);
    expect(root.groups).toHaveLength(1);
    expect(root.groups[0].texts).toHaveLength(4);
    root.groups[0].texts.forEach((text, k) => {
      const [w0, w1] = toyCentralizedAdapter.parseCompletion(text, root.state, 2) ?? ['', ''];
      expect(root.rewards[k]).toBe(toyScore('red', w0 === '' ? null : w0, w1 === '' ? null : w1));
    });
    const { metrics, episodes } = await trainer.evaluate();
    expect(metrics['eval/episodes']).toBe(2);
    // The trainer's episodes keep the joint completion; the callbacks got the roles' responses.
    expect(episodes[0].completions[0]).toHaveLength(1);
    expect(seen).toHaveLength(2);
    expect(seen[0][0]).toEqual(episodes[0].infos[0][CENTRALIZED_ROLES_KEY]);
    expect(seen[0][0]).toHaveLength(2);
    trainer.dispose();
    disposeAgents(own);
  });

  test('constructor checks: exactly one policy, num_agents = the roles, a complete adapter', async () => {
    const two = await tinyAgents(dir, [
      { name: 'c0', arch: 'qwen3', seed: 1, words: [...toyWords] },
      { name: 'c1', arch: 'qwen3', seed: 2, words: [...toyWords] },
    ]);
    const base = { env: new ToyCoordEnv(), trainTasks: toyTrainTasks, centralizedAdapter: toyCentralizedAdapter };
    expect(() => new CentralizedMAGRPOTrainer({ ...base, agents: two })).toThrow(/trains one joint policy: agents must hold exactly 1 agent, got 2/);
    expect(() => new CentralizedMAGRPOTrainer({ ...base, agents: two.slice(0, 1), config: { num_agents: 3 } })).toThrow(/num_agents \(the roles\) is 3 but env 'toy-coord' has 2 agents/);
    expect(() => new CentralizedMAGRPOTrainer({ ...base, agents: two.slice(0, 1), centralizedAdapter: { buildPrompt: () => 'x' } as unknown as CentralizedAdapter<ToyState> })).toThrow(
      /centralizedAdapter.parseCompletion must be a function/,
    );
    disposeAgents(two);
  });

  test("a flat tensor count, MAGRPO's metrics, exact resume, its own state tag", async () => {
    const config: CentralizedMAGRPOConfigInput = { ...FAST, num_generations: 3, num_train_epochs: 2, rollout_buffer_size: 3, train_batch_size: 2, agent_learning_rate: 1e-2, seed: 7 };
    const tasks = toyTrainTasks.slice(0, 5);
    const weights = (as: readonly Agent[]) => as.map((a) => a.model.trainableVariables().map((v) => Array.from(v.dataSync())));
    const make = (agents: Agent[], logger?: (m: Record<string, number>) => void) =>
      new CentralizedMAGRPOTrainer<ToyTask, ToyState>({ agents, env: new ToyCoordEnv(), trainTasks: tasks, config, centralizedAdapter: toyCentralizedAdapter, ...(logger ? { logger: { log: (_s, m) => void logger(m) } } : {}) });

    const straightAgents = await policy('straight');
    const logged: Record<string, number>[] = [];
    const straight = make(straightAgents, (m) => logged.push(m));
    await straight.train({ maxItems: 3 }); // the first update (a full buffer of 3) made the Adam moments
    const n0 = tf.memory().numTensors;
    await straight.train();
    expect(tf.memory().numTensors).toBe(n0);
    for (const key of ['turn_1/reward_mean', 'turn_1/zero_reward_spread_frac', 'agent_0/loss', 'agent_0/grad_norm', 'tokens_generated']) expect(logged.some((m) => key in m), key).toBe(true);

    const firstAgents = await policy('first');
    const first = make(firstAgents);
    await first.train({ maxItems: 4 });
    const state = structuredClone(first.exportState());
    expect(state.trainer).toBe('centralized-magrpo');
    expect(state.numAgents).toBe(1);
    const saved = `${dir}/centralized-ckpt`;
    await first.save(saved);
    first.dispose();
    disposeAgents(firstAgents);

    const resumedAgents: Agent[] = [{ name: 'r', model: await loadCausalLM(`${saved}/agent_0`), tokenizer: await loadTokenizer(`${saved}/agent_0`), chat: false }];
    const resumed = make(resumedAgents);
    resumed.importState(state);
    await resumed.train();
    expect(resumed.envSteps).toBe(straight.envSteps);
    expect(weights(resumedAgents)).toEqual(weights(straightAgents));
    expect(() => resumed.importState({ ...state, trainer: 'magrpo' })).toThrow(/from trainer 'magrpo', this is 'centralized-magrpo'/);
    straight.dispose();
    resumed.dispose();
    disposeAgents(straightAgents);
    disposeAgents(resumedAgents);
  });
});
