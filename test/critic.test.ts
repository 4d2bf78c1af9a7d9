/**
 * Critic heads (init, registry, save/load), the value read-out at the last token, the critic input
 * layouts (checked as text and on token ids), and the value loss with clipping.
 */
import * as fs from 'node:fs';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import {
  centralizedCriticIds,
  centralizedCriticText,
  createCriticHead,
  createLinearHead,
  CRITIC_LAYOUT_WORDS,
  criticWordsOf,
  decentralizedCriticIds,
  formatCriticNumber,
  formatGlobalInfo,
  globalInfoPrefixIds,
  headSpecFromHiddenDim,
  HEAD_CONFIG_FILE,
  HEAD_WEIGHTS_FILE,
  listCriticHeads,
  loadCriticHead,
  readHiddenAt,
  registerCriticHead,
  saveCriticHead,
  sharedHeadIds,
  ValueModel,
  valueLoss,
  type CriticLM,
} from '../src/critic/index.js';
import type { GlobalInfo } from '../src/decpomdp/types.js';
import { createRng, rngFor } from '../src/util/rng.js';
import { tinyCritic } from './collm-helpers.js';
import { tempDir } from './magrpo-helpers.js';

const WORDS = ['cue', 'red', 'blue', 'partner', 'apple', 'sky', 'alpha', 'beta', 'gamma', 'delta'];

let dir: string;
let cleanup: () => Promise<void>;
let lm: CriticLM;

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend('wasm');
  ({ dir, cleanup } = await tempDir('critic'));
  lm = await tinyCritic(dir, 'critic', 3, WORDS);
});
afterAll(async () => {
  lm.model.dispose();
  await cleanup();
});

