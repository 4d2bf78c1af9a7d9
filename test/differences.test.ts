/**
 * The switches of docs/differences.md that test/collm.test.ts does not already check:
 * δ normalisation (`advantage_normalization`: z-scored per turn group, or the paper's raw δ), the
 * importance ratio moving within one update epoch, the Q baseline's group mean, and early
 * termination at evaluation in MAGRPO as in the actor-critic trainers (and `comlrl eval`, through
 * the trainer registry). Real tiny checkpoints; rewards from a script, critics a constant head.
 */
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import type { JointTransition } from '../src/buffer/replay.js';
import { createCriticHead, type CriticHead } from '../src/critic/heads.js';
import type { CriticLM } from '../src/critic/value-model.js';
import type { Agent } from '../src/decpomdp/agent.js';
import type { GlobalInfo, LLMDecPOMDP, StepResult } from '../src/decpomdp/types.js';
import { loadCausalLM } from '../src/model/load.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { rngFor } from '../src/util/rng.js';
import { toyTasks, toyWords, type ToyTask } from '../envs/toy/index.js';
import '../trainers/builtin.js';
import { CoLLMCCTrainer } from '../trainers/collm/centralized.js';
import { parseCoLLMCCConfig } from '../trainers/collm/config.js';
import { estimates } from '../trainers/collm/run.js';
import { magrpoEvalEarlyTermination, parseMAGRPOConfig } from '../trainers/magrpo/config.js';
import { MAGRPOTrainer } from '../trainers/magrpo/trainer.js';
import { getTrainer } from '../trainers/registry.js';
import { disposeCritics, tinyCritic } from './collm-helpers.js';
import { disposeAgents, tempDir, tinyAgents } from './magrpo-helpers.js';

interface ScriptState {
  readonly turn: number;
  readonly last: number | null;
}

/** Rewards come from a script, whatever the agents say. */
class ScriptedEnv implements LLMDecPOMDP<ToyTask, ScriptState> {
  readonly name = 'scripted';
  readonly numAgents = 2;
  readonly horizon: number;
  constructor(private readonly rewards: readonly number[]) {
    this.horizon = rewards.length;
  }
  initialState(): ScriptState {
    return { turn: 0, last: null };
  }
  observe(s: ScriptState): string {
    return s.turn === 0 ? 'cue red' : 'cue red partner none';
  }
  async step(s: ScriptState): Promise<StepResult<ScriptState>> {
    const reward = this.rewards[s.turn];
    const turn = s.turn + 1;
    return { reward, next: { turn, last: reward }, done: turn >= this.horizon, info: {} };
  }
  globalInfo(s: ScriptState): GlobalInfo {
    return { turn: s.turn, numTurns: this.horizon, lastReward: s.last, maxReward: 1 };
  }
}

/** A linear head whose value is `c` for every input. */
function constantHead(hidden: number, c: number): CriticHead {
  const head = createCriticHead(hidden, { type: 'linear' }, rngFor(0, 'init'));
  const [w, b] = head.trainableVariables();
  tf.tidy(() => {
    w.assign(tf.zerosLike(w));
    b.assign(tf.tensor1d([c]));
  });
  return head;
}

const tasks = toyTasks(8, 'diff');
const fast = { max_new_tokens: 2, temperature: 1, top_p: 1, top_k: 0, eval_interval: 0, logging_steps: 1_000_000, seed: 5, weight_decay: 0 } as const;
const weights = (a: readonly Agent[]) => a.flatMap((x) => x.model.trainableVariables().map((v) => Array.from(v.dataSync())));

let dir: string;
let cleanup: () => Promise<void>;
let agents: Agent[];
let critic: CriticLM;

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend('wasm');
  ({ dir, cleanup } = await tempDir('differences'));
  agents = await tinyAgents(dir, [
    { name: 'a0', arch: 'qwen3', seed: 1, words: [...toyWords] },
    { name: 'a1', arch: 'qwen3', seed: 2, words: [...toyWords] },
  ]);
  critic = await tinyCritic(dir, 'cc', 5, toyWords);
});
afterAll(async () => {
  disposeAgents(agents);
  disposeCritics([critic]);
  await cleanup();
});

