/**
 * MARLHF: its config under CoMLRL 1.4's names, the Bradley–Terry loss on a hand-computed case, the
 * joint reward model saved and loaded (the same scores), the phase-2 reward (the model's score of
 * the joint text), and on tiny checkpoints: the phases, MAGRPO's metrics, a flat tensor count and
 * an exact resume from a checkpoint (agents, reward model and phase).
 */
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { initBackend } from '../src/backend/init.js';
import { parseRunConfig } from '../src/config/schema.js';
import { loadCriticHead } from '../src/critic/heads.js';
import { centralizedCriticText } from '../src/critic/inputs.js';
import type { CriticLM } from '../src/critic/value-model.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { loadCausalLM } from '../src/model/load.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { createRng } from '../src/util/rng.js';
import { ToyCoordEnv, toyTrainTasks, toyWords, type ToyState, type ToyTask } from '../envs/toy/index.js';
import '../envs/tasks.js';
import {
  bradleyTerryLoss,
  getTrainer,
  JointRewardEnv,
  JointRewardModel,
  MARLHFTrainer,
  parseMARLHFConfig,
  resumeTrainer,
  writeCheckpoint,
  type MARLHFConfigInput,
} from '../trainers/index.js';
import { disposeCritics, tinyCritic } from './collm-helpers.js';
import { disposeAgents, tempDir, tinyAgents } from './magrpo-helpers.js';

describe('config', () => {
  test("CoMLRL 1.4's MARLHFConfig fields and defaults (MADPO's preference fields, the reward_* fields)", () => {
    const c = parseMARLHFConfig();
    expect(c).toMatchObject({
      num_turns: 1,
      joint_mode: 'aligned',
      preference_num_candidates: 80,
      preference_pairs_per_sample: 16,
      pair_selection: 'reward_gap',
      dpo_beta: 0.1,
      use_environment_step: true,
      environment_steps_per_pair: 2,
      rl_algorithm: 'magrpo',
      reward_model_name: null,
      reward_learning_rate: 1e-5,
      reward_num_train_epochs: 1,
      reward_train_batch_size: 2,
      reward_max_length: null,
      reward_truncation: 'prompts',
      reward_freeze_backbone: false,
      // CoMLRL's newest actor-critic phase-2 fields, under its names and defaults.
      critic_model_name: null,
      critic_learning_rate: null,
      use_separate_critic: true,
      critic_type: 'v',
      value_loss_coef: 0.6,
      value_clip_range: 0.2,
      critic_value_head_hidden_dim: null,
      value_head_hidden_dim: null,
      // MAGRPO's own fields keep MAGRPO's defaults.
      num_generations: 4,
      agent_learning_rate: 5e-6,
    });
    expect(() => parseMARLHFConfig({ num_turns: 2 })).toThrow(/num_turns must be 1: MARLHF is single-turn/);
    expect(() => parseMARLHFConfig({ joint_mode: 'cross' })).toThrow(/joint_mode must be one of 'aligned'/);
    expect(() => parseMARLHFConfig({ rl_algorithm: 'ppo' })).toThrow(/rl_algorithm must be one of 'magrpo', 'mareinforce', 'maremax', 'marloo', 'maac', 'iac'/);
    for (const ac of ['maac', 'iac']) expect(parseMARLHFConfig({ rl_algorithm: ` ${ac.toUpperCase()}` }).rl_algorithm).toBe(ac);
    // CoMLRL reads the name trimmed and lower-cased, and takes `mareforce` for mareinforce.
    expect(parseMARLHFConfig({ rl_algorithm: ' MAReforce ' }).rl_algorithm).toBe('mareinforce');
    expect(() => parseMARLHFConfig({ rl_algorithm: 'marloo', advantage_mode: 'max' })).toThrow(/advantage_mode 'max' contradicts rl_algorithm 'marloo', which trains phase 2 with advantage_mode 'rloo'/);
    expect(() => parseMARLHFConfig({ reward_truncation: 'left' })).toThrow(/reward_truncation must be one of 'prompts', 'right'/);
    expect(() => parseMARLHFConfig({ pair_selection: 'best' })).toThrow(/pair_selection must be one of 'reward_gap', 'all', 'random'/);
    expect(() => parseMARLHFConfig({ reward_learning_rate: 0 })).toThrow(/reward_learning_rate must be a finite number > 0/);
    expect(() => parseMARLHFConfig({ reward_max_length: 0 })).toThrow(/reward_max_length must be an integer >= 1/);
  });

  test('a run config selects it by `marlhf:`; one critic LM (the reward model), saved as reward_model/', () => {
    const config = parseRunConfig({ model: { agent_model: '/m', critic_model: '/rm' }, dataset: { task: 'toy-coord' }, marlhf: { preference_num_candidates: 8 } });
    expect(config.trainer).toBe('marlhf');
    const t = getTrainer('marlhf');
    expect(t.section).toBe('marlhf');
    expect(t.criticCount(config.trainerConfig, 2)).toBe(1);
    const models = { agents: ['/m', '/m'], criticModel: '/rm' };
    expect(t.criticModels(config.trainerConfig, models)).toBeNull();
    const named = parseRunConfig({ model: { agent_model: '/m' }, dataset: { task: 'toy-coord' }, marlhf: { reward_model_name: '/rm-base' } });
    expect(t.criticModels(named.trainerConfig, { agents: ['/m', '/m'] })).toEqual(['/rm-base']);
    expect(t.layout(config.trainerConfig, '/out', 2)).toEqual({ agents: ['/out/agent_0', '/out/agent_1'], critics: ['/out/reward_model'], heads: ['/out/reward_model'] });
  });
});

