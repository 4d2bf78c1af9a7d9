/**
 * Reference-model KL (CoMLRL 1.3.8's `reference_kl_*`, trainers/core/reference-kl.ts): the k3
 * estimator against a hand derivation and against float64 PyTorch log-probs; the adapters-off
 * reference of a LoRA model against a separate frozen copy of its base (same values, memory of
 * both measured); where each trainer applies the penalty (MAGRPO: the returns before the
 * advantages; CoLLM: the joint reward), the loss-term form, the config fields and their defaults,
 * and a learning test: a large coefficient pins the policy to its reference, which the mutation
 * (coefficient 0) does not.
 */
import * as fs from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it, test } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import type { Agent } from '../src/decpomdp/agent.js';
import type { GlobalInfo, LLMDecPOMDP, StepResult } from '../src/decpomdp/types.js';
import { TfCausalLM } from '../src/model/causal-lm.js';
import { loadCausalLM } from '../src/model/load.js';
import type { CausalLM } from '../src/model/types.js';
import { AdamW } from '../src/optim/adamw.js';
import { ToyCoordEnv, toyTasks, toyTrainTasks, toyWords, type ToyTask } from '../envs/toy/index.js';
import { groupKl, k3, klPolicyGradientStep, referenceOf, sequenceK3, ReferenceKlTracker } from '../trainers/core/reference-kl.js';
import { CoLLMCCTrainer } from '../trainers/collm/centralized.js';
import { CoLLMDCTrainer } from '../trainers/collm/decentralized.js';
import { parseCoLLMDCConfig } from '../trainers/collm/config.js';
import { parseMAGRPOConfig } from '../trainers/magrpo/config.js';
import { parseMAREINFORCEConfig } from '../trainers/reinforce/config.js';
import { parseCentralizedMAGRPOConfig } from '../trainers/centralized-magrpo/config.js';
import { effectiveReturns, MAGRPOTrainer, minibatchKlRows, minibatchRows, type NodeSample } from '../trainers/magrpo/trainer.js';
import { actorObjective, actorRow } from '../trainers/collm/steps.js';
import { toyCritics, disposeCritics } from './collm-helpers.js';
import { learningRun, ONE_WORD_SAMPLING, toyAgentPair } from './learning-harness.js';
import { disposeAgents, tempDir, tinyAgents } from './magrpo-helpers.js';
import { backendUnderTest } from './backend-under-test.js';
import { cli, tinyModels, toyConfigYaml } from './cli-helpers.js';
import { readMetrics } from '../src/logging/metrics.js';
import { runConfigHash } from '../cli/run.js';
import { loadConfig } from '../cli/schemas.js';

const FIXTURES = join(import.meta.dirname, 'fixtures');
const LORA_NAMES = ['qwen2-tied-qv', 'qwen3-all-linear-rslora', 'llama-mlp-layer1'];

let dir: string;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend(backendUnderTest('wasm'));
  ({ dir, cleanup } = await tempDir('reference-kl'));
});
afterAll(async () => {
  await cleanup();
});