describe('value heads', () => {
  it('linear head: weights are the seeded stream × 0.02, bias 0, output w·h + b', () => {
    const head = createCriticHead(4, { type: 'linear' }, rngFor(5, 'init'));
    const [w, b] = head.trainableVariables();
    expect(w.shape).toEqual([1, 4]);
    const expected = createRng('5:init');
    const draws = Array.from({ length: 4 }, () => expected.normal() * 0.02);
    Array.from(w.dataSync()).forEach((x, i) => expect(x).toBeCloseTo(draws[i], 7));
    expect(Array.from(b.dataSync())).toEqual([0]);
    // v = Σ w_i h_i + 0 for h = [1, 2, 3, 4]
    const v = tf.tidy(() => head.apply(tf.tensor2d([[1, 2, 3, 4]])).dataSync()[0]);
    expect(v).toBeCloseTo(draws[0] + 2 * draws[1] + 3 * draws[2] + 4 * draws[3], 6);
    expect(head.weightNames()).toEqual(['summary.weight', 'summary.bias']);
    head.dispose();
  });

  it('mlp head: h → d → tanh → 1 with N(0, 0.02) weights and zero biases', () => {
    const head = createCriticHead(6, headSpecFromHiddenDim(3), rngFor(1, 'init'));
    expect(head.spec).toEqual({ type: 'mlp', hiddenDim: 3 });
    const [w1, b1, w2, b2] = head.trainableVariables();
    expect([w1.shape, b1.shape, w2.shape, b2.shape]).toEqual([[3, 6], [3], [1, 3], [1]]);
    expect(Array.from(b1.dataSync())).toEqual([0, 0, 0]);
    // Sample std of 18 + 3 draws of N(0, 0.02): loosely 0.02.
    const all = [...w1.dataSync(), ...w2.dataSync()];
    const std = Math.sqrt(all.reduce((a, x) => a + x * x, 0) / all.length);
    expect(std).toBeGreaterThan(0.01);
    expect(std).toBeLessThan(0.035);
    // Hand check on h: v = w2 · tanh(w1 h) (biases 0).
    const h = [0.5, -1, 2, 0, 1, -0.5];
    const W1 = Array.from(w1.dataSync());
    const W2 = Array.from(w2.dataSync());
    const z = [0, 1, 2].map((r) => Math.tanh(h.reduce((a, x, c) => a + W1[r * 6 + c] * x, 0)));
    const want = z.reduce((a, x, r) => a + W2[r] * x, 0);
    const got = tf.tidy(() => head.apply(tf.tensor2d([h])).dataSync()[0]);
    expect(got).toBeCloseTo(want, 7);
    head.dispose();
  });

  it('CoMLRL hidden-dim rule: null/0 → linear, d > 0 → mlp', () => {
    expect(headSpecFromHiddenDim(null)).toEqual({ type: 'linear' });
    expect(headSpecFromHiddenDim(0)).toEqual({ type: 'linear' });
    expect(headSpecFromHiddenDim(16)).toEqual({ type: 'mlp', hiddenDim: 16 });
  });

  it('registry: a user head is created by name; unknown names and built-in overrides are refused', () => {
    registerCriticHead('scaled-linear', (inputSize, spec, rng) => {
      const inner = createLinearHead(inputSize, spec, rng);
      const scale = Number(spec.options?.scale ?? 1);
      return { ...inner, spec, apply: (h) => tf.tidy(() => tf.mul(inner.apply(h), scale)) };
    });
    expect(listCriticHeads()).toEqual(expect.arrayContaining(['linear', 'mlp', 'scaled-linear']));
    const head = createCriticHead(2, { type: 'scaled-linear', options: { scale: 10 } }, rngFor(2, 'init'));
    const ref = createCriticHead(2, { type: 'linear' }, rngFor(2, 'init'));
    const x = tf.tensor2d([[1, -1]]);
    expect(tf.tidy(() => head.apply(x).dataSync()[0])).toBeCloseTo(10 * tf.tidy(() => ref.apply(x).dataSync()[0]), 6);
    x.dispose();
    head.dispose();
    ref.dispose();
    expect(() => createCriticHead(2, { type: 'nope' }, rngFor(0, 'init'))).toThrow(/unknown value head type 'nope'.*registerCriticHead/);
    expect(() => registerCriticHead('linear', createLinearHead)).toThrow(/built-in/);
    expect(() => createCriticHead(2, { type: 'mlp' }, rngFor(0, 'init'))).toThrow(/hiddenDim/);
  });

  it('save → load round-trips the weights and spec exactly', async () => {
    const head = createCriticHead(5, { type: 'mlp', hiddenDim: 4 }, rngFor(7, 'init'));
    const d = `${dir}/head`;
    await saveCriticHead(head, d);
    expect(fs.existsSync(`${d}/${HEAD_WEIGHTS_FILE}`) && fs.existsSync(`${d}/${HEAD_CONFIG_FILE}`)).toBe(true);
    const back = await loadCriticHead(d, rngFor(99, 'init'));
    expect(back.spec).toEqual(head.spec);
    back.trainableVariables().forEach((v, i) => expect(Array.from(v.dataSync())).toEqual(Array.from(head.trainableVariables()[i].dataSync())));
    head.dispose();
    back.dispose();
  });
});

describe('value read-out', () => {
  it('readHiddenAt picks row b at position p_b', () => {
    const h = tf.tensor3d([[[1, 1], [2, 2], [3, 3]], [[4, 4], [5, 5], [6, 6]]]);
    expect(Array.from(tf.tidy(() => readHiddenAt(h, [2, 0]).dataSync()))).toEqual([3, 3, 4, 4]);
    expect(() => readHiddenAt(h, [3, 0])).toThrow(/out of range/);
    h.dispose();
  });

  it('V is the head at the last token of each (unpadded) row, independent of batch padding', async () => {
    const head = createCriticHead(lm.model.hiddenSize, { type: 'linear' }, rngFor(3, 'init'));
    const critic = new ValueModel(lm.model, head, lm.tokenizer, false);
    const rows = [lm.tokenizer.encode('cue red partner apple'), lm.tokenizer.encode('cue blue')];
    const batched = await critic.predict(rows);
    for (let b = 0; b < rows.length; b++) {
      // Alone (no padding): the last position's final-norm hidden state through the head.
      const want = tf.tidy(() => {
        const hid = lm.model.hiddenStates([rows[b]]);
        const last = tf.slice(hid, [0, rows[b].length - 1, 0], [1, 1, lm.model.hiddenSize]).reshape([1, lm.model.hiddenSize]) as tf.Tensor2D;
        return head.apply(last).dataSync()[0];
      });
      expect(batched[b]).toBeCloseTo(want, 5);
    }
    expect(critic.ownVariables().length).toBe(lm.model.trainableVariables().length + 2);
    expect(new ValueModel(lm.model, head, lm.tokenizer, true).ownVariables().length).toBe(2);
    expect(() => new ValueModel(lm.model, createCriticHead(3, { type: 'linear' }, rngFor(0, 'x')), lm.tokenizer, false)).toThrow(/hidden size/);
    head.dispose();
  });
});