/** Fresh actors with the same starting weights (the checkpoints written in beforeAll). */
async function freshAgents(): Promise<Agent[]> {
  return Promise.all(['a0', 'a1'].map(async (name) => ({ name, chat: false as const, model: await loadCausalLM(join(dir, name)), tokenizer: await loadTokenizer(join(dir, name)) })));
}

describe('δ normalisation (advantage_normalization)', () => {
  it('true (default, CoMLRL 1.3.6): δ z-scored within each turn group; false: the raw δ of the paper\'s equations', () => {
    // Two turn groups; V and y chosen by hand.
    const trs = [0, 0, 0, 1, 1].map((turn) => ({ turn }) as unknown as JointTransition);
    const values = [0, 0, 0, 0.5, 0.5];
    const targets = [1, 2, 3, 0.5, 1.5];
    const raw = estimates(trs, values, targets, { normalize: false, qBaseline: false }).advantages;
    expect(raw).toEqual([1, 2, 3, 0, 1]);
    const z = estimates(trs, values, targets, { normalize: true, qBaseline: false }).advantages;
    // Turn 0: δ = [1, 2, 3], mean 2, population std √(2/3); turn 1: δ = [0, 1], mean 0.5, std 0.5.
    const s = Math.sqrt(2 / 3);
    [-1 / s, 0, 1 / s, -1, 1].forEach((want, j) => expect(z[j]).toBeCloseTo(want, 12));
    expect(parseCoLLMCCConfig({}).advantage_normalization).toBe(true);
  });

  it('in the trainer: equal δ z-score to 0 and move nothing; raw, the actors step on δ itself', async () => {
    // Single turn, reward 0.2, V ≡ 0.5: every sample's δ = −0.3. The ratio is off, so each actor's
    // loss is −mean(A · Σ log π).
    const losses: number[] = [];
    const moved: boolean[] = [];
    for (const normalize of [true, false]) {
      const own = await freshAgents();
      const before = weights(own);
      const trainer = new CoLLMCCTrainer({
        agents: own,
        critic,
        criticHead: constantHead(critic.model.hiddenSize, 0.5),
        env: new ScriptedEnv([0.2]),
        trainTasks: tasks,
        config: { ...fast, num_turns: 1, rollout_buffer_size: 4, agent_learning_rate: 1e-2, critic_learning_rate: 0, use_importance_ratio: false, advantage_normalization: normalize },
      });
      const trs: JointTransition[] = [];
      for (const task of tasks.slice(0, 4)) trs.push(...(await trainer.rollout(task)));
      const m = await trainer.updateFrom(trs);
      const lp = trs.map((t) => t.agents[0].behaviourLogProb);
      const want = normalize ? 0 : (0.3 * lp.reduce((a, b) => a + b, 0)) / lp.length;
      expect(m['agent_0/policy_loss']).toBeCloseTo(want, 5);
      losses.push(m['agent_0/policy_loss']);
      moved.push(weights(own).some((w, i) => w.some((x, j) => x !== before[i][j])));
      trainer.dispose();
      disposeAgents(own);
    }
    expect(Math.abs(losses[0])).toBe(0);
    expect(losses[1]).toBeLessThan(0);
    expect(moved).toEqual([false, true]);
  });
});

describe('importance ratio', () => {
  it('ρ ≠ 1 once the actor has stepped, also within one update epoch (a second minibatch); use_importance_ratio: false ignores it', async () => {
    const results: { ratios: [number, number]; weights: number[][] }[] = [];
    for (const useRatio of [true, false]) {
      const own = await freshAgents();
      const trainer = new CoLLMCCTrainer({
        agents: own,
        critic,
        criticHead: constantHead(critic.model.hiddenSize, 0.5),
        env: new ScriptedEnv([0.2]),
        trainTasks: tasks,
        // Raw δ = −0.3 on every sample; 8 samples in 2 minibatches of 4, one update epoch.
        config: { ...fast, num_turns: 1, rollout_buffer_size: 8, train_batch_size: 4, update_epochs: 1, agent_learning_rate: 3e-2, critic_learning_rate: 0, advantage_normalization: false, use_importance_ratio: useRatio },
      });
      const trs: JointTransition[] = [];
      for (const task of tasks) trs.push(...(await trainer.rollout(task)));
      const m = await trainer.updateFrom(trs);
      results.push({ ratios: [m['turn_1/ratio_min'], m['turn_1/ratio_max']], weights: weights(own) });
      trainer.dispose();
      disposeAgents(own);
    }
    // The first minibatch's 4 rows have ρ = 1 exactly; the second's come after the actor's step.
    const [lo, hi] = results[0].ratios;
    expect(hi - lo).toBeGreaterThan(1e-4);
    expect(lo).toBeLessThanOrEqual(1);
    expect(hi).toBeGreaterThanOrEqual(1);
    // So the ratio changes the second step: the weights differ from −A·log π's.
    expect(results[0].weights).not.toEqual(results[1].weights);
  });
});