describe('the k3 estimator', () => {
  it('matches a hand derivation', () => {
    // p = (1/2, 1/4), p_ref = (1/4, 1/2): d = (log 1/2, log 2)
    // k3 = (1/2 + log 2 − 1) + (2 − log 2 − 1) = 1/2 exactly.
    expect(k3(Math.log(0.5), Math.log(0.25))).toBeCloseTo(0.5 + Math.log(2) - 1, 15);
    expect(k3(Math.log(0.25), Math.log(0.5))).toBeCloseTo(1 - Math.log(2), 15);
    expect(sequenceK3([Math.log(0.5), Math.log(0.25)], [Math.log(0.25), Math.log(0.5)])).toBeCloseTo(0.5, 15);
    // Zero where the policy equals its reference, positive elsewhere, exact for tiny d (expm1).
    expect(k3(-1.3, -1.3)).toBe(0);
    expect(k3(-2, -1)).toBeGreaterThan(0);
    // d²/2 for small d (a naive exp(d) − d − 1 gives 0 or rounding noise of 1e-16 here).
    expect(k3(0, 1e-9) / 5e-19).toBeCloseTo(1, 5);
    expect(sequenceK3([], [])).toBe(0);
  });

  it('groupKl scores with the prompt offset CoMLRL slices (independent full-logits derivation)', async () => {
    const [policy, reference] = await tinyAgents(join(dir, 'hand'), [
      { name: 'p', arch: 'qwen3', seed: 11, words: [...toyWords] },
      { name: 'r', arch: 'qwen3', seed: 12, words: [...toyWords] },
    ]);
    try {
      const prompt = [3, 5, 7];
      const completions = [[2, 9, 4], [6]];
      const got = await groupKl(policy.model, referenceOf({ ...policy, reference: reference.model }), prompt, completions);
      // By hand: token j of a completion is predicted at position |prompt| − 1 + j of the full row.
      const expected = completions.map((c) => {
        const row = [...prompt, ...c];
        const lp = (m: CausalLM) => {
          if (!(m instanceof TfCausalLM)) throw new Error('a TfCausalLM was loaded');
          const logits = m.logits([row]);
          const ls = tf.logSoftmax(logits).arraySync() as number[][][];
          logits.dispose();
          return c.map((tok, j) => ls[0][prompt.length - 1 + j][tok]);
        };
        const p = lp(policy.model);
        const r = lp(reference.model);
        return p.reduce((s, v, t) => s + Math.exp(r[t] - v) - (r[t] - v) - 1, 0);
      });
      got.kls.forEach((v, k) => expect(v).toBeCloseTo(expected[k], 5));
      expect(got.kls.every((v) => v > 0)).toBe(true);
    } finally {
      disposeAgents([policy, reference]);
    }
  });
});

describe('LoRA: the base with the adapter off is the reference', () => {
  for (const name of LORA_NAMES) {
    it(`${name}: adapters-off KL = separate frozen copy KL = float64 PyTorch KL; memory of both measured`, async () => {
      const adapter = join(FIXTURES, 'lora', name);
      const base = join(FIXTURES, 'model', fs.readFileSync(join(adapter, 'base.txt'), 'utf8').trim());
      const cases = JSON.parse(fs.readFileSync(join(adapter, 'cases.json'), 'utf8')) as { prompt: number[]; completion: number[] }[];
      const want = JSON.parse(fs.readFileSync(join(FIXTURES, 'reference-kl', `${name}.json`), 'utf8')) as { base_logprobs: number[][]; kl: number[] };
      const model = await loadCausalLM(base, { adapter });
      // Only the id count of the tokenizer is read (a given reference must cover the agent's ids): the model's.
      const agent = { name, model, tokenizer: { vocabSize: model.vocabSize } as never, chat: false } as const;
      let copy: CausalLM | null = null;
      try {
        // Memory: the adapters-off reference allocates nothing; a frozen copy of the base one more model.
        const before = tf.memory().numBytes;
        const off = referenceOf(agent);
        const offBytes = tf.memory().numBytes - before;
        expect(off.kind).toBe('adapters-off');
        copy = await loadCausalLM(base);
        const copyBytes = tf.memory().numBytes - before;
        const params = copy.trainableVariables().reduce((s, v) => s + v.size, 0);
        console.log(`${name}: reference weights in memory: adapters off ${offBytes} B, frozen copy of the base ${copyBytes} B (${params} float32 parameters)`);
        expect(offBytes).toBe(0);
        expect(copyBytes).toBeGreaterThanOrEqual(4 * params);

        const viaCopy = referenceOf({ ...agent, reference: copy });
        const kls: number[][] = [];
        for (const ref of [off, viaCopy]) {
          const row: number[] = [];
          for (const c of cases) row.push((await groupKl(model, ref, c.prompt, [c.completion])).kls[0]);
          kls.push(row);
        }
        // Same values both ways (the same base weights, read in place or copied) ...
        kls[0].forEach((v, i) => expect(Math.abs(v - kls[1][i])).toBeLessThan(1e-6));
        // ... and the float64 reference's: per-token log-probs within 2e-4 move a sum of k3 by about |1 − e^d| · 2e-4 per token.
        const gaps = kls[0].map((v, i) => Math.abs(v - want.kl[i]) / (1 + want.kl[i]));
        console.log(`${name}: KL ${kls[0].map((v) => v.toFixed(5)).join(' ')}; float64 ${want.kl.map((v) => v.toFixed(5)).join(' ')}; worst |Δ|/(1+KL) ${Math.max(...gaps).toExponential(2)}`);
        // Measured on wasm: at most 5e-6.
        for (const g of gaps) expect(g).toBeLessThan(5e-5);
        expect(want.kl.some((v) => v > 0.01)).toBe(true);
        // The adapters-off pass is the base's own: its log-probs match PyTorch's float64 base log-probs.
        const baseLps = await model.withAdaptersOff!(() => model.tokenLogProbs(cases.map((c) => c.prompt), cases.map((c) => c.completion)));
        baseLps.forEach((row, i) => row.forEach((v, j) => expect(Math.abs(v - want.base_logprobs[i][j])).toBeLessThan(2e-4)));
        // The adapter is back on afterwards.
        const on = await model.tokenLogProbs([cases[1].prompt], [cases[1].completion]);
        const expected = JSON.parse(fs.readFileSync(join(adapter, 'expected.json'), 'utf8')) as number[][];
        on[0].forEach((v, j) => expect(Math.abs(v - expected[1][j])).toBeLessThan(2e-4));
      } finally {
        copy?.dispose();
        model.dispose();
      }
    });
  }

  it('full fine-tuning: the reference is a frozen copy that does not follow the updates', async () => {
    const [a] = await tinyAgents(join(dir, 'full'), [{ name: 'a', arch: 'llama', seed: 5, words: [...toyWords] }]);
    try {
      const before = tf.memory().numBytes;
      const ref = referenceOf(a);
      const bytes = tf.memory().numBytes - before;
      const params = a.model.trainableVariables().reduce((s, v) => s + v.size, 0);
      expect(ref.kind).toBe('frozen-copy');
      expect(bytes).toBe(4 * params);
      const c = [[4, 5, 6]];
      expect((await groupKl(a.model, ref, [2, 3], c)).kls[0]).toBe(0);
      // Move the policy: the reference stays where it was.
      for (const v of a.model.trainableVariables()) v.assign(tf.add(v, tf.randomNormal(v.shape, 0, 0.05, 'float32', 1)));
      expect((await groupKl(a.model, ref, [2, 3], c)).kls[0]).toBeGreaterThan(1e-4);
      ref.dispose();
    } finally {
      disposeAgents([a]);
    }
  });
});

