/**
 * MADPO: its config under CoMLRL 1.4's names, pair selection on hand cases for each mode, the joint
 * DPO loss on a hand-computed case, each agent's gradient through its own log-probs only (against
 * autodiff of the joint loss), and on tiny checkpoints a flat tensor count, its metrics and an exact
 * resume with pairs still buffered.
 */
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { initBackend } from '../src/backend/init.js';
import { parseRunConfig } from '../src/config/schema.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { loadCausalLM } from '../src/model/load.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { createRng } from '../src/util/rng.js';
import { ToyCoordEnv, toyTrainTasks, toyWords } from '../envs/toy/index.js';
import '../envs/tasks.js';
import {
  agentDpoRows,
  agentMargins,
  dpoStats,
  getTrainer,
  linearPolicyLoss,
  MADPOTrainer,
  negLogSigmoid,
  parseMADPOConfig,
  parseMARLHFConfig,
  scoredCompletionIds,
  parseMAGRPOConfig,
  selectPreferencePairs,
  sequenceLossGradients,
  type MADPOConfigInput,
  type PreferencePair,
} from '../trainers/index.js';
import { disposeAgents, tempDir, tinyAgents } from './magrpo-helpers.js';

describe('config', () => {
  test("CoMLRL's MADPOConfig fields and defaults on MAGRPO's", () => {
    const c = parseMADPOConfig();
    // comlrl's own switch (CoMLRL: false), kept out of the comparison with MAGRPO's fields.
    expect(c.score_last_token).toBe(true);
    expect(c).toMatchObject({
      num_turns: 1,
      joint_mode: 'aligned',
      preference_num_candidates: null,
      preference_pairs_per_sample: 16,
      pair_selection: 'reward_gap',
      dpo_beta: 0.1,
      use_environment_step: true,
      environment_steps_per_pair: 2,
    });
    const { num_turns: _t, ...magrpo } = parseMAGRPOConfig();
    expect(c).toMatchObject(magrpo);
    expect(parseMADPOConfig({ preference_pairs_per_sample: null }).preference_pairs_per_sample).toBeNull();
  });

  test("CoMLRL's constraints, each named", () => {
    expect(() => parseMADPOConfig({ num_turns: 2 })).toThrow(/num_turns must be 1: MADPO is single-turn/);
    expect(() => parseMADPOConfig({ joint_mode: 'cross' } as unknown as MADPOConfigInput)).toThrow(/joint_mode must be one of 'aligned'/);
    expect(() => parseMADPOConfig({ preference_num_candidates: 1 })).toThrow(/preference_num_candidates must be an integer >= 2/);
    expect(() => parseMADPOConfig({ preference_pairs_per_sample: 0 })).toThrow(/preference_pairs_per_sample must be an integer >= 1/);
    expect(() => parseMADPOConfig({ dpo_beta: 0 })).toThrow(/dpo_beta must be a finite number > 0/);
    expect(() => parseMADPOConfig({ environment_steps_per_pair: 0 })).toThrow(/environment_steps_per_pair must be an integer >= 1/);
    expect(() => parseMADPOConfig({ pair_selection: 'best' } as unknown as MADPOConfigInput)).toThrow(/pair_selection must be one of 'reward_gap', 'all', 'random'/);
    expect(() => parseMADPOConfig({ reference_kl_enabled: true })).toThrow(/reference_kl_enabled must be false for MADPO/);
  });

  test('a run config selects it by its section `madpo:`', () => {
    const config = parseRunConfig({ model: { agent_model: '/m' }, dataset: { task: 'toy-coord' }, madpo: { dpo_beta: 0.5 } });
    expect(config.trainer).toBe('madpo');
    expect(config.trainerConfig).toMatchObject({ dpo_beta: 0.5, num_turns: 1 });
    expect(getTrainer('madpo').section).toBe('madpo');
  });
});