describe('critic inputs', () => {
  const m: GlobalInfo = { turn: 1, numTurns: 4, lastReward: 0.5, maxReward: 1 };

  it('m_t line: 1-based turn, horizon, last reward and max', () => {
    expect(formatGlobalInfo(m)).toBe('[Global Info] turn 2 of 4; last reward: 0.5 (max 1)');
    expect(formatGlobalInfo({ turn: 0, numTurns: 2, lastReward: null, maxReward: null })).toBe('[Global Info] turn 1 of 2; last reward: none');
    // Numbers: at most 4 decimals, no trailing zeros, no negative zero.
    expect([0.123456, -1.5, 2, -0.00001].map(formatCriticNumber)).toEqual(['0.1235', '-1.5', '2', '0']);
  });

  it('centralized layout (CoMLRL V and Q text, m_t first)', () => {
    expect(centralizedCriticText({ observations: ['cue red', 'cue blue'] })).toBe('[Agent 0] cue red\n\n[Agent 1] cue blue');
    expect(centralizedCriticText({ observations: ['o0', 'o1'], actions: ['a0', 'a1'], globalInfo: m })).toBe(
      '[Global Info] turn 2 of 4; last reward: 0.5 (max 1)\n\n[Agent 0] o0\n\n[Agent 1] o1\n\n[Joint Action]\n[Agent 0 action]\na0\n\n[Agent 1 action]\na1',
    );
    expect(() => centralizedCriticText({ observations: ['a'], actions: ['x', 'y'] })).toThrow(/2 actions for 1 agents/);
  });

  it('CC ids contain every agent observation and m_t; a DC critic input only its own agent', () => {
    const tok = lm.tokenizer;
    const enc = (s: string) => tok.encode(s, { addSpecialTokens: false });
    const obs = ['cue red partner alpha', 'cue blue partner beta'];
    const isSub = (hay: number[], needle: number[]) => hay.some((_, i) => needle.every((x, j) => hay[i + j] === x));
    // The layout words are in the critic's vocabulary, so nothing maps to [UNK] (id 0).
    const cc = centralizedCriticIds(tok, { observations: obs, globalInfo: m });
    expect(cc).not.toContain(0);
    for (const o of obs) expect(isSub(cc, enc(o))).toBe(true);
    expect(isSub(cc, enc(formatGlobalInfo(m)))).toBe(true);
    expect(cc).toEqual(enc(centralizedCriticText({ observations: obs, globalInfo: m })));
    // Q: the joint action follows.
    const q = centralizedCriticIds(tok, { observations: obs, actions: ['gamma', 'delta'], globalInfo: m });
    expect(q.slice(0, cc.length)).toEqual(cc);
    expect(isSub(q, enc('[Agent 1 action]\ndelta'))).toBe(true);
    // DC: agent 0's critic sees 'alpha' (its own history) and never agent 1's 'blue'/'beta'.
    const dc0 = decentralizedCriticIds(tok, { prompt: obs[0] });
    expect(dc0).toEqual(enc(obs[0]));
    for (const w of ['blue', 'beta', 'Agent']) expect(dc0).not.toContain(enc(w)[0]);
    const dc0q = decentralizedCriticIds(tok, { prompt: obs[0], action: 'gamma', globalInfo: m });
    expect(dc0q).toEqual([...enc(`${formatGlobalInfo(m)}\n\n${obs[0]}`), ...enc('gamma')]);
    // Shared head: the actor's own ids, optional m_t prefix, optional completion; right truncation.
    expect(sharedHeadIds([5, 6], [7], null, globalInfoPrefixIds(tok, m))).toEqual([...enc(`${formatGlobalInfo(m)}\n\n`), 5, 6, 7]);
    expect(sharedHeadIds([5, 6, 7], null, 2)).toEqual([5, 6]);
    expect(CRITIC_LAYOUT_WORDS).toContain('Agent');
  });

  it('criticWordsOf splits as a word tokenizer does: with its words, m_t with progress and decimals has no [UNK]', async () => {
    const mt = formatGlobalInfo({ turn: 2, numTurns: 4, lastReward: 0.0625, maxReward: 0.25, progress: 'hits 1; score 1.75' });
    expect(mt).toBe('[Global Info] turn 3 of 4; last reward: 0.0625 (max 0.25); hits 1; score 1.75');
    expect(criticWordsOf([mt])).toEqual(['[', 'Global', 'Info', ']', 'turn', '3', 'of', '4', ';', 'last', 'reward', ':', '0', '.', '0625', '(', 'max', '25', ');', 'hits', '1', 'score', '75']);
    // The layout words alone miss the multi-digit runs (0625, 25, 75) and the punctuation run `);`.
    const missing = criticWordsOf([mt]).filter((w) => !CRITIC_LAYOUT_WORDS.includes(w));
    expect(missing).toEqual(['0625', '25', ');', 'hits', 'score', '75']);
    const critic = await tinyCritic(dir, 'words-of', 5, criticWordsOf([mt]));
    expect(critic.tokenizer.encode(mt)).not.toContain(0);
    critic.model.dispose();
  });
});