describe('where the penalty goes', () => {
  const sample = (returns: number[], referenceKls?: number[], referenceLogProbs?: number[][]): NodeSample => ({
    agent: 0,
    turn: 0,
    envStep: 1,
    promptIds: [1],
    completionIds: returns.map(() => [2, 3]),
    returns,
    nodeMeanReward: 0,
    nodeMeanReturn: 0,
    ...(referenceKls ? { referenceKls } : {}),
    ...(referenceLogProbs ? { referenceLogProbs } : {}),
  });

  it('MAGRPO: R − β·KL before the advantages (CoMLRL: returns [1, 2], KL [0.2, 0.4], β 0.5 → [0.9, 1.8])', () => {
    expect(effectiveReturns(sample([1, 2], [0.2, 0.4]), 0.5)).toEqual([0.9, 1.8]);
    expect(effectiveReturns(sample([1, 2], [0.2, 0.4]), 0)).toEqual([1, 2]);
    expect(effectiveReturns(sample([1, 2]), 0.5)).toEqual([1, 2]);
    // Mean baseline, no z-score: A = [0.9 − 1.35, 1.8 − 1.35] = [−0.45, 0.45], coef = A / (K·|mb|) = A / 2.
    const rows = minibatchRows([sample([1, 2], [0.2, 0.4])], 'mean', false, 0.5);
    expect(rows.map((r) => r.coef)).toEqual([-0.225, 0.225].map((v) => expect.closeTo(v, 12)));
    // A KL large enough reverses the ranking the rewards alone give.
    const flipped = minibatchRows([sample([1, 2], [0, 4])], 'mean', false, 0.5);
    expect(flipped[0].coef).toBeGreaterThan(0);
    // Loss mode: advantages from the plain returns, KL weight β / (K·|mb|).
    const klRows = minibatchKlRows([sample([1, 2], [0.2, 0.4], [[-1, -2], [-3, -4]])], 'mean', false, 0.5);
    expect(klRows.map((r) => r.coef)).toEqual([-0.25, 0.25]);
    expect(klRows.map((r) => r.klWeight)).toEqual([0.25, 0.25]);
    expect(klRows[1].refLogProbs).toEqual([-3, -4]);
  });

  it('CoLLM: the joint reward less β·Σ_i KL_i; the environment reward still decides termination', async () => {
    const agents = await tinyAgents(join(dir, 'collm'), [
      { name: 'a0', arch: 'qwen3', seed: 21, words: [...toyWords] },
      { name: 'a1', arch: 'llama', seed: 22, words: [...toyWords] },
      { name: 'r0', arch: 'qwen3', seed: 23, words: [...toyWords] },
      { name: 'r1', arch: 'llama', seed: 24, words: [...toyWords] },
    ]);
    const critics = await toyCritics(join(dir, 'collm-critics'));
    const [a0, a1, r0, r1] = agents;
    const logged: Record<string, number>[] = [];
    const trainer = new CoLLMCCTrainer({
      agents: [{ ...a0, reference: r0.model }, { ...a1, reference: r1.model }],
      critic: critics[2],
      env: new ConstEnv(0.7),
      trainTasks: toyTasks(2, 'train'),
      logger: { log: (_s, m) => void logged.push(m) },
      config: { num_turns: 2, num_generations: 1, max_new_tokens: 3, temperature: 1, top_p: 1, top_k: 0, early_termination_threshold: 0.5, reference_kl_enabled: true, reference_kl_coef: 0.3, rollout_buffer_size: 1, logging_steps: 1, eval_interval: 0 },
    });
    try {
      const trs = await trainer.rollout(toyTasks(1, 'train')[0]);
      // r = 0.7 > 0.5 ends the episode after one turn (the shaped reward would not).
      expect(trs.length).toBe(1);
      const tr = trs[0];
      let kl = 0;
      for (const [i, ref] of [r0, r1].entries()) {
        const a = tr.agents[i];
        kl += (await groupKl([a0, a1][i].model, referenceOf({ ...[a0, a1][i], reference: ref.model }), a.promptIds, [a.completionIds])).kls[0];
      }
      expect(kl).toBeGreaterThan(0);
      expect(tr.reward).toBeCloseTo(0.7 - 0.3 * kl, 6);
      await trainer.train({ maxItems: 1 });
      const row = logged.find((m) => 'agent_0/turn_1/kl/mean' in m);
      expect(row?.['agent_1/turn_1/kl/mean']).toBeGreaterThan(0);
      expect(row?.['agent_0/turn_1/kl/penalty_mean']).toBeCloseTo(0.3 * (row?.['agent_0/turn_1/kl/mean'] ?? NaN), 12);
    } finally {
      trainer.dispose();
      disposeCritics(critics);
      disposeAgents(agents);
    }
  });
});

