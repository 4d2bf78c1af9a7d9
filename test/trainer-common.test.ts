/**
 * trainers/common: advantages, minibatching, config helpers, metric names, prompt encoding,
 * generation, the policy-gradient step (on real tiny checkpoints), saving and resume state.
 */
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { initBackend } from '../src/backend/init.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { loadCausalLM } from '../src/model/load.js';
import { AdamW } from '../src/optim/adamw.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { createRng } from '../src/util/rng.js';
import { planMinibatches } from '../src/buffer/replay.js';
import { groupItemsByTurn } from '../src/util/stats.js';
import { toyWords } from '../envs/toy/index.js';
import {
  agentKey,
  checkTrainerState,
  discountedReturns,
  encodePrompt,
  evalTurnMetrics,
  generateGroups,
  intAtLeast,
  optimizerStates,
  parseConfig,
  policyGradientStep,
  restoreOptimizers,
  saveAgents,
  sequenceLossGradients,
  linearPolicyLoss,
  summarizeEval,
  turnKey,
  type EvalEpisode,
  type PolicyGradientRow,
  type TrainerState,
} from '../trainers/core/index.js';
// MAGRPO's own pieces live in trainers/magrpo-*.ts (trainers/common holds what every trainer shares).
import { groupAdvantages, hasZeroSpread, stdPop, zScore } from '../trainers/magrpo/advantage.js';
import { disposeAgents, tempDir, tinyAgents } from './magrpo-helpers.js';

const close = (a: readonly number[], b: readonly number[], tol = 1e-9) => {
  expect(a.length).toBe(b.length);
  a.forEach((x, i) => expect(Math.abs(x - b[i])).toBeLessThan(tol));
};

describe('advantages', () => {
  const R = [1, 2, 3, 6];

  test('the four modes without normalization (hand-derived)', () => {
    // mean(R) = 3 → R − 3.
    close(groupAdvantages(R, 'mean', false), [-2, -1, 0, 3]);
    close(groupAdvantages(R, 'raw', false), [1, 2, 3, 6]);
    // max(R) = 6 → R − 6.
    close(groupAdvantages(R, 'max', false), [-5, -4, -3, 0]);
    // K = 4, ΣR = 12: (4R − 12)/3.
    close(groupAdvantages(R, 'rloo', false), [-8 / 3, -4 / 3, 0, 4]);
  });

  test('z-score uses the population std and makes all modes equal', () => {
    // R − mean = [-2,-1,0,3]; population variance (4+1+0+9)/4 = 3.5.
    const s = Math.sqrt(3.5);
    const expected = [-2 / s, -1 / s, 0, 3 / s];
    for (const mode of ['mean', 'raw', 'max', 'rloo'] as const) close(groupAdvantages(R, mode, true), expected, 1e-12);
    expect(stdPop([1, 3])).toBe(1);
  });

  test('constant groups give zero; tiny spreads use the 1e-6 std floor', () => {
    expect(groupAdvantages([0.5, 0.5, 0.5], 'mean', true)).toEqual([0, 0, 0]);
    expect(hasZeroSpread([0.5, 0.5])).toBe(true);
    expect(hasZeroSpread([0.5, 0.25])).toBe(false);
    // [0, 1e-7]: deviations ±5e-8, std 5e-8 < 1e-6 → ±5e-8 / 1e-6 = ±0.05.
    close(zScore([0, 1e-7]), [-0.05, 0.05], 1e-12);
  });
});