describe('Q critic advantage (q_advantage: baseline)', () => {
  it("Q minus the turn group's mean Q, the sample itself included: A_i = (1 − 1/n)(Q_i − mean of the others)", () => {
    const trs = [0, 0, 0].map((turn) => ({ turn }) as unknown as JointTransition);
    const q = [1, 0, 0];
    const a = estimates(trs, q, [0, 0, 0], { normalize: false, qBaseline: true }).advantages;
    [2 / 3, -1 / 3, -1 / 3].forEach((want, j) => expect(a[j]).toBeCloseTo(want, 12));
    // z-scored by default: the centring is then the z-score's own.
    const z = estimates(trs, q, [0, 0, 0], { normalize: true, qBaseline: true }).advantages;
    expect(z[0]).toBeCloseTo(Math.SQRT2, 12);
  });
});

describe('early termination at evaluation', () => {
  // Both turns pay 0.5; a threshold of 0.3 ends an episode after turn 1.
  const env = new ScriptedEnv([0.5, 0.5]);
  const evalConfig = { ...fast, num_turns: 2, eval_num_samples: 2, eval_batch_size: 2 } as const;

  it('MAGRPO ends an eval episode as its training and the actor-critic trainers do; eval_early_termination: false plays every turn (CoMLRL 1.3.6)', async () => {
    const turnsPlayed = async (config: Record<string, unknown>) => {
      const trainer = new MAGRPOTrainer({ agents, env, trainTasks: tasks, evalTasks: tasks, config: { ...evalConfig, num_generations: 2, ...config } });
      const r = await trainer.evaluate();
      trainer.dispose();
      return r.episodes.map((e) => e.rewards.length);
    };
    expect(await turnsPlayed({ early_termination_threshold: 0.3 })).toEqual([1, 1]);
    expect(await turnsPlayed({ early_termination_threshold: 0.3, eval_early_termination: true })).toEqual([1, 1]);
    expect(await turnsPlayed({ early_termination_threshold: 0.3, eval_early_termination: false })).toEqual([2, 2]);
    expect(await turnsPlayed({ early_termination_threshold: 0.6 })).toEqual([2, 2]);
    expect(await turnsPlayed({ early_termination_threshold: null })).toEqual([2, 2]);
    // CoLLM-CC, same threshold: the same episodes' length.
    const cc = new CoLLMCCTrainer({ agents, critic, env, trainTasks: tasks, evalTasks: tasks, config: { ...evalConfig, early_termination_threshold: 0.3 } });
    expect((await cc.evaluate()).episodes.map((e) => e.rewards.length)).toEqual([1, 1]);
    cc.dispose();
  });

  it('`comlrl eval` follows each trainer (the registry), and configs without the field parse as before it existed', () => {
    const magrpo = getTrainer('magrpo');
    expect(magrpo.evalEarlyTermination(parseMAGRPOConfig({ early_termination_threshold: 0.3 }))).toBe(0.3);
    expect(magrpo.evalEarlyTermination(parseMAGRPOConfig({ early_termination_threshold: 0.3, eval_early_termination: false }))).toBeNull();
    expect(getTrainer('collm-cc').evalEarlyTermination(parseCoLLMCCConfig({ early_termination_threshold: 0.3 }))).toBe(0.3);
    expect(magrpoEvalEarlyTermination(parseMAGRPOConfig({}))).toBe(-0.2);
    // No default is filled in: a parsed config without it has no such key (its hash is unchanged).
    expect('eval_early_termination' in parseMAGRPOConfig({})).toBe(false);
    expect(() => parseMAGRPOConfig({ eval_early_termination: 'yes' })).toThrow(/eval_early_termination must be true or false/);
  });
});