describe('kl_mode: loss', () => {
  it('the loss term is β·Σ_t k3 with its gradient; it pulls the policy back to the reference', async () => {
    const [p, r] = await tinyAgents(join(dir, 'loss'), [
      { name: 'p', arch: 'qwen3', seed: 31, words: [...toyWords] },
      { name: 'r', arch: 'qwen3', seed: 32, words: [...toyWords] },
    ]);
    const opt = new AdamW(p.model.trainableVariables(), { lr: 0.01 });
    try {
      const prompt = [3, 4];
      const completion = [5, 6, 7];
      const ref = (await r.model.tokenLogProbs([prompt], [completion]))[0];
      const kl = async () => sequenceK3((await p.model.tokenLogProbs([prompt], [completion]))[0], ref);
      const start = await kl();
      const rows = [{ promptIds: prompt, completionIds: completion, coef: 0, refLogProbs: ref, klWeight: 2 }];
      const step = klPolicyGradientStep(p.model, opt, rows);
      // By hand: with coef 0 the loss is the KL term alone, 2 · Σ_t k3 at the weights before the step.
      expect(step.loss).toBeCloseTo(2 * start, 4);
      expect(step.klLoss).toBeCloseTo(2 * start, 4);
      for (let i = 0; i < 5; i++) klPolicyGradientStep(p.model, opt, rows);
      expect(await kl()).toBeLessThan(start / 2);
      // At the reference itself the term has zero gradient.
      const self = (await p.model.tokenLogProbs([prompt], [completion]))[0];
      const flat = klPolicyGradientStep(p.model, new AdamW(p.model.trainableVariables(), { lr: 0 }), [{ ...rows[0], refLogProbs: self }]);
      expect(flat.gradNorm).toBeLessThan(1e-5);
    } finally {
      opt.dispose();
      disposeAgents([p, r]);
    }
  });
});

