/**
 * The paper bench's pieces (bench/paper*.ts, bench/critic-*.ts): the bootstrap interval and the
 * evaluation schedule on hand cases, the budgets, the blind critic's input, next-token
 * pretraining, and the critic-fit gate on a tiny budget.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import type { CriticLM } from '../src/critic/value-model.js';
import { centralizedCriticText } from '../src/critic/inputs.js';
import { bootstrapMean, curveArea, evalItems, pairedTInterval, studentTCdf, studentTQuantile } from '../bench/paper-stats.js';
import { acBudget, blindText, criticStepsPerRun, CRITIC_WORDS, magrpoTasks, PAPER_VARIANTS, treeCompletions } from '../bench/paper-runs.js';
import { criticTextSource, pretrainCritic } from '../bench/critic-pretrain.js';
import { fitCritic, gatePasses, GATE_EV, type GateRow } from '../bench/critic-fit.js';
import { tinyCritic } from './collm-helpers.js';
import { tempDir } from './magrpo-helpers.js';

describe('paper bench statistics', () => {
  it('bootstrap interval: hand cases', () => {
    expect(bootstrapMean([0.5, 0.5, 0.5])).toEqual({ mean: 0.5, lo: 0.5, hi: 0.5 });
    // Resampling [0, 1] gives the means 0, ½, 1 with probabilities ¼, ½, ¼: both 2.5% tails are reached.
    expect(bootstrapMean([0, 1])).toEqual({ mean: 0.5, lo: 0, hi: 1 });
    const b = bootstrapMean([0.1, 0.2, 0.3, 0.4, 0.5]);
    expect(b.mean).toBeCloseTo(0.3, 12);
    expect(b.lo).toBeGreaterThan(0.1);
    expect(b.hi).toBeLessThan(0.5);
    expect(bootstrapMean([0.1, 0.2, 0.3, 0.4, 0.5])).toEqual(b); // seeded
    expect(() => bootstrapMean([])).toThrow(/no values/);
  });

  it('Student t quantiles equal the printed tables', () => {
    // Two-sided 95% critical values of any t table (e.g. Fisher & Yates): df 1, 2, 4, 9, 29.
    const table: [number, number][] = [[1, 12.706], [2, 4.303], [4, 2.776], [9, 2.262], [29, 2.045]];
    for (const [df, t] of table) expect(studentTQuantile(0.975, df)).toBeCloseTo(t, 3);
    expect(studentTCdf(0, 7)).toBeCloseTo(0.5, 12);
    // df 1 is the Cauchy distribution: P(T ≤ 1) = ½ + atan(1)/π = 0.75.
    expect(studentTCdf(1, 1)).toBeCloseTo(0.75, 10);
    expect(studentTQuantile(0.025, 4)).toBeCloseTo(-studentTQuantile(0.975, 4), 8);
  });

  it('paired t interval: the seeds both arms ran, mean ± t·sd/√n', () => {
    const a = new Map([[1, 1], [2, 2], [3, 3]]);
    const b = new Map([[1, 0], [2, 0], [3, 0], [4, 9]]); // seed 4 has no pair: left out
    // Differences 1, 2, 3: mean 2, sd 1, t₀.₉₇₅,₂ = 4.303 → half width 4.303/√3 = 2.484.
    const r = pairedTInterval(a, b);
    expect(r?.n).toBe(3);
    expect(r?.mean).toBeCloseTo(2, 12);
    expect(r?.lo).toBeCloseTo(2 - 4.3027 / Math.sqrt(3), 3);
    expect(r?.hi).toBeCloseTo(2 + 4.3027 / Math.sqrt(3), 3);
    expect(pairedTInterval(new Map([[1, 1]]), b)).toBeNull();
  });

  it('evaluations fall at equal fractions of each budget', () => {
    expect(evalItems(384, 4)).toEqual([0, 96, 192, 288, 384]);
    expect(evalItems(51, 4)).toEqual([0, 13, 26, 38, 51]);
    expect(evalItems(5, 4)).toEqual([0, 1, 3, 4, 5]);
    expect(curveArea([0, 1, 1])).toBe(0.75);
    expect(curveArea([0.4])).toBe(0.4);
  });

  it('budgets: MAGRPO trees against the actor-critic completions per agent', () => {
    expect(treeCompletions(2, 4)).toBe(30);
    expect(treeCompletions(4, 6)).toBe(5460);
    expect(acBudget(4, 24)).toBe(1536);
    expect(magrpoTasks(2, 4, 24)).toBe(51);
    expect(magrpoTasks(4, 4, 24)).toBe(4); // 1,536 / 340 = 4.5: whole trees only, never over the budget
    expect(magrpoTasks(4, 6, 8)).toBe(0); // one tree (5,460) is over the budget (768): not run
    // 8 epochs × (16·H transitions / minibatches of 8) × 2 update epochs.
    expect(criticStepsPerRun(4, 8)).toBe(128);
    expect(criticStepsPerRun(6, 8)).toBe(192);
  });

  it('the blind critic keeps only m_t\'s turn index', () => {
    const text = centralizedCriticText({ observations: ['cue red', 'cue blue partner sky'], globalInfo: { turn: 1, numTurns: 4, lastReward: 0, maxReward: 1, progress: 'hits 1; score 1; slot 0' } });
    expect(blindText(text)).toBe('[Global Info] turn 2 of 4');
    expect(blindText('[Agent 0] cue red')).toBe('[Global Info]');
  });
});

describe('critic pretraining and the critic-fit gate (tiny budgets)', () => {
  let cleanup: () => Promise<void>;
  let lm: CriticLM;
  beforeAll(async () => {
    setBackendLogger(null);
    await initBackend('wasm');
    let dir: string;
    ({ dir, cleanup } = await tempDir('paper-bench'));
    lm = await tinyCritic(dir, 'critic', 3, CRITIC_WORDS, { hiddenSize: 16, numLayers: 1 });
  });
  afterAll(async () => {
    lm.model.dispose();
    await cleanup();
  });

  it('next-token pretraining on critic texts lowers the loss', async () => {
    const next = criticTextSource([{ horizon: 2, payment: 'sparse' }], 1);
    const text = await next();
    expect(text.startsWith('[Global Info] turn ')).toBe(true);
    const { firstLoss, lastLoss } = await pretrainCritic(lm.model, lm.tokenizer, next, { steps: 30, batch: 4, lr: 1e-2 });
    expect(lastLoss).toBeLessThan(0.8 * firstLoss);
  });

  it('the critic vocabulary reads every critic text of every variant without an unknown token (scores like 1.75 included)', async () => {
    const unk = lm.tokenizer.encode('zebra')[0];
    expect(lm.tokenizer.decode([unk])).toBe('[UNK]');
    let read = 0;
    for (const v of PAPER_VARIANTS) {
      const next = criticTextSource([v], 7);
      for (let i = 0; i < 300; i++) {
        const text = await next();
        const ids = lm.tokenizer.encode(text);
        expect(ids.includes(unk), text).toBe(false);
        read += ids.length;
      }
    }
    expect(read).toBeGreaterThan(10_000);
    // The numbers a word tokenizer splits off: 0.0625 is 0 . 0625; (max 1); ends in one word ');'.
    for (const w of ['25', '75', '0625', ');']) expect(CRITIC_WORDS).toContain(w);
  });

  it('the gate measures held-out EV at its checkpoints and passes only at EV ≥ 0.5', async () => {
    const r = await fitCritic({ horizon: 2, payment: 'sparse', critic: lm, steps: 4, batch: 4, lr: 1e-2, seed: 1, heldOut: 16, checkpoints: [0, 2] });
    expect(r.at).toEqual([0, 2, 4]);
    expect(r.explainedVariance).toHaveLength(3);
    for (const e of r.explainedVariance) expect(Number.isFinite(e)).toBe(true);
    expect(r.tokens).toBeGreaterThan(10);
    const row = (arm: GateRow['arm'], ev: number): GateRow => ({ variant: 'v', arm, seed: 1, result: { at: [0, 4], explainedVariance: [0, ev], tokens: 1, seconds: 0 } });
    expect(gatePasses([row('pretrained', GATE_EV), row('random', 0)])).toBe(true);
    expect(gatePasses([row('pretrained', 0.6), row('pretrained', 0.49)])).toBe(false);
    expect(gatePasses([row('random', 0.9)])).toBe(false); // the pretrained critic is the one gated
    expect(gatePasses([row('pretrained', 0.5), { ...row('pretrained', 0.9), result: { ...row('pretrained', 0).result, explainedVariance: [0.9, 0.1] } }])).toBe(false); // the last checkpoint counts
  });
});
