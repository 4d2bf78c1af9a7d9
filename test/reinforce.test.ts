/**
 * The REINFORCE family (MAREINFORCE, MAReMax, MARLOO): configs under CoMLRL 1.4's names (MAGRPO's
 * fields, another `advantage_mode` default), registration with their own sections, each trainer's
 * loss on a hand-computed case, metrics, exact resume and a flat tensor count on tiny checkpoints.
 */
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { initBackend } from '../src/backend/init.js';
import { parseRunConfig } from '../src/config/schema.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { loadCausalLM } from '../src/model/load.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { ToyCoordEnv, toyTrainTasks, toyWords } from '../envs/toy/index.js';
import '../envs/tasks.js';
import {
  getTrainer,
  linearPolicyLoss,
  MAREINFORCETrainer,
  MAReMaxTrainer,
  MARLOOTrainer,
  minibatchRows,
  parseMAGRPOConfig,
  parseMAREINFORCEConfig,
  parseMAReMaxConfig,
  parseMARLOOConfig,
  type MAGRPOConfigInput,
  type MAGRPOTrainerOptions,
  type NodeSample,
} from '../trainers/index.js';
import type { MAGRPOTrainer } from '../trainers/magrpo/trainer.js';
import { disposeAgents, tempDir, tinyAgents } from './magrpo-helpers.js';

type Ctor = new (options: Omit<MAGRPOTrainerOptions<unknown, unknown>, 'config'> & { config?: MAGRPOConfigInput }) => MAGRPOTrainer<unknown, unknown>;

/** Each trainer with its name, class, config parser and the advantage mode it defaults to. */
const FAMILY: readonly { name: string; section: string; Trainer: Ctor; parse: (input?: Record<string, unknown>) => { advantage_mode: string }; mode: string }[] = [
  { name: 'mareinforce', section: 'mareinforce', Trainer: MAREINFORCETrainer, parse: parseMAREINFORCEConfig, mode: 'raw' },
  { name: 'maremax', section: 'maremax', Trainer: MAReMaxTrainer, parse: parseMAReMaxConfig, mode: 'max' },
  { name: 'marloo', section: 'marloo', Trainer: MARLOOTrainer, parse: parseMARLOOConfig, mode: 'rloo' },
];

describe('configs', () => {
  test.each(FAMILY)("$name: MAGRPO's fields and defaults, advantage_mode '$mode'", ({ parse, mode }) => {
    const config = parse();
    expect(config).toEqual({ ...parseMAGRPOConfig(), advantage_mode: mode });
    // CoMLRL's dataclass field stays settable (a CoMLRL YAML section maps over 1:1).
    expect(parse({ advantage_mode: 'mean' }).advantage_mode).toBe('mean');
    expect(() => parse({ advantage_mode: 'gae' })).toThrow(/advantage_mode must be one of 'mean', 'raw', 'max', 'rloo'/);
    expect(() => parse({ learningRate: 1 })).toThrow(/unknown field 'learningRate'/);
  });

  test.each(FAMILY)('$name: a run config selects it by its section `$section:`', ({ name, section, mode }) => {
    const config = parseRunConfig({ model: { agent_model: '/m' }, dataset: { task: 'toy-coord' }, [section]: { num_turns: 1, advantage_normalization: false } });
    expect(config.trainer).toBe(name);
    expect(config.trainerConfig).toMatchObject({ num_turns: 1, advantage_normalization: false, advantage_mode: mode });
    expect(getTrainer(name).section).toBe(section);
  });
});

describe('loss (hand-computed)', () => {
  // One node sample, K = 3 completions with returns R = (1, 0, 0.5) and sequence log-probs
  // ℓ = (−2, −3, −1); advantage_normalization off, one sample per minibatch:
  //   loss = (1/K) Σ_k −A_k · ℓ_k
  // MAREINFORCE: A = R                         = (1, 0, 0.5)      → −(−2 + 0 − 0.5)/3   =  2.5/3
  // MAReMax:     A = R − max R                 = (0, −1, −0.5)    → −(0 + 3 + 0.5)/3    = −3.5/3
  // MARLOO:      A = (K·R − ΣR)/(K − 1)        = (0.75, −0.75, 0) → −(−1.5 + 2.25 + 0)/3 = −0.75/3
  const sample: NodeSample = {
    agent: 0,
    turn: 0,
    envStep: 3,
    promptIds: [1, 2],
    completionIds: [[3], [4], [5]],
    returns: [1, 0, 0.5],
    nodeMeanReward: 0.5,
    nodeMeanReturn: 0.5,
  };
  const expected: Record<string, number> = { mareinforce: 2.5 / 3, maremax: -3.5 / 3, marloo: -0.75 / 3 };

  test.each(FAMILY)("$name's loss from its own config", ({ name, parse }) => {
    const config = { ...parse({ advantage_normalization: false }), advantage_normalization: false };
    const rows = minibatchRows([sample], config.advantage_mode as 'raw' | 'max' | 'rloo', config.advantage_normalization);
    const loss = tf.tidy(() => linearPolicyLoss(tf.tensor1d([-2, -3, -1]), rows).dataSync()[0]);
    expect(loss).toBeCloseTo(expected[name], 6);
  });
});