test.each(['reward', 'loss'] as const)('MAGRPO with reference KL (kl_mode %s) keeps the tensor count flat across items', async (mode) => {
  const agents = await tinyAgents(join(dir, `flat-${mode}`), [
    { name: 'a0', arch: 'qwen3', seed: 41, words: [...toyWords] },
    { name: 'a1', arch: 'llama', seed: 42, words: [...toyWords] },
  ]);
  const trainer = new MAGRPOTrainer({
    agents,
    env: new ToyCoordEnv(),
    trainTasks: toyTasks(6, 'train'),
    config: { num_turns: 1, num_generations: 2, max_new_tokens: 2, rollout_buffer_size: 1, eval_interval: 0, reference_kl_enabled: true, kl_mode: mode, agent_learning_rate: 0.01 },
  });
  try {
    await trainer.train({ maxItems: 2 });
    const before = tf.memory().numTensors;
    await trainer.train({ maxItems: 3 });
    expect(tf.memory().numTensors).toBe(before);
  } finally {
    trainer.dispose();
    disposeAgents(agents);
  }
});

describe('config', () => {
  it("CoMLRL's names and defaults: off, β 0.1, reference_devices null; kl_mode 'reward'", () => {
    for (const c of [parseMAGRPOConfig({}), parseCoLLMDCConfig({})]) {
      expect(c.reference_kl_enabled).toBe(false);
      expect(c.reference_kl_coef).toBe(0.1);
      expect(c.reference_devices).toBeNull();
      expect(c.kl_mode).toBe('reward');
    }
    // The trainers built on MAGRPO's config take the same fields.
    for (const c of [parseMAREINFORCEConfig({ reference_kl_enabled: true }), parseCentralizedMAGRPOConfig({ reference_kl_enabled: true, kl_mode: 'loss' })]) {
      expect(c.reference_kl_enabled).toBe(true);
      expect(c.reference_kl_coef).toBe(0.1);
    }
    expect(parseMAGRPOConfig({ reference_devices: ['cuda:1', 'cuda:2'] }).reference_devices).toEqual(['cuda:1', 'cuda:2']);
    expect(() => parseMAGRPOConfig({ reference_kl_coef: -0.1 })).toThrow(/reference_kl_coef must be a finite number >= 0/);
    expect(() => parseMAGRPOConfig({ kl_mode: 'beta' })).toThrow(/kl_mode must be one of 'reward', 'loss'/);
  });

  it('off: no tracker, nothing measured', () => {
    expect(ReferenceKlTracker.of({ reference_kl_enabled: false, reference_kl_coef: 0.1, kl_mode: 'loss' }, [])).toBeNull();
  });
});