describe('Bradley–Terry loss (hand-computed)', () => {
  // Two pairs with scores r_w = (2, 0), r_l = (1, 1): gaps x = r_w − r_l = (1, −1).
  //   −log σ(1)  = log(1 + e^−1)                 = 0.3132617
  //   −log σ(−1) = log(1 + e)   = 1 + log(1 + e^−1) = 1.3132617
  //   L = mean = 0.5 + log(1 + e^−1)             = 0.8132617
  // ∂L/∂r_w,i = −σ(−x_i)/2: σ(−1)/2 = 0.1344707, σ(1)/2 = 0.3655293, so ∂L/∂r_w = (−0.1344707, −0.3655293)
  // and ∂L/∂r_l = −∂L/∂r_w.
  test('value and gradients', () => {
    const w = tf.tensor1d([2, 0]);
    const l = tf.tensor1d([1, 1]);
    const loss = bradleyTerryLoss(w, l);
    expect(loss.dataSync()[0]).toBeCloseTo(0.5 + Math.log(1 + Math.exp(-1)), 6);
    expect(loss.dataSync()[0]).toBeCloseTo(0.8132617, 6);
    const [gw, gl] = tf.grads((a: tf.Tensor, b: tf.Tensor) => bradleyTerryLoss(a as tf.Tensor1D, b as tf.Tensor1D))([w, l]);
    const gwv = Array.from(gw.dataSync());
    const glv = Array.from(gl.dataSync());
    expect(gwv[0]).toBeCloseTo(-0.1344707, 6);
    expect(gwv[1]).toBeCloseTo(-0.3655293, 6);
    expect(glv[0]).toBeCloseTo(0.1344707, 6);
    expect(glv[1]).toBeCloseTo(0.3655293, 6);
    // A huge gap stays finite (softplus form).
    expect(bradleyTerryLoss(tf.tensor1d([-1000]), tf.tensor1d([1000])).dataSync()[0]).toBeCloseTo(2000, 3);
    tf.dispose([w, l, loss, gw, gl]);
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
  preference_num_candidates: 6,
  preference_pairs_per_sample: 4,
  reward_learning_rate: 1e-2,
  reward_num_train_epochs: 2,
  reward_train_batch_size: 3,
  seed: 3,
};

describe('with tiny checkpoints', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  const critics: CriticLM[] = [];
  const agentSets: Agent[][] = [];

  const fresh = async (name: string): Promise<{ agents: Agent[]; rm: CriticLM }> => {
    const agents = await tinyAgents(dir, [
      { name: `${name}-a`, arch: 'qwen3', seed: 11, words: [...toyWords] },
      { name: `${name}-b`, arch: 'qwen3', seed: 12, words: [...toyWords] },
    ]);
    const rm = await tinyCritic(dir, `${name}-rm`, 13, toyWords);
    agentSets.push(agents);
    critics.push(rm);
    return { agents, rm };
  };

  beforeAll(async () => {
    await initBackend('wasm');
    ({ dir, cleanup } = await tempDir('marlhf'));
  });
  afterAll(async () => {
    for (const a of agentSets) disposeAgents(a);
    disposeCritics(critics);
    await cleanup();
  });

  test('the reward model saved and loaded scores every joint response the same; phase 2 rewards are its scores of the joint text', async () => {
    const { rm } = await fresh('io');
    const model = JointRewardModel.create(rm, createRng('head'));
    const joints = [
      { prompts: ['cue red', 'cue red'], completions: ['apple', 'rose'] },
      { prompts: ['cue blue', 'cue blue'], completions: ['sky', 'sky'] },
      { prompts: ['cue gold', 'cue gold'], completions: ['', 'coin'] },
    ];
    // The joint text is the centralized critic's Q layout.
    expect(model.ids(joints[0])).toEqual(rm.tokenizer.encode(centralizedCriticText({ observations: joints[0].prompts, actions: joints[0].completions })));
    const before = await model.scores(joints);
    await model.save(join(dir, 'io-saved'));
    const loaded = await JointRewardModel.load(join(dir, 'io-saved'), { rng: createRng('other') });
    expect(await loaded.scores(joints)).toEqual(before);
    // One at a time or together: the same scores (up to float32 rounding of the batched pass).
    const alone = [...(await model.scores([joints[2]])), ...(await model.scores([joints[0]]))];
    alone.forEach((x, i) => expect(x).toBeCloseTo([before[2], before[0]][i], 5));
    loaded.dispose();

    const env = new JointRewardEnv<ToyTask, ToyState>(new ToyCoordEnv());
    const state = env.initialState({ id: 't', cue: 'red' });
    expect((await env.step(state, ['apple', 'apple'])).reward).toBe(1); // the task's reward while no scorer is set
    env.scorer = model;
    const steps = await Promise.all([env.step(state, ['apple', 'rose']), env.step(state, ['sky', 'sky'])]);
    expect(steps.map((s) => s.reward)).toEqual(await model.scores([joints[0], { prompts: ['cue red', 'cue red'], completions: ['sky', 'sky'] }]));
    expect(steps.every((s) => s.done)).toBe(true);
    model.dispose();
  });

  test("phases, MAGRPO's metrics, a flat tensor count, exact resume from a checkpoint (agents, reward model, phase)", async () => {
    const tasks = toyTrainTasks.slice(0, 4);
    const weights = (as: readonly Agent[]) => as.map((a) => a.model.trainableVariables().map((v) => Array.from(v.dataSync())));

    // Straight run.
    const s = await fresh('straight');
    const logged: Record<string, number>[] = [];
    const straight = new MARLHFTrainer({ agents: s.agents, rewardModel: s.rm, env: new ToyCoordEnv(), trainTasks: tasks, config: FAST, logger: { log: (_st, m) => void logged.push(m) } });
    expect(straight.phase).toBe('reward_model');
    await straight.train({ maxItems: 2 });
    expect(straight.phase).toBe('policy');
    const n0 = tf.memory().numTensors;
    await straight.train();
    expect(tf.memory().numTensors).toBe(n0);
    // Phase 1: 4 tasks × 6 candidates scored by the task; the fit's steps; then MAGRPO's metrics.
    const pairs = logged.find((m) => 'reward_model/num_pairs' in m);
    expect(pairs?.['reward_model/num_pairs']).toBeGreaterThan(0);
    const fits = logged.filter((m) => 'reward_model/loss' in m);
    expect(fits).toHaveLength(2 * Math.ceil((pairs?.['reward_model/num_pairs'] ?? 0) / 3));
    expect(fits.every((m) => m['reward_model/accuracy'] >= 0 && m['reward_model/accuracy'] <= 1)).toBe(true);
    for (const key of ['turn_1/reward_mean', 'turn_1/expected_return', 'agent_0/loss', 'agent_1/grad_norm', 'tokens_generated']) {
      expect(logged.some((m) => key in m), key).toBe(true);
    }
    expect(straight.envSteps).toBe(4 * 6 + 2 * 4 * 3);

    // The same run cut after item 2 into a checkpoint, resumed on its weights.
    const f = await fresh('first');
    const first = new MARLHFTrainer({ agents: f.agents, rewardModel: f.rm, env: new ToyCoordEnv(), trainTasks: tasks, config: FAST });
    await first.train({ maxItems: 2 });
    const ckpt = join(dir, 'marlhf-ckpt');
    await writeCheckpoint(first, ckpt);
    const state = first.exportState();
    expect(state.trainer).toBe('marlhf');
    expect(state.extra.marlhf.phase).toBe('policy');
    const layout = getTrainer('marlhf').layout(parseMARLHFConfig(FAST), ckpt, 2);
    const agents: Agent[] = [];
    for (const [i, d] of layout.agents.entries()) agents.push({ name: `r${i}`, model: await loadCausalLM(d), tokenizer: await loadTokenizer(d), chat: false });
    agentSets.push(agents);
    const rmLM: CriticLM = { model: await loadCausalLM(layout.critics[0]), tokenizer: await loadTokenizer(layout.critics[0]) };
    critics.push(rmLM);
    // Without the saved head the state is refused: its reward model would be a fresh one.
    const headless = new MARLHFTrainer({ agents, rewardModel: rmLM, env: new ToyCoordEnv(), trainTasks: tasks, config: FAST });
    expect(() => headless.importState(state)).toThrow(/past phase 1, but this trainer's reward model has a fresh head/);
    headless.dispose();
    const resumed = new MARLHFTrainer({ agents, rewardModel: rmLM, rewardHead: await loadCriticHead(layout.heads[0], createRng('x')), env: new ToyCoordEnv(), trainTasks: tasks, config: FAST });
    expect(await resumeTrainer(resumed, ckpt)).toBe(2);
    expect(resumed.phase).toBe('policy');
    await resumed.train(); // no phase 1 again: straight to item 3
    expect(resumed.envSteps).toBe(straight.envSteps);
    expect(weights(resumed.agents)).toEqual(weights(straight.agents));
    const probe = [{ prompts: ['cue red', 'cue red'], completions: ['apple', 'sea'] }];
    expect(await resumed.rewardModel.scores(probe)).toEqual(await straight.rewardModel.scores(probe));
    expect(() => resumed.importState({ ...state, trainer: 'magrpo' })).toThrow(/from trainer 'magrpo', this is 'marlhf'/);
    for (const t of [straight, first, resumed]) t.dispose();
  });

  test('a state written before phase 1 resumes into phase 1, and the run continues as one never stopped', async () => {
    const tasks = toyTrainTasks.slice(0, 2);
    const config = { ...FAST, num_train_epochs: 1 };
    const a = await fresh('pre-a');
    const b = await fresh('pre-b');
    const straight = new MARLHFTrainer({ agents: a.agents, rewardModel: a.rm, env: new ToyCoordEnv(), trainTasks: tasks, config });
    const state = straight.exportState();
    expect(state.extra.marlhf.phase).toBe('reward_model');
    const resumed = new MARLHFTrainer({ agents: b.agents, rewardModel: b.rm, env: new ToyCoordEnv(), trainTasks: tasks, config });
    resumed.importState(structuredClone(state));
    expect(resumed.phase).toBe('reward_model');
    await straight.train();
    await resumed.train();
    const weights = (as: readonly Agent[]) => as.map((x) => x.model.trainableVariables().map((v) => Array.from(v.dataSync())));
    expect(weights(resumed.agents)).toEqual(weights(straight.agents));
    expect(resumed.envSteps).toBe(straight.envSteps);
    straight.dispose();
    resumed.dispose();
  });

  test("rl_algorithm picks phase 2's advantage mode, as CoMLRL's newest dispatch: MAGRPO's update with mean, raw, max or rloo", async () => {
    const { agents, rm } = await fresh('dispatch');
    const modes: Record<string, string> = { magrpo: 'mean', mareinforce: 'raw', maremax: 'max', marloo: 'rloo' };
    for (const [rl_algorithm, mode] of Object.entries(modes)) {
      const t = new MARLHFTrainer({ agents, rewardModel: rm, env: new ToyCoordEnv(), trainTasks: toyTrainTasks.slice(0, 1), config: { ...FAST, rl_algorithm: rl_algorithm as MARLHFConfigInput['rl_algorithm'] } });
      // The config MAGRPO's update reads.
      expect(t.config.advantage_mode, rl_algorithm).toBe(mode);
      t.dispose();
    }
  });

  test('reward_max_length: the prompts are cut and the completions kept; a cut leaving winner and loser the same tokens is refused by name', async () => {
    const { agents, rm } = await fresh('cut');
    const prompts = ['cue red red red red red red', 'cue red red red red red red'];
    const winner = ['apple', 'rose'];
    const loser = ['apple', 'sky'];
    const uncut = (completions: string[]) => rm.tokenizer.encode(centralizedCriticText({ observations: prompts, actions: completions }));
    // Six tokens fewer than the joint text: the right cut loses the completions' end, where they differ.
    const max = uncut(winner).length - 6;
    expect(uncut(loser).length).toBe(uncut(winner).length);
    const right = JointRewardModel.create(rm, createRng('h'), { maxLength: max, truncation: 'right' });
    expect(right.ids({ prompts, completions: winner })).toEqual(uncut(winner).slice(0, max));
    expect(right.ids({ prompts, completions: winner })).toEqual(right.ids({ prompts, completions: loser }));
    right.dispose();
    const kept = JointRewardModel.create(rm, createRng('h'), { maxLength: max });
    const w = kept.ids({ prompts, completions: winner });
    expect(w).toHaveLength(max);
    expect(w).not.toEqual(kept.ids({ prompts, completions: loser }));
    // The joint action survives whole: its text ends the cut input.
    const text = rm.tokenizer.decode(w);
    expect(text).toMatch(/Joint Action[\s\S]*apple[\s\S]*rose\s*$/);
    kept.dispose();

    const pairs = [{ prompts, winner, loser }];
    const trainer = (truncation: 'prompts' | 'right', logged: Record<string, number>[] = []) =>
      new MARLHFTrainer({ agents, rewardModel: rm, env: new ToyCoordEnv(), trainTasks: toyTrainTasks.slice(0, 1), config: { ...FAST, reward_max_length: max, reward_truncation: truncation }, preferencePairs: pairs, logger: { log: (_s, m) => void logged.push(m) } });
    const refused = trainer('right');
    await expect(refused.fitRewardModel()).rejects.toThrow(
      new RegExp(`reward_max_length ${max} cuts the joint text of preference pair 1 of 1 so that its winner and loser read the same tokens .*raise reward_max_length to at least ${uncut(winner).length}, or set reward_truncation: prompts`),
    );
    refused.dispose();
    const logged: Record<string, number>[] = [];
    const fits = trainer('prompts', logged);
    await fits.fitRewardModel();
    const rows = logged.filter((m) => 'reward_model/loss' in m);
    expect(rows.length).toBeGreaterThan(0);
    // Winner and loser read different tokens: the fit has a gradient (a cut that merged them has none).
    expect(rows.every((m) => m['reward_model/grad_norm'] > 0)).toBe(true);
    fits.dispose();
  });

  test('no lr metric for the reward model: its optimizer is outside the schedule and gone after the fit', async () => {
    const { agents, rm } = await fresh('lr');
    const logged: Record<string, number>[] = [];
    const t = new MARLHFTrainer({ agents, rewardModel: rm, env: new ToyCoordEnv(), trainTasks: toyTrainTasks.slice(0, 2), config: { ...FAST, num_train_epochs: 1, lr_scheduler_type: 'linear' }, logger: { log: (_s, m) => void logged.push(m) } });
    await t.train();
    const lrKeys = new Set(logged.flatMap((m) => Object.keys(m).filter((k) => k.startsWith('lr/'))));
    expect([...lrKeys].sort()).toEqual(['lr/agent_0', 'lr/agent_1']);
    expect(Object.keys(t.learningRates).sort()).toEqual(['lr/agent_0', 'lr/agent_1']);
    t.dispose();
  });

  test('given preference pairs replace the rollout; a rollout without any non-tied pair is an error', async () => {
    const { agents, rm } = await fresh('given');
    const logged: Record<string, number>[] = [];
    const pairs = [{ prompts: ['cue red', 'cue red'], winner: ['apple', 'apple'], loser: ['sky', 'sea'] }];
    const t = new MARLHFTrainer({ agents, rewardModel: rm, env: new ToyCoordEnv(), trainTasks: toyTrainTasks.slice(0, 1), config: { ...FAST, num_train_epochs: 1 }, preferencePairs: pairs, logger: { log: (_s, m) => void logged.push(m) } });
    await t.fitRewardModel();
    expect(t.envSteps).toBe(0); // no candidates were scored
    expect(logged.filter((m) => 'reward_model/loss' in m)).toHaveLength(2);
    t.dispose();
    const none = new MARLHFTrainer({ agents, rewardModel: rm, env: new ToyCoordEnv(), trainTasks: toyTrainTasks.slice(0, 1), config: FAST, preferencePairs: [] });
    await expect(none.train()).rejects.toThrow(/MARLHF: no preference pairs/);
    none.dispose();
  });
});