describe('pair selection (hand cases)', () => {
  // Rewards of K = 4 joint candidates. The ordered pairs (winner, loser) with a positive gap,
  // enumerated winner-major: (0,2) gap 0.5; (1,0) 0.5; (1,2) 1; (3,0) 0.5; (3,2) 1. Candidates 1
  // and 3 tie (reward 1): no pair between them.
  const rewards = [0.5, 1, 0, 1];
  const pairs = (mode: 'reward_gap' | 'all' | 'random', limit: number | null, seed = 'x') =>
    selectPreferencePairs(rewards, mode, limit, createRng(seed)).map((p) => [p.winner, p.loser]);

  test("'all': every pair with a gap, in enumeration order, never cut (as CoMLRL)", () => {
    expect(pairs('all', null)).toEqual([[0, 2], [1, 0], [1, 2], [3, 0], [3, 2]]);
    expect(pairs('all', 2)).toEqual(pairs('all', null));
  });

  test("`pair_selection: all` with a pair cap (its default 16 included) is refused naming both keys, as CoMLRL's config refuses it", () => {
    for (const parse of [parseMADPOConfig, parseMARLHFConfig] as const) {
      expect(() => parse({ pair_selection: 'all' })).toThrow(/preference_pairs_per_sample must be null when pair_selection is 'all'.*it is 16/);
      expect(() => parse({ pair_selection: 'all', preference_pairs_per_sample: 4 })).toThrow(/set preference_pairs_per_sample: null, or pair_selection: reward_gap or random/);
      expect(parse({ pair_selection: 'all', preference_pairs_per_sample: null })).toMatchObject({ pair_selection: 'all', preference_pairs_per_sample: null });
    }
  });

  test("'reward_gap': largest gaps first, ties in enumeration order, cut to the limit", () => {
    expect(pairs('reward_gap', null)).toEqual([[1, 2], [3, 2], [0, 2], [1, 0], [3, 0]]);
    expect(pairs('reward_gap', 3)).toEqual([[1, 2], [3, 2], [0, 2]]);
    expect(selectPreferencePairs(rewards, 'reward_gap', 1, createRng('x'))[0].gap).toBe(1);
  });

  test("'random': a seeded permutation of the same pairs, cut to the limit", () => {
    const all = pairs('random', null, 'a');
    expect([...all].sort()).toEqual(pairs('all', null).sort());
    expect(pairs('random', null, 'a')).toEqual(all);
    expect(pairs('random', 2, 'a')).toEqual(all.slice(0, 2));
    // Some seed orders them otherwise than enumeration order.
    expect(['a', 'b', 'c', 'd'].some((s) => JSON.stringify(pairs('random', null, s)) !== JSON.stringify(pairs('all', null)))).toBe(true);
  });

  test('equal rewards make no pair (and draw nothing from the stream)', () => {
    const rng = createRng('tie');
    const before = JSON.stringify(rng.state());
    for (const mode of ['reward_gap', 'all', 'random'] as const) expect(selectPreferencePairs([0.25, 0.25, 0.25], mode, null, rng)).toEqual([]);
    expect(JSON.stringify(rng.state())).toBe(before);
  });
});

/** A pair of two agents with one-token completions (ids only matter for the model tests). */
function pair(refWinner: number[], refLoser: number[], ids: { prompt: number[]; winner: number[][]; loser: number[][] } = { prompt: [1], winner: [[2], [2]], loser: [[3], [3]] }): PreferencePair {
  return {
    promptIds: [ids.prompt, ids.prompt],
    winnerIds: ids.winner,
    loserIds: ids.loser,
    refWinner,
    refLoser,
    winnerReward: 1,
    loserReward: 0,
    candidateRewardMean: 0.5,
  };
}