describe('CoLLM, kl_mode: loss', () => {
  it('the rollout keeps the reward and stores each action\'s reference log-probs', async () => {
    const agents = await tinyAgents(join(dir, 'collm-loss'), [
      { name: 'a0', arch: 'qwen3', seed: 51, words: [...toyWords] },
      { name: 'a1', arch: 'llama', seed: 52, words: [...toyWords] },
      { name: 'r0', arch: 'qwen3', seed: 53, words: [...toyWords] },
    ]);
    const [a0, a1, r0] = agents;
    const trainer = new CoLLMDCTrainer({
      agents: [{ ...a0, reference: r0.model }, a1],
      env: new ConstEnv(0.7),
      trainTasks: toyTasks(2, 'train'),
      config: { num_turns: 2, num_generations: 1, max_new_tokens: 3, use_separate_critic: false, early_termination_threshold: null, reference_kl_enabled: true, kl_mode: 'loss', eval_interval: 0 },
    });
    try {
      const trs = await trainer.rollout(toyTasks(1, 'train')[0]);
      expect(trs.map((t) => t.reward)).toEqual([0.7, 0.7]);
      for (const tr of trs) {
        const a = tr.agents[0];
        expect(a.referenceLogProbs).toEqual((await r0.model.tokenLogProbs([[...a.promptIds]], [[...a.completionIds]]))[0]);
        expect(a.referenceKl).toBeGreaterThan(0);
        // Agent 1's reference is a frozen copy of itself: KL 0 before any update.
        expect(tr.agents[1].referenceKl).toBe(0);
      }
    } finally {
      trainer.dispose();
      disposeAgents(agents);
    }
  });

  it("the actor's row carries β/|minibatch| and the stored reference log-probs; its objective adds β·Σ_t k3", () => {
    const step = { promptIds: [1, 2], completionIds: [3, 4], behaviourLogProb: -2, policyVersion: 0, referenceLogProbs: [-1.5, -0.5] };
    const row = actorRow(step, 0.7, 0, 4, 0.2);
    expect(row.klWeight).toBeCloseTo(0.05, 15);
    expect(row.refLogProbs).toEqual([-1.5, -0.5]);
    // Reward mode stores no reference log-probs: no term.
    expect(actorRow({ ...step, referenceLogProbs: undefined }, 0.7, 0, 4, 0.2).klWeight).toBeUndefined();
    // By hand: log p = (−1, −1), r = (−1.5, −0.5): k3 = (e^−0.5 + 0.5 − 1) + (e^0.5 − 0.5 − 1).
    const lp = tf.tensor2d([[-1, -1]]);
    const scores = { tokenLogProbs: lp, mask: tf.ones([1, 2]) as tf.Tensor2D };
    const withKl = actorObjective({ useRatio: false, clipRange: null })(tf.sum(lp, 1) as tf.Tensor1D, [row], scores);
    const plain = actorObjective({ useRatio: false, clipRange: null })(tf.sum(lp, 1) as tf.Tensor1D, [row]);
    const k = Math.exp(-0.5) - 0.5 + Math.exp(0.5) - 1.5;
    expect(plain.dataSync()[0]).toBeCloseTo(-(0.7 * -2) / 4, 6);
    expect(withKl.dataSync()[0] - plain.dataSync()[0]).toBeCloseTo(0.05 * k, 6);
    tf.dispose([lp, scores.mask, withKl, plain]);
  });
});

/** Constant joint reward every turn (multi-turn). */
class ConstEnv implements LLMDecPOMDP<ToyTask, { turn: number }> {
  readonly name = 'const';
  readonly numAgents = 2;
  readonly horizon = 2;
  constructor(private readonly reward: number) {}
  initialState(): { turn: number } {
    return { turn: 0 };
  }
  observe(s: { turn: number }, agent: number): string {
    return agent === 0 ? `cue ${toyWords[s.turn]}` : `partner ${toyWords[s.turn + 1]}`;
  }
  async step(s: { turn: number }): Promise<StepResult<{ turn: number }>> {
    return { reward: this.reward, next: { turn: s.turn + 1 }, done: s.turn + 1 >= this.horizon, info: {} };
  }
  globalInfo(s: { turn: number }): GlobalInfo {
    return { turn: s.turn, numTurns: this.horizon, lastReward: null, maxReward: 1 };
  }
}

// ---------------------------------------------------------------------------------------------
// Learning: a large coefficient pins the policy to its reference.
// ---------------------------------------------------------------------------------------------