describe('minibatches and metric names', () => {
  test('turn groups come out in ascending turn order, stable inside a group', () => {
    const items = [
      { t: 1, id: 'a' },
      { t: 0, id: 'b' },
      { t: 1, id: 'c' },
      { t: 0, id: 'd' },
    ];
    const groups = groupItemsByTurn(items, (x) => x.t);
    expect(groups.map((g) => g.turn)).toEqual([0, 1]);
    expect(groups[0].items.map((x) => x.id)).toEqual(['b', 'd']);
    expect(groups[1].items.map((x) => x.id)).toEqual(['a', 'c']);
  });

  test('a seeded shuffle cuts every item into batches of the given size, reproducibly', () => {
    const items = Array.from({ length: 7 }, (_, i) => i);
    const plan = (batchSize: number, rng: ReturnType<typeof createRng>) =>
      planMinibatches(items.map(() => 0), { batchSize, epochs: 1, rng }).map((b) => b.indices.map((i) => items[i]));
    const a = plan(3, createRng(5));
    const b = plan(3, createRng(5));
    expect(a).toEqual(b);
    expect(a.map((x) => x.length)).toEqual([3, 3, 1]);
    expect(a.flat().sort()).toEqual(items);
    expect(items).toEqual([0, 1, 2, 3, 4, 5, 6]); // input untouched
    expect(() => plan(0, createRng(1))).toThrow(/>= 1/);
  });

  test('turn keys are 1-based like CoMLRL, agent keys 0-based like agent_i/ folders', () => {
    expect(turnKey(0, 'reward_mean')).toBe('turn_1/reward_mean');
    expect(turnKey(2, 'expected_return')).toBe('turn_3/expected_return');
    expect(agentKey(1, 'loss')).toBe('agent_1/loss');
  });
});

describe('config helpers', () => {
  const schema = z.strictObject({ num_generations: intAtLeast('num_generations', 2).default(4) });
  test('bad values name the field, the rule and the value', () => {
    expect(() => parseConfig('X', schema, { num_generations: 1 }, ['num_generations'])).toThrow(
      /invalid X config: num_generations must be an integer >= 2 \(got 1\)/,
    );
    expect(() => parseConfig('X', schema, { num_generations: 2.5 }, ['num_generations'])).toThrow(/num_generations/);
  });
  test('unknown keys are rejected, with a snake_case hint for camelCase', () => {
    expect(() => parseConfig('X', schema, { numGenerations: 2 }, ['num_generations'])).toThrow(
      /unknown field 'numGenerations'; did you mean 'num_generations'/,
    );
    expect(() => parseConfig('X', schema, { foo: 1 }, ['num_generations'])).toThrow(/unknown field 'foo'/);
    expect(parseConfig('X', schema, {}, ['num_generations'])).toEqual({ num_generations: 4 });
  });
});

describe('eval summaries', () => {
  test('discounted returns G_t = r_t + γ G_{t+1}', () => {
    // γ = 0.5: G_2 = 4, G_1 = 2 + 2 = 4, G_0 = 1 + 2 = 3.
    close(discountedReturns([1, 2, 4], 0.5), [3, 4, 4]);
  });

  test('per-turn means count only the episodes that reached the turn', () => {
    const ep = (rewards: number[]): EvalEpisode<number, number> => ({
      task: 0,
      states: [],
      observations: [],
      completions: [],
      completionIds: [],
      rewards,
      returns: discountedReturns(rewards, 1),
      infos: [],
    });
    const summary = summarizeEval([ep([1, 3]), ep([0])]);
    // Turn 1: rewards 1 and 0 → 0.5; returns 4 and 0 → 2. Turn 2: only the first, reward 3, return 3.
    expect(summary).toEqual([
      { turn: 0, episodes: 2, rewardMean: 0.5, returnMean: 2 },
      { turn: 1, episodes: 1, rewardMean: 3, returnMean: 3 },
    ]);
    expect(evalTurnMetrics(summary)).toEqual({
      'eval/turn_1/mean_reward': 0.5,
      'eval/turn_1/mean_return': 2,
      'eval/turn_2/mean_reward': 3,
      'eval/turn_2/mean_return': 3,
    });
  });
});

