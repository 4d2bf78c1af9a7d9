/**
 * MARLHF with CoMLRL's actor-critic phase 2 (`rl_algorithm: maac | iac`): the CoLLM config it
 * trains with (the MARLHF config's fields under CoLLM's names), the CLI's critic models and saved
 * layout, and on tiny checkpoints for maac, iac with separate critics and iac with value heads on
 * the actors: phase 2 steps the actors and critics (the reward model frozen), the reward of every
 * buffered transition is the fitted reward model's score of its joint text, a flat tensor count
 * over repeated items, and an exact resume mid phase 2 through the registry's layout and build.
 */
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { initBackend } from '../src/backend/init.js';
import type { JointTransition } from '../src/buffer/replay.js';
import { parseRunConfig } from '../src/config/schema.js';
import { loadCriticHead } from '../src/critic/heads.js';
import type { CriticLM } from '../src/critic/value-model.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { loadCausalLM } from '../src/model/load.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { createRng } from '../src/util/rng.js';
import { ToyCoordEnv, toyTrainTasks, toyWords } from '../envs/toy/index.js';
import '../envs/tasks.js';
import {
  comlrlCompatible,
  createMARLHFTrainer,
  getTrainer,
  MARLHFActorCriticTrainer,
  marlhfActorCriticConfig,
  MARLHFTrainer,
  parseMARLHFConfig,
  resumeTrainer,
  writeCheckpoint,
  type MARLHFConfigInput,
} from '../trainers/index.js';
import { disposeCritics, tinyCritic } from './collm-helpers.js';
import { disposeAgents, tempDir, tinyAgents } from './magrpo-helpers.js';