describe('the joint DPO loss (hand-computed)', () => {
  // β = 0.5, two agents, two pairs. Δ_{p,i} = (log π_i(w) − log π_ref,i(w)) − (log π_i(l) − log π_ref,i(l)).
  // Pair 1: agent 0: (−2 − (−2.5)) − (−3 − (−2.5)) = 0.5 − (−0.5) = 1
  //         agent 1: (−1 − (−1))   − (−1.5 − (−2)) = 0 − 0.5      = −0.5
  //         z_1 = β (1 − 0.5) = 0.25, loss_1 = log(1 + e^{−0.25}) = 0.5759394198788436
  // Pair 2: agent 0: (−1 − (−1.25)) − (−2 − (−1.75)) = 0.25 − (−0.25) = 0.5
  //         agent 1: (−4 − (−4))    − (−3 − (−3.5))  = 0 − 0.5        = −0.5
  //         z_2 = 0, loss_2 = log 2
  // loss = (0.5759394198788436 + 0.6931471805599453) / 2 = 0.6345433002193944
  // accuracy (implicit rewards rank the winner first, z > 0) = 1/2.
  // Agent 0's row weights β σ(−z_p) / P: pair 1: 0.5 · σ(−0.25) / 2 = 0.5 · 0.43782349911420193 / 2
  // = 0.10945587477855048 (winner), its negative (loser); pair 2: 0.5 · 0.5 / 2 = 0.125, −0.125.
  const pairs = [pair([-2.5, -1], [-2.5, -2]), pair([-1.25, -4], [-1.75, -3.5])];
  const logProbs = [
    { winner: [-2, -1], loser: [-3, -1.5] },
    { winner: [-1, -4], loser: [-2, -3] },
  ];
  const beta = 0.5;

  test('margins, loss, accuracy', () => {
    const margins = pairs.map((p, i) => agentMargins(p, logProbs[i]));
    expect(margins[0][0]).toBeCloseTo(1, 12);
    expect(margins[0][1]).toBeCloseTo(-0.5, 12);
    expect(margins[1][0]).toBe(0.5);
    expect(margins[1][1]).toBe(-0.5);
    const s = dpoStats(margins, beta);
    expect(s.z[0]).toBeCloseTo(0.25, 12);
    expect(s.z[1]).toBe(0);
    expect(s.loss).toBeCloseTo(0.6345433002193944, 12);
    expect(s.accuracy).toBe(0.5);
  });

  test("each agent's rows: ±β σ(−z_p)/P on its own winner and loser, the derivative of the joint loss in its log-probs", () => {
    const margins = pairs.map((p, i) => agentMargins(p, logProbs[i]));
    const { z } = dpoStats(margins, beta);
    const rows = agentDpoRows(pairs, z, 0, beta);
    expect(rows.map((r) => r.coef)).toEqual([0.10945587477855048, -0.10945587477855048, 0.125, -0.125].map((v) => expect.closeTo(v, 12)));
    expect(rows.map((r) => r.completionIds)).toEqual([[2], [3], [2], [3]]);
    // Finite differences of the joint loss in agent 1's log-prob of pair 1's winner: −coef of that row.
    const loss = (lp: number) => {
      const moved = [{ ...logProbs[0], winner: [logProbs[0].winner[0], lp] }, logProbs[1]];
      return dpoStats(pairs.map((p, i) => agentMargins(p, moved[i])), beta).loss;
    };
    const h = 1e-6;
    const derivative = (loss(-1 + h) - loss(-1 - h)) / (2 * h);
    expect(derivative).toBeCloseTo(-agentDpoRows(pairs, z, 1, beta)[0].coef, 8);
    expect(negLogSigmoid(-800)).toBeCloseTo(800, 9);
    expect(negLogSigmoid(800)).toBe(0);
  });
});

/**
 * The toy task with every joint action's reward spread by its text (a random tiny policy rarely says
 * an answer, and the toy's few reward levels would tie): most candidates then differ, so items
 * make pairs.
 */
class GradedToyEnv extends ToyCoordEnv {
  override async step(state: Parameters<ToyCoordEnv['step']>[0], joint: readonly string[]) {
    const r = await super.step(state, joint);
    const text = joint.join('|');
    let h = 0;
    for (let i = 0; i < text.length; i++) h = (h * 31 + text.charCodeAt(i)) % 1009;
    return { ...r, reward: r.reward + h / 1009 };
  }
}

/** Small, fast settings: two-token completions, no eval, every item logged. */
const FAST: MADPOConfigInput = {
  max_new_tokens: 2,
  temperature: 1,
  top_p: 1,
  top_k: 0,
  eval_interval: 0,
  logging_steps: 1,
  num_generations: 3,
  num_train_epochs: 2,
  rollout_buffer_size: 5,
  train_batch_size: 2,
  agent_learning_rate: 1e-2,
  dpo_beta: 0.5,
  seed: 7,
};