describe('with tiny checkpoints', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let agents: Agent[];

  beforeAll(async () => {
    await initBackend('wasm');
    ({ dir, cleanup } = await tempDir('common'));
    agents = await tinyAgents(dir, [
      { name: 'word', arch: 'qwen3', seed: 3, words: [...toyWords] },
      { name: 'bpe', arch: 'llama', seed: 4, tokenizer: 'bpe', chat: { system: 'be brief' } },
    ]);
  });
  afterAll(async () => {
    disposeAgents(agents);
    await cleanup();
  });

  test('raw prompts are tokenized as text; chat agents get the template with the assistant header', () => {
    const raw = encodePrompt(agents[0], 'cue red');
    expect(raw).toEqual(agents[0].tokenizer.encode('cue red'));
    const chat = encodePrompt(agents[1], 'cue red');
    const text = agents[1].tokenizer.decode(chat);
    expect(text).toContain('<|im_start|>system\nbe brief<|im_end|>');
    expect(text).toContain('<|im_start|>user\ncue red<|im_end|>');
    expect(text.endsWith('<|im_start|>assistant\n')).toBe(true);
  });

  test("an environment's rendering overrides a chat agent's format (HouseBuild: chat turn 1, raw follow-ups)", () => {
    const raw = encodePrompt(agents[1], 'cue red', { kind: 'raw' });
    expect(raw).toEqual(agents[1].tokenizer.encode('cue red'));
    const chat = agents[1].tokenizer.decode(encodePrompt(agents[1], 'ignored', { kind: 'chat', system: 'task rules', user: 'cue blue' }));
    // The task's system prompt replaces the agent's own ('be brief'), and the user text is the rendering's.
    expect(chat).toContain('<|im_start|>system\ntask rules<|im_end|>');
    expect(chat).not.toContain('be brief');
    expect(chat).toContain('<|im_start|>user\ncue blue<|im_end|>');
    // Agents with chat formatting off ignore the rendering.
    expect(encodePrompt(agents[0], 'cue red', { kind: 'chat', user: 'x' })).toEqual(agents[0].tokenizer.encode('cue red'));
  });

  test('K samples per prompt from one generate call, decoded without special tokens', async () => {
    const agent = agents[0];
    const prompts = [encodePrompt(agent, 'cue red'), encodePrompt(agent, 'cue blue partner sky')];
    const settings = { maxNewTokens: 5, temperature: 1, topP: 1, topK: 0 };
    const groups = await generateGroups(agent, prompts, 3, settings, createRng(9));
    expect(groups).toHaveLength(2);
    for (const [p, g] of groups.entries()) {
      expect(g.promptIds).toEqual(prompts[p]);
      expect(g.ids).toHaveLength(3);
      g.ids.forEach((ids, k) => {
        expect(ids.length).toBeGreaterThan(0);
        expect(ids.length).toBeLessThanOrEqual(5);
        expect(g.texts[k]).toBe(agent.tokenizer.decode(ids, { skipSpecialTokens: true }));
        for (const special of agent.tokenizer.specialTokenIds) {
          if (ids.includes(special)) expect(g.texts[k]).not.toContain(agent.tokenizer.decode([special]));
        }
      });
    }
    // Same seed, same samples.
    const again = await generateGroups(agent, prompts, 3, settings, createRng(9));
    expect(again.map((g) => g.ids)).toEqual(groups.map((g) => g.ids));
  });

  test('the loss is −Σ coef·(sum of every completion token log-prob, EOS included), chunked or not', async () => {
    const agent = agents[0];
    const eos = agent.tokenizer.eosTokenId;
    const prompt = encodePrompt(agent, 'cue red');
    const rows: PolicyGradientRow[] = [
      { promptIds: prompt, completionIds: [...agent.tokenizer.encode('apple rose'), eos], coef: 0.75 },
      { promptIds: encodePrompt(agent, 'cue gold'), completionIds: agent.tokenizer.encode('sun'), coef: -0.5 },
      { promptIds: prompt, completionIds: agent.tokenizer.encode('sky sea leaf'), coef: 0.25 },
    ];
    const lp = await agent.model.tokenLogProbs(
      rows.map((r) => [...r.promptIds]),
      rows.map((r) => [...r.completionIds]),
    );
    expect(lp[0]).toHaveLength(3); // the EOS token is scored
    const expected = -rows.reduce((acc, r, i) => acc + r.coef * lp[i].reduce((a, b) => a + b, 0), 0);
    const whole = sequenceLossGradients(agent.model, rows, linearPolicyLoss);
    const chunked = sequenceLossGradients(agent.model, rows, linearPolicyLoss, { chunkSize: 1 });
    expect(whole.loss).toBeCloseTo(expected, 4);
    expect(chunked.loss).toBeCloseTo(expected, 4);
    expect(whole.tokensScored).toBe(7);
    for (const name of Object.keys(whole.grads)) {
      const diff = tf.tidy(() => tf.max(tf.abs(tf.sub(whole.grads[name], chunked.grads[name]))).dataSync()[0]);
      expect(diff).toBeLessThan(1e-5);
    }
    for (const g of [...Object.values(whole.grads), ...Object.values(chunked.grads)]) g.dispose();
  });

  test('a step raises the log-prob of positive-advantage completions and lowers the others', async () => {
    // Fresh copy so the other tests' model stays as written.
    const model = await loadCausalLM(`${dir}/word`);
    const tok = agents[0].tokenizer;
    const prompt = tok.encode('cue red');
    const completions = ['apple', 'rose', 'sky', 'coin'].map((w) => [...tok.encode(w), tok.eosTokenId]);
    // z-scored advantages of returns [1, 1, 0, 0]: ±1, weighted 1/K as MAGRPO does.
    const adv = [1, 1, -1, -1];
    const rows = completions.map((c, k) => ({ promptIds: prompt, completionIds: c, coef: adv[k] / 4 }));
    const seq = async () =>
      (await model.tokenLogProbs(completions.map(() => [...prompt]), completions)).map((r) => r.reduce((a, b) => a + b, 0));
    const before = await seq();
    const opt = new AdamW(model.trainableVariables(), { lr: 1e-3, weightDecay: 0 });
    const r = policyGradientStep(model, opt, rows);
    const after = await seq();
    expect(r.rowsScored).toBe(4);
    expect(r.gradNorm).toBeGreaterThan(0);
    after.forEach((a, k) => {
      if (adv[k] > 0) expect(a).toBeGreaterThan(before[k]);
      else expect(a).toBeLessThan(before[k]);
    });
    opt.dispose();
    model.dispose();
  });

  test('zero-advantage rows are not scored but the step is still taken; non-finite weights raise', async () => {
    const model = await loadCausalLM(`${dir}/word`);
    const tok = agents[0].tokenizer;
    const opt = new AdamW(model.trainableVariables(), { lr: 1e-3 });
    const row = { promptIds: tok.encode('cue red'), completionIds: tok.encode('apple'), coef: 0 };
    const r = policyGradientStep(model, opt, [row, row]);
    expect(r.rowsScored).toBe(0);
    expect(r.loss).toBe(0);
    expect(r.gradNorm).toBe(0);
    expect(opt.stepCount).toBe(1);
    expect(() => policyGradientStep(model, opt, [{ ...row, coef: Number.NaN }], { label: 'agent 0' })).toThrow(
      /agent 0: a row has a non-finite weight/,
    );
    opt.dispose();
    model.dispose();
  });

  test('gradient clipping reports the pre-clip norm', async () => {
    const model = await loadCausalLM(`${dir}/word`);
    const tok = agents[0].tokenizer;
    const opt = new AdamW(model.trainableVariables(), { lr: 1e-3 });
    const rows = [{ promptIds: tok.encode('cue red'), completionIds: tok.encode('apple rose'), coef: 1 }];
    const g = sequenceLossGradients(model, rows, linearPolicyLoss);
    const norm = Math.sqrt(Object.values(g.grads).reduce((a, t) => a + tf.tidy(() => tf.sum(tf.square(t)).dataSync()[0]), 0));
    for (const t of Object.values(g.grads)) t.dispose();
    const r = policyGradientStep(model, opt, rows, { maxGradNorm: norm / 10 });
    expect(r.clipped).toBe(true);
    expect(r.gradNorm).toBeCloseTo(norm, 3);
    opt.dispose();
    model.dispose();
  });

  test('repeated steps keep the tensor count flat', async () => {
    const model = await loadCausalLM(`${dir}/word`);
    const tok = agents[0].tokenizer;
    const opt = new AdamW(model.trainableVariables(), { lr: 1e-3 });
    const rows = [
      { promptIds: tok.encode('cue red'), completionIds: tok.encode('apple rose'), coef: 0.5 },
      { promptIds: tok.encode('cue blue partner sea'), completionIds: tok.encode('sky'), coef: -0.5 },
    ];
    policyGradientStep(model, opt, rows, { maxGradNorm: 1e-3, chunkSize: 1 }); // allocates the Adam moments
    const n0 = tf.memory().numTensors;
    for (let i = 0; i < 3; i++) policyGradientStep(model, opt, rows, { maxGradNorm: 1e-3, chunkSize: 1 });
    expect(tf.memory().numTensors).toBe(n0);
    opt.dispose();
    model.dispose();
  });

  test('saveAgents writes agent_i/ HF dirs that load back to the same model and tokenizer', async () => {
    const out = `${dir}/saved`;
    const dirs = await saveAgents(out, agents);
    expect(dirs).toEqual([`${out}/agent_0`, `${out}/agent_1`]);
    for (const [i, d] of dirs.entries()) {
      const tok = await loadTokenizer(d);
      const model = await loadCausalLM(d);
      const ids = tok.encode('cue red apple');
      expect(ids).toEqual(agents[i].tokenizer.encode('cue red apple'));
      const a = await model.tokenLogProbs([ids.slice(0, 1)], [ids.slice(1)]);
      const b = await agents[i].model.tokenLogProbs([ids.slice(0, 1)], [ids.slice(1)]);
      expect(a[0]).toEqual(b[0]); // float32 weights are written exactly
      model.dispose();
    }
  });

  test('optimizer states round-trip and trainer states are checked for their origin', async () => {
    const model = await loadCausalLM(`${dir}/word`);
    const tok = agents[0].tokenizer;
    const rows = [{ promptIds: tok.encode('cue red'), completionIds: tok.encode('apple'), coef: 1 }];
    const a = new AdamW(model.trainableVariables(), { lr: 1e-3 });
    policyGradientStep(model, a, rows);
    const states = optimizerStates([a]);
    const b = new AdamW(model.trainableVariables(), { lr: 1e-3 });
    restoreOptimizers([b], states);
    expect(b.getState().paramSteps).toEqual(a.getState().paramSteps);
    expect(Array.from(b.getState().m[0])).toEqual(Array.from(a.getState().m[0]));
    const state: TrainerState<null> = {
      format: 'comlrl-trainer-state',
      version: 1,
      trainer: 'magrpo',
      numAgents: 1,
      counters: {},
      cursor: { epoch: 0, index: 3 },
      rng: {},
      optimizers: states,
      extra: null,
    };
    expect(() => checkTrainerState(state, 'magrpo', 1, 1)).not.toThrow();
    expect(() => checkTrainerState(state, 'collm-cc', 1, 1)).toThrow(/from trainer 'magrpo', this is 'collm-cc'/);
    expect(() => checkTrainerState(state, 'magrpo', 2, 1)).toThrow(/1 agents, this trainer 2/);
    expect(() => restoreOptimizers([a, b], states)).toThrow(/1 states for 2 optimizers/);
    a.dispose();
    b.dispose();
    model.dispose();
  });
});