/** Small, fast settings: one-token completions, no eval, every item logged, no z-score. */
const FAST: MAGRPOConfigInput = {
  max_new_tokens: 1,
  temperature: 1,
  top_p: 1,
  top_k: 0,
  eval_interval: 0,
  logging_steps: 1,
  num_train_epochs: 1,
  advantage_normalization: false,
};

describe('with tiny checkpoints', () => {
  let dir: string;
  let cleanup: () => Promise<void>;

  const fresh = async (name: string): Promise<Agent[]> =>
    tinyAgents(dir, [
      { name: `${name}-a`, arch: 'qwen3', seed: 11, words: [...toyWords] },
      { name: `${name}-b`, arch: 'qwen3', seed: 12, words: [...toyWords] },
    ]);

  beforeAll(async () => {
    await initBackend('wasm');
    ({ dir, cleanup } = await tempDir('reinforce'));
  });
  afterAll(async () => cleanup());

  test.each(FAMILY)("$name: a flat tensor count, MAGRPO's metrics, exact resume, its own state tag", async ({ name, Trainer }) => {
    const config: MAGRPOConfigInput = { ...FAST, num_turns: 1, num_generations: 3, num_train_epochs: 2, rollout_buffer_size: 3, train_batch_size: 2, agent_learning_rate: 1e-2, seed: 7, max_new_tokens: 2 };
    const tasks = toyTrainTasks.slice(0, 5);
    const weights = (as: readonly Agent[]) => as.map((a) => a.model.trainableVariables().map((v) => Array.from(v.dataSync())));

    const straightAgents = await fresh(`${name}-straight`);
    const logged: Record<string, number>[] = [];
    const straight = new Trainer({ agents: straightAgents, env: new ToyCoordEnv(), trainTasks: tasks, config, logger: { log: (_s, m) => void logged.push(m) } });
    await straight.train({ maxItems: 3 }); // the first update (a full buffer of 3) made the Adam moments
    const n0 = tf.memory().numTensors;
    await straight.train();
    // The rest of the run leaves no tensor behind.
    expect(tf.memory().numTensors).toBe(n0);
    const train = logged.filter((m) => 'turn_1/reward_mean' in m);
    expect(train).toHaveLength(10);
    for (const key of ['turn_1/expected_return', 'turn_1/zero_reward_spread_frac', 'agent_0/loss', 'agent_1/grad_norm', 'tokens_generated', 'time/training_s']) {
      expect(train.some((m) => key in m), key).toBe(true);
    }

    const firstAgents = await fresh(`${name}-first`);
    const first = new Trainer({ agents: firstAgents, env: new ToyCoordEnv(), trainTasks: tasks, config });
    await first.train({ maxItems: 4 });
    const state = structuredClone(first.exportState());
    expect(state.trainer).toBe(name);
    const saved = `${dir}/${name}-ckpt`;
    await first.save(saved);
    first.dispose();
    disposeAgents(firstAgents);

    const resumedAgents: Agent[] = [];
    for (let i = 0; i < 2; i++) resumedAgents.push({ name: `r${i}`, model: await loadCausalLM(`${saved}/agent_${i}`), tokenizer: await loadTokenizer(`${saved}/agent_${i}`), chat: false });
    const resumed = new Trainer({ agents: resumedAgents, env: new ToyCoordEnv(), trainTasks: tasks, config });
    resumed.importState(state);
    await resumed.train();
    expect(resumed.envSteps).toBe(straight.envSteps);
    expect(weights(resumedAgents)).toEqual(weights(straightAgents));
    // A checkpoint of another trainer (here MAGRPO's) is refused.
    expect(() => resumed.importState({ ...state, trainer: 'magrpo' })).toThrow(/from trainer 'magrpo', this is '/);

    straight.dispose();
    resumed.dispose();
    disposeAgents(straightAgents);
    disposeAgents(resumedAgents);
  });

  test('the trainer names itself in its errors', async () => {
    const own = await fresh('names');
    expect(() => new MARLOOTrainer({ agents: own.slice(0, 1), env: new ToyCoordEnv(), trainTasks: toyTrainTasks, config: FAST })).toThrow(/^MARLOOTrainer: env 'toy-coord' has 2 agents but 1 agents were given/);
    disposeAgents(own);
  });
});