describe('with tiny checkpoints', () => {
  let dir: string;
  let cleanup: () => Promise<void>;

  const specs = (name: string) => [
    { name: `${name}-a`, arch: 'qwen3' as const, seed: 11, words: [...toyWords] },
    { name: `${name}-b`, arch: 'qwen3' as const, seed: 12, words: [...toyWords] },
  ];
  /** Fresh agents, each with its starting weights loaded again as its reference (what the CLI gives full fine-tuning). */
  const withReferences = async (name: string): Promise<Agent[]> => {
    const agents = await tinyAgents(dir, specs(name));
    const out: Agent[] = [];
    for (const [i, a] of agents.entries()) out.push({ ...a, reference: await loadCausalLM(`${dir}/${specs(name)[i].name}`) });
    return out;
  };
  const disposeAll = (agents: readonly Agent[]) => {
    disposeAgents(agents);
    for (const a of agents) a.reference?.dispose();
  };

  beforeAll(async () => {
    await initBackend('wasm');
    ({ dir, cleanup } = await tempDir('madpo'));
  });
  afterAll(async () => cleanup());

  test("agent 0's step is autodiff of the joint loss in agent 0's weights, agent 1's margins held constant", async () => {
    const agents = await tinyAgents(dir, specs('grad'));
    const trainer = new MADPOTrainer({ agents, env: new ToyCoordEnv(), trainTasks: toyTrainTasks, config: { ...FAST, dpo_beta: 0.7 } });
    const [w, l, w2, l2] = ['red', 'blue', 'green', 'gold'].map((t) => agents[0].tokenizer.encode(t));
    const prompt = agents[0].tokenizer.encode('cue red');
    const pairs = [
      pair([-3, -2], [-2.5, -3.5], { prompt, winner: [w, l2], loser: [l, w2] }),
      pair([-1, -4], [-2, -1], { prompt, winner: [w2, w], loser: [l2, l] }),
    ];
    const lps = await trainer.pairLogProbs(pairs);
    const margins = pairs.map((p, i) => agentMargins(p, lps[i]));
    const { z } = dpoStats(margins, 0.7);
    const model = agents[0].model;
    const got = sequenceLossGradients(model, agentDpoRows(pairs, z, 0, 0.7), linearPolicyLoss);
    // The joint loss as a function of agent 0's weights only: agent 1's margins are numbers.
    const want = tf.variableGrads(() =>
      tf.tidy(() => {
        const prompts = pairs.flatMap((p) => [p.promptIds[0], p.promptIds[0]]);
        const completions = pairs.flatMap((p) => [p.winnerIds[0], p.loserIds[0]]);
        const seq = tf.sum(model.scoreCompletions(prompts, completions).tokenLogProbs, 1);
        // Row r of seq as a scalar (a one-hot sum: wasm has no gather gradient).
        const row = (r: number) => tf.sum(tf.mul(seq, tf.oneHot(r, completions.length).toFloat()));
        const losses = pairs.map((p, i) => {
          const own = tf.sub(tf.sub(row(2 * i), p.refWinner[0]), tf.sub(row(2 * i + 1), p.refLoser[0]));
          const joint = tf.add(own, margins[i][1]);
          return tf.softplus(tf.neg(tf.mul(joint, 0.7)));
        });
        return tf.div(tf.addN(losses), losses.length) as tf.Scalar;
      }),
      model.trainableVariables(),
    );
    expect(want.value.dataSync()[0]).toBeCloseTo(dpoStats(margins, 0.7).loss, 5);
    let compared = 0;
    for (const v of model.trainableVariables()) {
      const a = got.grads[v.name].dataSync();
      const b = want.grads[v.name].dataSync();
      const scale = Math.max(1e-3, ...Array.from(b, Math.abs));
      for (let j = 0; j < a.length; j++) expect(Math.abs(a[j] - b[j]) / scale).toBeLessThan(1e-4);
      compared += a.length;
    }
    expect(compared).toBeGreaterThan(1000);
    tf.dispose([got.grads, want.grads, want.value]);
    trainer.dispose();
    disposeAgents(agents);
  });

  test('a flat tensor count, its metrics, exact resume with pairs buffered, its own state tag', async () => {
    const tasks = toyTrainTasks.slice(0, 5);
    const weights = (as: readonly Agent[]) => as.map((a) => a.model.trainableVariables().map((v) => Array.from(v.dataSync())));

    const straightAgents = await withReferences('straight');
    const logged: Record<string, number>[] = [];
    const straight = new MADPOTrainer({ agents: straightAgents, env: new GradedToyEnv(), trainTasks: tasks, config: FAST, logger: { log: (_s, m) => void logged.push(m) } });
    expect(straight.references.map((r) => r.kind)).toEqual(['given', 'given']);
    await straight.train({ maxItems: 3 });
    expect(straight.updateSteps).toBeGreaterThan(0); // the Adam moments exist
    const n0 = tf.memory().numTensors;
    await straight.train();
    // The rest of the run leaves no tensor behind.
    expect(tf.memory().numTensors).toBe(n0);
    const train = logged.filter((m) => 'turn_1/reward_mean' in m);
    // env_step advances with the pairs trained on (CoMLRL's use_environment_step), so an item logs
    // (logging_steps 1) when an update came since the last log: most of the 10 items here.
    expect(train.length).toBeGreaterThanOrEqual(5);
    expect(train.length).toBeLessThanOrEqual(10);
    for (const key of ['turn_1/expected_return', 'turn_1/zero_reward_spread_frac', 'agent_0/loss', 'agent_1/grad_norm', 'loss', 'rewards/chosen', 'rewards/rejected', 'rewards/margins', 'rewards/accuracies', 'logps/chosen', 'dpo/num_pairs', 'tokens_generated', 'time/training_s']) {
      expect(train.some((m) => key in m), key).toBe(true);
    }
    for (const m of train.filter((r) => 'rewards/margins' in r)) {
      expect(m['rewards/margins']).toBeCloseTo(m['rewards/chosen'] - m['rewards/rejected'], 9);
      expect(m['rewards/accuracies']).toBeGreaterThanOrEqual(0);
      expect(m['rewards/accuracies']).toBeLessThanOrEqual(1);
    }
    expect(logged.some((m) => 'turn_1/epoch_reward_mean' in m)).toBe(true);
    // CoMLRL's env_step: environment_steps_per_pair (2) per pair trained on.
    expect(straight.envSteps % 2).toBe(0);
    expect(straight.envSteps).toBeGreaterThan(0);

    const firstAgents = await withReferences('first');
    const first = new MADPOTrainer({ agents: firstAgents, env: new GradedToyEnv(), trainTasks: tasks, config: FAST });
    await first.train({ maxItems: 4 });
    const state = structuredClone(first.exportState());
    expect(state.trainer).toBe('madpo');
    expect(state.extra.buffer.length).toBeGreaterThan(0); // cut with pairs waiting for an update
    const saved = `${dir}/madpo-ckpt`;
    await first.save(saved);
    first.dispose();
    disposeAll(firstAgents);

    const resumedAgents: Agent[] = [];
    for (let i = 0; i < 2; i++) {
      resumedAgents.push({
        name: `r${i}`,
        model: await loadCausalLM(`${saved}/agent_${i}`),
        tokenizer: await loadTokenizer(`${saved}/agent_${i}`),
        chat: false,
        reference: await loadCausalLM(`${dir}/${specs('first')[i].name}`),
      });
    }
    const resumed = new MADPOTrainer({ agents: resumedAgents, env: new GradedToyEnv(), trainTasks: tasks, config: FAST });
    resumed.importState(state);
    await resumed.train();
    expect(resumed.envSteps).toBe(straight.envSteps);
    expect(resumed.updateSteps).toBe(straight.updateSteps);
    expect(weights(resumedAgents)).toEqual(weights(straightAgents));
    // A checkpoint of another trainer (here MAGRPO's) is refused.
    expect(() => resumed.importState({ ...state, trainer: 'magrpo' })).toThrow(/from trainer 'magrpo', this is 'madpo'/);

    straight.dispose();
    resumed.dispose();
    disposeAll(straightAgents);
    disposeAll(resumedAgents);
  });

  test('without a given reference, full fine-tuning agents get a frozen copy of their starting weights', async () => {
    const agents = await tinyAgents(dir, specs('copy'));
    const trainer = new MADPOTrainer({ agents, env: new GradedToyEnv(), trainTasks: toyTrainTasks.slice(0, 2), config: { ...FAST, num_train_epochs: 1, use_environment_step: false } });
    expect(trainer.references.map((r) => r.kind)).toEqual(['frozen-copy', 'frozen-copy']);
    const prompt = [agents[0].tokenizer.encode('cue red')];
    const completion = [agents[0].tokenizer.encode('red')];
    const before = await trainer.references[0].tokenLogProbs(prompt, completion);
    await trainer.train();
    expect(trainer.updateSteps).toBeGreaterThan(0);
    // The policy moved, its reference did not.
    expect(await agents[0].model.tokenLogProbs(prompt, completion)).not.toEqual(before);
    expect(await trainer.references[0].tokenLogProbs(prompt, completion)).toEqual(before);
    // use_environment_step false: env_step counts the K joint candidates scored per item.
    expect(trainer.envSteps).toBe(2 * 3);
    trainer.dispose();
    disposeAgents(agents);
  });

  test("score_last_token: false scores CoMLRL's tokens: each completion cut at its first pad, its last token left out", async () => {
    // Hand cases (pad id 0): cut at the first pad, then the last remaining token dropped.
    expect(scoredCompletionIds([5, 6, 7], 0, true)).toEqual([5, 6, 7]);
    expect(scoredCompletionIds([5, 6, 7], 0, false)).toEqual([5, 6]);
    expect(scoredCompletionIds([5, 6, 0, 0], 0, false)).toEqual([5]);
    expect(scoredCompletionIds([5], 0, false)).toEqual([]);
    // The same seeded rollout under both settings: the same candidates, CoMLRL's scoring drops the last token.
    const agents = await withReferences('scored');
    const config = { ...FAST, max_new_tokens: 3 };
    const all = new MADPOTrainer({ agents, env: new GradedToyEnv(), trainTasks: toyTrainTasks, config });
    const cut = new MADPOTrainer({ agents, env: new GradedToyEnv(), trainTasks: toyTrainTasks, config: { ...config, score_last_token: false } });
    const a = await all.preferencePairs(toyTrainTasks[0]);
    const c = await cut.preferencePairs(toyTrainTasks[0]);
    expect(c.rewards).toEqual(a.rewards);
    expect(a.pairs.length).toBeGreaterThan(0);
    for (const [p, pair] of a.pairs.entries()) {
      for (let i = 0; i < agents.length; i++) {
        const pad = agents[i].tokenizer.padTokenId;
        for (const side of ['winner', 'loser'] as const) {
          const full = side === 'winner' ? pair.winnerIds[i] : pair.loserIds[i];
          const kept = full.includes(pad) ? full.slice(0, full.indexOf(pad)) : full;
          const expected = kept.slice(0, -1);
          expect(side === 'winner' ? c.pairs[p].winnerIds[i] : c.pairs[p].loserIds[i]).toEqual(expected);
          // The reference's sum is over those tokens only: the full completion's per-token log-probs, first |expected| of them.
          const perToken = (await agents[i].reference!.tokenLogProbs([pair.promptIds[i]], [full]))[0];
          const want = perToken.slice(0, expected.length).reduce((x, y) => x + y, 0);
          expect(side === 'winner' ? c.pairs[p].refWinner[i] : c.pairs[p].refLoser[i]).toBeCloseTo(want, 5);
        }
      }
    }
    all.dispose();
    cut.dispose();
    disposeAll(agents);
  });

  test('the trainer names itself in its errors', async () => {
    const own = await tinyAgents(dir, specs('names'));
    expect(() => new MADPOTrainer({ agents: own.slice(0, 1), env: new ToyCoordEnv(), trainTasks: toyTrainTasks, config: FAST })).toThrow(/^MADPOTrainer: env 'toy-coord' has 2 agents but 1 agents were given/);
    disposeAgents(own);
  });
});