describe('config and CLI wiring', () => {
  test("maac and iac train phase 2 with CoLLM-CC's and CoLLM-DC's config: the MARLHF fields under CoLLM's names, its critic fields included", () => {
    const maac = marlhfActorCriticConfig(parseMARLHFConfig({ rl_algorithm: 'maac', value_loss_coef: 0.3, critic_learning_rate: 1e-3, critic_type: 'q', value_clip_range: null, num_generations: 3, agent_learning_rate: 2e-4, critic_value_head_hidden_dim: 8 }));
    expect(maac).toMatchObject({ value_loss_coef: 0.3, critic_learning_rate: 1e-3, critic_type: 'q', value_clip_range: null, num_generations: 3, agent_learning_rate: 2e-4, critic_value_head_hidden_dim: 8, num_turns: 1 });
    // MAGRPO's defaults the MARLHF config carries (its num_generations 4, discount 1, top_k 50), not CoLLM's.
    expect(marlhfActorCriticConfig(parseMARLHFConfig({ rl_algorithm: 'maac' }))).toMatchObject({ num_generations: 4, discount: 1, top_k: 50, critic_learning_rate: null, value_loss_coef: 0.6, value_clip_range: 0.2 });
    expect('use_separate_critic' in maac).toBe(false);
    const iac = marlhfActorCriticConfig(parseMARLHFConfig({ rl_algorithm: 'iac', use_separate_critic: false, value_head_hidden_dim: 16 }), comlrlCompatible());
    expect(iac).toMatchObject({ use_separate_critic: false, value_head_hidden_dim: 16, update_order: 'agent', use_importance_ratio: false, recompute_targets: false });
    expect(() => marlhfActorCriticConfig(parseMARLHFConfig({ rl_algorithm: 'iac', critic_value_head_hidden_dim: 8, use_separate_critic: false }))).toThrow(/critic_value_head_hidden_dim would be ignored/);
    expect(() => marlhfActorCriticConfig(parseMARLHFConfig({ rl_algorithm: 'marloo' }))).toThrow(/rl_algorithm 'marloo' trains phase 2 with MAGRPO's update/);
    // `actor_critic`: CoLLM's options CoMLRL's MARLHFConfig has no field for (here CoMLRL's update), checked when the config is parsed.
    expect(marlhfActorCriticConfig(parseMARLHFConfig({ rl_algorithm: 'maac', actor_critic: { ...comlrlCompatible() } }))).toMatchObject(comlrlCompatible());
    expect(() => parseMARLHFConfig({ rl_algorithm: 'maac', actor_critic: { update_ordr: 'agent' } })).toThrow(expect.objectContaining({ issues: [{ field: 'actor_critic.update_ordr', message: 'unknown field \'update_ordr\' (got {"update_ordr":"agent"})' }] }));
    expect(() => parseMARLHFConfig({ rl_algorithm: 'iac', actor_critic: { critic_history: 'all' } })).toThrow(/critic_history must be one of 'full', 'current'/);
    expect(() => parseMARLHFConfig({ rl_algorithm: 'maac', actor_critic: { discount: 0.5 } })).toThrow(/discount is a MARLHF key: set it in the marlhf section itself/);
    expect(() => parseMARLHFConfig({ actor_critic: { update_order: 'agent' } })).toThrow(/actor_critic would be ignored: rl_algorithm 'magrpo' trains phase 2 with MAGRPO's update/);
    // A critic LM no phase 2 would load is refused by name.
    expect(() => parseMARLHFConfig({ critic_model_name: '/c' })).toThrow(/critic_model_name would be ignored: rl_algorithm 'magrpo' trains phase 2 with MAGRPO's update, which has no critic/);
    expect(() => parseMARLHFConfig({ rl_algorithm: 'iac', use_separate_critic: false, critic_model_name: '/c' })).toThrow(/critic_model_name would be ignored: iac with use_separate_critic false puts a value head on each actor/);
    expect(parseMARLHFConfig({ rl_algorithm: 'iac', critic_model_name: '/c' }).critic_model_name).toBe('/c');
  });

  test('the CLI: the reward model then the critics as critic LMs (section names, then model.critic_model, then the agents), saved beside reward_model/', () => {
    const t = getTrainer('marlhf');
    const run = (marlhf: Record<string, unknown>, model: Record<string, unknown> = { agent_model: '/m' }) => parseRunConfig({ model, dataset: { task: 'toy-coord' }, marlhf }).trainerConfig;
    const agents = { agents: ['/a0', '/a1'] };
    const maac = run({ rl_algorithm: 'maac' });
    expect(t.criticCount(maac, 2)).toBe(2);
    expect(t.criticModels(maac, agents)).toEqual(['/a0', '/a0']);
    expect(t.criticModels(maac, { ...agents, criticModel: '/c' })).toEqual(['/c', '/c']);
    expect(t.criticModels(run({ rl_algorithm: 'maac', reward_model_name: '/rm', critic_model_name: '/cc' }), agents)).toEqual(['/rm', '/cc']);
    expect(t.criticModels(maac, { ...agents, critics: ['/rm', '/cc'] })).toEqual(['/rm', '/cc']);
    expect(() => t.criticModels(maac, { ...agents, critics: ['/rm'] })).toThrow(/model.critics has 1 entries; marlhf with rl_algorithm maac needs 2: the reward model, then the centralized critic/);
    expect(t.layout(maac, '/out', 2)).toEqual({ agents: ['/out/agent_0', '/out/agent_1'], critics: ['/out/reward_model', '/out/critic'], heads: ['/out/reward_model', '/out/critic'] });
    const iac = run({ rl_algorithm: 'iac' });
    expect(t.criticCount(iac, 2)).toBe(3);
    expect(t.criticModels(iac, agents)).toEqual(['/a0', '/a0', '/a1']);
    expect(t.layout(iac, '/out', 2)).toEqual({
      agents: ['/out/agent_0', '/out/agent_1'],
      critics: ['/out/reward_model', '/out/agent_0/critic', '/out/agent_1/critic'],
      heads: ['/out/reward_model', '/out/agent_0/critic', '/out/agent_1/critic'],
    });
    const shared = run({ rl_algorithm: 'iac', use_separate_critic: false });
    expect(t.criticCount(shared, 2)).toBe(1);
    expect(t.layout(shared, '/out', 2)).toEqual({ agents: ['/out/agent_0', '/out/agent_1'], critics: ['/out/reward_model'], heads: ['/out/reward_model', '/out/agent_0', '/out/agent_1'] });
    // The MAGRPO family: the reward model only, as before.
    expect(t.criticCount(run({}), 2)).toBe(1);
  });
});

/** Small, fast settings: one-token completions, no eval, every item logged, few candidates. */
const FAST: MARLHFConfigInput = {
  max_new_tokens: 1,
  temperature: 1,
  top_p: 1,
  top_k: 0,
  eval_interval: 0,
  logging_steps: 1,
  num_train_epochs: 2,
  num_generations: 3,
  rollout_buffer_size: 2,
  agent_learning_rate: 1e-2,
  critic_learning_rate: 1e-2,
  preference_num_candidates: 6,
  preference_pairs_per_sample: 4,
  reward_learning_rate: 1e-2,
  reward_num_train_epochs: 2,
  reward_train_batch_size: 3,
  seed: 3,
};

const CASES = [
  { name: 'maac', config: { ...FAST, rl_algorithm: 'maac' }, critics: 1 },
  { name: 'iac (separate critics)', config: { ...FAST, rl_algorithm: 'iac' }, critics: 2 },
  { name: 'iac (value heads on the actors)', config: { ...FAST, rl_algorithm: 'iac', use_separate_critic: false }, critics: 0 },
] as const satisfies readonly { name: string; config: MARLHFConfigInput; critics: number }[];

describe('with tiny checkpoints', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  const lms: CriticLM[] = [];
  const agentSets: Agent[][] = [];
  const tasks = toyTrainTasks.slice(0, 4);
  const values = (vs: readonly tf.Variable[]) => vs.map((v) => Array.from(v.dataSync()));

  /** Fresh agents, reward model and `n` critic LMs (each its own checkpoint, the same seeds every call). */
  const fresh = async (name: string, n: number): Promise<{ agents: Agent[]; rm: CriticLM; critics: CriticLM[] }> => {
    const agents = await tinyAgents(dir, [
      { name: `${name}-a`, arch: 'qwen3', seed: 11, words: [...toyWords] },
      { name: `${name}-b`, arch: 'qwen3', seed: 12, words: [...toyWords] },
    ]);
    const rm = await tinyCritic(dir, `${name}-rm`, 13, toyWords);
    const critics: CriticLM[] = [];
    for (let i = 0; i < n; i++) critics.push(await tinyCritic(dir, `${name}-c${i}`, 20 + i, toyWords));
    agentSets.push(agents);
    lms.push(rm, ...critics);
    return { agents, rm, critics };
  };
  const criticOptions = (critics: readonly CriticLM[], rl: string) => (rl === 'maac' ? { critic: critics[0] } : critics.length > 0 ? { critics } : {});

  beforeAll(async () => {
    await initBackend('wasm');
    ({ dir, cleanup } = await tempDir('marlhf-ac'));
  });
  afterAll(async () => {
    for (const a of agentSets) disposeAgents(a);
    disposeCritics(lms);
    await cleanup();
  });

  test.each(CASES)('$name: phase 2 steps the actors and critics on the reward model\'s score, the reward model frozen; a flat tensor count', async ({ name, config, critics: nc }) => {
    const { agents, rm, critics } = await fresh(`steps-${name.replace(/\W+/g, '-')}`, nc);
    const seen: JointTransition[] = [];
    const logged: Record<string, number>[] = [];
    const trainer = createMARLHFTrainer({
      agents,
      rewardModel: rm,
      ...criticOptions(critics, config.rl_algorithm),
      env: new ToyCoordEnv(),
      trainTasks: tasks,
      config,
      rolloutMetrics: (ts) => {
        seen.push(...ts);
        return {};
      },
      logger: { log: (_s, m) => void logged.push(m) },
    });
    expect(trainer).toBeInstanceOf(MARLHFActorCriticTrainer);
    const ac = trainer as MARLHFActorCriticTrainer<unknown, unknown>;
    await ac.fitRewardModel();
    expect(ac.phase).toBe('policy');
    const slots = ac.criticSet.slots;
    expect(slots).toHaveLength(config.rl_algorithm === 'maac' ? 1 : 2);
    const rmBefore = values(ac.rewardModel.trainableVariables(false));
    const actorsBefore = agents.map((a) => values(a.model.trainableVariables()));
    const criticsBefore = slots.map((s) => values(s.model.ownVariables()));
    await ac.train({ maxItems: 2 });
    const n0 = tf.memory().numTensors;
    await ac.train();
    expect(tf.memory().numTensors).toBe(n0);
    // Every actor and every critic moved; the reward model did not (frozen after phase 1).
    agents.forEach((a, i) => expect(values(a.model.trainableVariables()), `agent ${i}`).not.toEqual(actorsBefore[i]));
    slots.forEach((s, c) => expect(values(s.model.ownVariables()), `critic ${c}`).not.toEqual(criticsBefore[c]));
    expect(values(ac.rewardModel.trainableVariables(false))).toEqual(rmBefore);
    for (const key of ['agent_0/policy_loss', 'agent_1/grad_norm', config.rl_algorithm === 'maac' ? 'critic/grad_norm' : 'agent_0/value_loss']) expect(logged.some((m) => key in m), key).toBe(true);
    // The reward of every transition is the reward model's score of its joint text (prompts: the observations).
    expect(seen).toHaveLength(2 * tasks.length * 3);
    const scores = await ac.rewardModel.scores(seen.map((t) => ({ prompts: t.agents.map((a) => a.observation), completions: t.agents.map((a) => a.action) })));
    seen.forEach((t, j) => expect(t.reward).toBeCloseTo(scores[j], 5));
    // Not the task's reward, which is 0 or 1.
    expect(seen.some((t) => t.reward !== 0 && t.reward !== 1)).toBe(true);
    ac.dispose();
  });

  test.each(CASES)('$name: a checkpoint mid phase 2 (agents, reward model, critics, phase) resumes through the registry to the weights of the uninterrupted run', async ({ name, config, critics: nc }) => {
    const tag = name.replace(/\W+/g, '-');
    const weights = <T, S>(t: MARLHFActorCriticTrainer<T, S>) => [...t.agents.map((a) => values(a.model.trainableVariables())), ...t.criticSet.slots.map((s) => values(s.model.ownVariables()))];
    const s = await fresh(`straight-${tag}`, nc);
    const straight = new MARLHFActorCriticTrainer({ agents: s.agents, rewardModel: s.rm, ...criticOptions(s.critics, config.rl_algorithm), env: new ToyCoordEnv(), trainTasks: tasks, config });
    await straight.train();

    const f = await fresh(`first-${tag}`, nc);
    const first = new MARLHFActorCriticTrainer({ agents: f.agents, rewardModel: f.rm, ...criticOptions(f.critics, config.rl_algorithm), env: new ToyCoordEnv(), trainTasks: tasks, config });
    await first.train({ maxItems: 3 }); // mid epoch 1, with transitions left in the replay buffer
    expect(first.bufferedTransitions).toBeGreaterThan(0);
    const ckpt = join(dir, `ckpt-${tag}`);
    await writeCheckpoint(first, ckpt);
    const state = first.exportState();
    expect(state.trainer).toBe('marlhf');
    expect(state.extra.marlhf).toEqual({ phase: 'policy', rl_algorithm: config.rl_algorithm });

    const spec = getTrainer('marlhf');
    const parsed = parseMARLHFConfig(config);
    const layout = spec.layout(parsed, ckpt, 2);
    const agents: Agent[] = [];
    for (const [i, d] of layout.agents.entries()) agents.push({ name: `r${i}`, model: await loadCausalLM(d), tokenizer: await loadTokenizer(d), chat: false });
    agentSets.push(agents);
    const critics: CriticLM[] = [];
    for (const d of layout.critics) critics.push({ model: await loadCausalLM(d), tokenizer: await loadTokenizer(d) });
    lms.push(...critics);
    const heads = [];
    for (const d of layout.heads) heads.push(await loadCriticHead(d, createRng('x')));
    const resumed = spec.build({ config: parsed, agents, critics, heads, env: new ToyCoordEnv(), trainTasks: tasks, evalTasks: [], evalCallbacks: [] });
    expect(resumed).toBeInstanceOf(MARLHFActorCriticTrainer);
    expect(await resumeTrainer(resumed, ckpt)).toBe(3);
    await resumed.train(); // no phase 1 again: straight to item 4
    const r = resumed as MARLHFActorCriticTrainer<unknown, unknown>;
    expect(r.phase).toBe('policy');
    expect(r.envSteps).toBe(straight.envSteps);
    expect(weights(r)).toEqual(weights(straight));
    const probe = [{ prompts: ['cue red', 'cue red'], completions: ['apple', 'sea'] }];
    expect(await r.rewardModel.scores(probe)).toEqual(await straight.rewardModel.scores(probe));
    for (const t of [straight, first, r]) t.dispose();
  });

  test('one entry picks the class; each class refuses the other family; critics are checked by name', async () => {
    const { agents, rm, critics } = await fresh('entry', 1);
    const base = { agents, rewardModel: rm, env: new ToyCoordEnv(), trainTasks: tasks };
    const magrpo = createMARLHFTrainer({ ...base, config: FAST });
    expect(magrpo).toBeInstanceOf(MARLHFTrainer);
    magrpo.dispose();
    expect(() => createMARLHFTrainer({ ...base, critic: critics[0], config: FAST })).toThrow(/critic given, but rl_algorithm 'magrpo' trains phase 2 with MAGRPO's update, which has no critics/);
    expect(() => new MARLHFTrainer({ ...base, config: { ...FAST, rl_algorithm: 'maac' } })).toThrow(/rl_algorithm 'maac' trains phase 2 with an actor-critic update: build it with createMARLHFTrainer or MARLHFActorCriticTrainer/);
    expect(() => new MARLHFActorCriticTrainer({ ...base, config: FAST })).toThrow(/rl_algorithm 'magrpo' trains phase 2 with MAGRPO's update/);
    expect(() => new MARLHFActorCriticTrainer({ ...base, config: { ...FAST, rl_algorithm: 'maac' } })).toThrow(/rl_algorithm maac needs critic \(the centralized critic LM/);
    expect(() => new MARLHFActorCriticTrainer({ ...base, config: { ...FAST, rl_algorithm: 'iac' } })).toThrow(/rl_algorithm iac with use_separate_critic true needs critics \(one critic LM per agent\)/);
    expect(() => new MARLHFActorCriticTrainer({ ...base, critic: rm, config: { ...FAST, rl_algorithm: 'maac' } })).toThrow(/a critic is the reward model's LM/);
  });
});