/** Mean KL per completion at the end of a MAGRPO run on the toy task (from the logged `kl/mean`). */
async function finalKl(tag: string, coef: number, mode: 'reward' | 'loss', extra: Record<string, unknown> = {}): Promise<{ kl: number; reward: number }> {
  const kls: number[] = [];
  const rewards: number[] = [];
  await learningRun({
    dir: join(dir, `learn-${tag}`),
    agents: toyAgentPair(1, 2),
    trainer: (agents: Agent[]) =>
      new MAGRPOTrainer({
        agents,
        env: new ToyCoordEnv(),
        trainTasks: toyTrainTasks,
        evalTasks: toyTasks(16, 'eval'),
        config: {
          num_turns: 1,
          num_generations: 8,
          ...ONE_WORD_SAMPLING,
          agent_learning_rate: 3e-3,
          num_train_epochs: 12,
          eval_interval: 0,
          eval_num_samples: 16,
          eval_batch_size: 16,
          logging_steps: 8,
          seed: 0,
          reference_kl_enabled: true,
          reference_kl_coef: coef,
          kl_mode: mode,
          ...extra,
        },
        logger: {
          log: (_s, m) => {
            if (m['agent_0/turn_1/kl/mean'] !== undefined) kls.push((m['agent_0/turn_1/kl/mean'] + (m['agent_1/turn_1/kl/mean'] ?? NaN)) / 2);
            if (m['eval/turn_1/mean_reward'] !== undefined) rewards.push(m['eval/turn_1/mean_reward']);
          },
        },
      }),
    afterTrain: (trainer) => trainer.evaluate(),
  });
  // A log every 8 env steps, i.e. every item (8 joint actions each), from its tree: the last epoch.
  const tail = kls.slice(-16);
  return { kl: tail.reduce((a, b) => a + b, 0) / tail.length, reward: rewards[rewards.length - 1] };
}

// Measured on wasm, 12 epochs (mean KL per completion over the last epoch's items, eval reward):
//   kl_mode reward, β 5: seed 0 0.323 (0.02), seed 1 0.183 (0.05)
//   kl_mode loss, β 5:   seed 0 0.012 (0.00)
//   β 0 (mutation):      seed 0 2.41 (0.91), seed 1 2.55 (0.83): it learns the task, far from its reference.
// The reward form pulls less tightly than the loss form: k3 as a sampled penalty only ranks the
// group's completions (z-scored), while the loss form differentiates k3 itself.
const PINNED = { reward: 0.6, loss: 0.05 } as const;
const FREE = 1.2;

test.each([
  ['reward', 0],
  ['reward', 1],
  ['loss', 0],
] as const)('a large coefficient pins the policy to its reference (kl_mode %s, seed %i)', async (mode, seed) => {
  const { kl, reward } = await finalKl(`pinned-${mode}-${seed}`, 5, mode, { seed });
  console.log(`toy MAGRPO, kl_mode ${mode}, β 5, seed ${seed}: final mean KL ${kl.toFixed(4)}, eval reward ${reward.toFixed(2)}`);
  expect(kl).toBeLessThan(PINNED[mode]);
});

test.each([0, 1])('mutation: coefficient 0 (no penalty) lets the policy move far from its reference (seed %i)', async (seed) => {
  const { kl, reward } = await finalKl(`free-${seed}`, 0, 'reward', { seed });
  console.log(`toy MAGRPO, β 0, seed ${seed}: final mean KL ${kl.toFixed(4)}, eval reward ${reward.toFixed(2)}`);
  expect(kl).toBeGreaterThan(FREE);
  expect(FREE).toBeGreaterThan(Math.max(PINNED.reward, PINNED.loss));
});

// ---------------------------------------------------------------------------------------------
// Runs through `comlrl train`: checkpoints and exact resume, the config hash, model.reference_model.
// ---------------------------------------------------------------------------------------------