describe('value loss', () => {
  it('plain MSE and the clipped form, hand-derived', () => {
    // v = [1, 0], y = [0.5, 1]: MSE = (0.25 + 1)/2 = 0.625
    const v = tf.tensor1d([1, 0]);
    expect(tf.tidy(() => valueLoss(v, [0.5, 1]).dataSync()[0])).toBeCloseTo(0.625, 6);
    // Clip 0.2 around old = [0.5, 0.5]: v_clip = [0.7, 0.3];
    // row 0: max((0.5−1)², (0.5−0.7)²) = 0.25; row 1: max((1−0)², (1−0.3)²) = 1 → 0.625
    expect(tf.tidy(() => valueLoss(v, [0.5, 1], { oldValues: [0.5, 0.5], clipRange: 0.2 }).dataSync()[0])).toBeCloseTo(0.625, 6);
    // y = [0.9, 0.2], old = [0.8, 0.5]: v_clip = [1, 0.3];
    // row 0: max(0.01, 0.01) = 0.01; row 1: max(0.04, 0.01) = 0.04 → 0.025
    expect(tf.tidy(() => valueLoss(v, [0.9, 0.2], { oldValues: [0.8, 0.5], clipRange: 0.2 }).dataSync()[0])).toBeCloseTo(0.025, 6);
    // The clipped branch passes no gradient: y = 2, old = 0, v = 1, clip 0.2 → v_clip = 0.2:
    // (2 − 0.2)² = 3.24 > (2 − 1)² = 1, so the max is the clipped term, flat in v.
    const g = tf.grad((x: tf.Tensor) => valueLoss(x as tf.Tensor1D, [2], { oldValues: [0], clipRange: 0.2 }))(tf.tensor1d([1]));
    expect(g.dataSync()[0]).toBeCloseTo(0, 7);
    g.dispose();
    v.dispose();
  });
});