describe('comlrl train with reference KL', () => {
  let root: string;
  let agentDirs: string[];
  let criticDirs: string[];
  let refDir: string;

  beforeAll(async () => {
    root = join(dir, 'cli');
    agentDirs = await tinyModels(root, ['a0', 'a1']);
    criticDirs = await tinyModels(root, ['critic'], 9);
    [refDir] = await tinyModels(root, ['ref'], 7);
  });

  async function train(name: string, yaml: string, extra: string[] = []): Promise<string> {
    const out = join(root, name);
    const file = join(root, `${name}.yaml`);
    await writeFile(file, yaml.replaceAll('OUT_DIR', out));
    const r = await cli(['train', '--config', file, ...extra]);
    expect(r.code, r.err).toBe(0);
    return out;
  }

  /** Logged values without timing and memory (which differ run to run). */
  function rows(runDir: string): Record<string, unknown>[] {
    return readMetrics(join(runDir, 'metrics.jsonl'))
      .filter((r) => !('run/backend' in r))
      .map((r) => Object.fromEntries(Object.entries(r).filter(([k]) => !k.startsWith('perf/') && !k.startsWith('time/') && !k.endsWith('time_s'))));
  }

  const cases = [
    { name: 'magrpo-reward', trainer: 'magrpo', section: { rollout_buffer_size: 3, train_batch_size: 2, num_generations: 3, reference_kl_enabled: true, reference_kl_coef: 0.5 } },
    { name: 'magrpo-loss', trainer: 'magrpo', section: { rollout_buffer_size: 3, train_batch_size: 2, num_generations: 3, reference_kl_enabled: true, reference_kl_coef: 0.5, kl_mode: 'loss' } },
    { name: 'collm-cc-reward', trainer: 'collm_cc', section: { reference_kl_enabled: true, reference_kl_coef: 0.5 } },
    // The shared-head step (actor and value head in one loss) with the KL loss term.
    { name: 'collm-dc-loss', trainer: 'collm_dc', section: { use_separate_critic: false, reference_kl_enabled: true, reference_kl_coef: 0.5, kl_mode: 'loss' } },
    { name: 'magrpo-lora-reward', trainer: 'magrpo', lora: true, section: { rollout_buffer_size: 3, train_batch_size: 2, num_generations: 3, reference_kl_enabled: true, reference_kl_coef: 0.5, agent_learning_rate: 0.05 } },
  ] as const;

  test.each(cases)('$name (full fine-tuning: a frozen copy of the starting model; LoRA: the base, adapter off): resumed equals uninterrupted', async (c) => {
    const { name, trainer, section } = c;
    const lora = 'lora' in c;
    let yaml = toyConfigYaml({ agents: agentDirs, ...(trainer === 'collm_cc' ? { critics: criticDirs } : {}), trainer, out: 'OUT_DIR', trainItems: 5, section });
    if (lora) yaml = yaml.replace('model:\n', 'model:\n  lora: { r: 4, lora_alpha: 8, target_modules: all-linear }\n');
    const straight = await train(`${name}-straight`, yaml);
    const stopped = await train(`${name}-stopped`, yaml, ['--stop-after', '4']);
    const r = await cli(['train', '--resume', stopped]);
    expect(r.code, r.err).toBe(0);
    const weights = lora ? 'adapter_model.safetensors' : 'model.safetensors';
    for (const f of [`agent_0/${weights}`, `agent_1/${weights}`]) {
      const a = await readFile(join(straight, 'final', f));
      const b = await readFile(join(stopped, 'final', f));
      expect(b.equals(a), f).toBe(true);
    }
    const logged = rows(straight);
    expect(rows(stopped)).toEqual(logged);
    // The KL was measured, and it grew from 0 (the policy starts at its reference).
    const kls = logged.flatMap((m) => (typeof m['agent_0/turn_1/kl/mean'] === 'number' ? [m['agent_0/turn_1/kl/mean']] : []));
    expect(kls.length).toBeGreaterThan(1);
    expect(Math.max(...kls)).toBeGreaterThan(0);
  });

  test('model.reference_model is the reference; KL settings at their defaults leave the config hash as before', async () => {
    const base = toyConfigYaml({ agents: agentDirs, out: join(root, 'hash'), trainItems: 2 });
    const file = join(root, 'hash.yaml');
    await writeFile(file, base);
    const plain = runConfigHash(loadConfig(file, []));
    const defaults = ['magrpo.reference_kl_enabled=false', 'magrpo.reference_kl_coef=0.1', 'magrpo.kl_mode=reward', 'magrpo.reference_devices=null'];
    expect(runConfigHash(loadConfig(file, defaults))).toBe(plain);
    expect(runConfigHash(loadConfig(file, ['magrpo.reference_kl_enabled=true']))).not.toBe(plain);
    expect(runConfigHash(loadConfig(file, ['magrpo.reference_kl_coef=0.2']))).not.toBe(plain);

    // A reference other than the starting model: the KL is positive from the first item on.
    const out = await train('explicit-ref', toyConfigYaml({ agents: agentDirs, out: 'OUT_DIR', trainItems: 2, section: { reference_kl_enabled: true } }).replace('model:\n', `model:\n  reference_model: ${refDir}\n`));
    const first = rows(out).find((m) => typeof m['agent_0/turn_1/kl/mean'] === 'number');
    expect(first?.['agent_0/turn_1/kl/mean']).toBeGreaterThan(0.01);
  });
});
