/**
 * The paper bench's pieces (bench/paper*.ts, bench/critic-*.ts): the bootstrap interval and the
 * evaluation schedule on hand cases, the budgets, the blind critic's input, next-token
 * pretraining, the gate's per-turn explained variance on hand cases, and the critic-fit gate's
 * plumbing on its quick budget.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import type { CriticLM } from '../src/critic/value-model.js';
import { centralizedCriticText } from '../src/critic/inputs.js';
import { bootstrapMean, curveArea, evalItems, pairedTInterval, studentTCdf, studentTQuantile } from '../bench/paper-stats.js';
import { explainedVariance } from '../src/buffer/targets.js';
import { acBudget, blindText, criticStepsPerRun, criticWords, CRITIC_WORDS, magrpoTasks, PAPER_ARMS, PAPER_VARIANTS, treeCompletions, type PaperArm, type PaperVariant } from '../bench/paper-runs.js';
import { criticTextSource, pretrainCritic } from '../bench/critic-pretrain.js';
import { gateArmFor, gateArmPasses, gateFits, GATE_EV, GATE_QUICK, gatePasses, gateReport, gateVerdicts, passingGateArms, type GateCritic, type GateRow } from '../bench/critic-gate.js';
import { perTurnExplainedVariance, spreadOf, withinTurnExplainedVariance } from '../bench/turn-ev.js';
import { ceilingOf, scoreLineOf } from '../bench/critic-fit.js';
import { runJob } from '../bench/paper-jobs.js';
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
  let dir: string;
  beforeAll(async () => {
    setBackendLogger(null);
    await initBackend('wasm');
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

  it('pretraining is seeded: the same init and budget write the same checkpoint bytes (a carried bench folder pretrains again)', async () => {
    const job = { kind: 'pretrain' as const, seed: 1, vocab: 'bench' as const, budget: { steps: 5, batch: 4, lr: 3e-3 } };
    const bytes: Buffer[] = [];
    for (const name of ['a', 'b']) {
      const out = path.join(dir, `pretrained-${name}`);
      await runJob({ ...job, out }, dir);
      bytes.push(fs.readFileSync(path.join(out, 'model.safetensors')));
    }
    expect(bytes[0].length).toBeGreaterThan(1000);
    expect(bytes[0].equals(bytes[1])).toBe(true);
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
});

describe('the gate\'s figure: explained variance within turns', () => {
  // Turn 0: y = [10, 0], V = [0, 10] (left out of the gate's figure, t ≥ 1).
  // Turn 1: y = [0, 2], V = [0, 1]: e = [0, 1]; Σ(y − ȳ)² = 2, Σ(e − ē)² = 0.5; EV 1 − 0.5/2 = 0.75.
  // Turn 2: y = [2, 6], V = [4, 4]: e = [−2, 2]; Σ(y − ȳ)² = 8, Σ(e − ē)² = 8; EV 0.
  // Pooled within turns, t ≥ 1: 1 − (0.5 + 8)/(2 + 8) = 0.15 (the mean of the per-turn figures, 0.375,
  // would weigh turn 1's small variance as much as turn 2's).
  const rows = { turns: [0, 0, 1, 1, 2, 2], targets: [10, 0, 0, 2, 2, 6], predictions: [0, 10, 0, 1, 4, 4] };

  it('per turn and pooled within turns over t ≥ 1: hand cases', () => {
    expect([...perTurnExplainedVariance(rows)]).toEqual([
      [0, -3],
      [1, 0.75],
      [2, 0],
    ]);
    expect(withinTurnExplainedVariance(rows)).toBeCloseTo(0.15, 12);
    expect(withinTurnExplainedVariance({ ...rows, targets: [1, 1, 1, 1, 1, 1] })).toBeNaN();
  });

  it('a per-turn constant scores 0 within turns, while the pooled figure credits it for the turn index', () => {
    // Turns 1 and 2 of the rows above, each predicted by its mean (1 and 4): e = [−1, 1, −2, 2].
    // Pooled over both turns: ȳ = 2.5, Σ(y − ȳ)² = 6.25 + 0.25 + 0.25 + 12.25 = 19, Σe² = 10: EV 9/19.
    const constant = { turns: [1, 1, 2, 2], targets: [0, 2, 2, 6], predictions: [1, 1, 4, 4] };
    expect(withinTurnExplainedVariance(constant)).toBe(0);
    expect(explainedVariance(constant.predictions, constant.targets)).toBeCloseTo(9 / 19, 12);
  });

  it('the ceiling: what the true values would score against noisy targets', () => {
    // Turn 1: values [0, 2] (spread Σ(y − ȳ)² = 2), each with sampling variance 0.1: 1 − 0.2/2 = 0.9.
    // Turn 0 rows are left out, as in the gate's figure.
    const row = (turn: number, value: number, noise: number) => ({ turn, value, noise });
    expect(ceilingOf([row(0, 5, 3), row(1, 0, 0.1), row(1, 2, 0.1)])).toBeCloseTo(0.9, 12);
    expect(ceilingOf([row(1, 1, 0.1), row(1, 1, 0.1)])).toBeNaN();
  });

  it("m_t's score, best line per turn: hand case", () => {
    // Turn 1: scores [0, 1, 2], values [0, 1, 1]: the line 1/6 + x/2 (b = Σ(x − 1)(y − 2/3) / Σ(x − 1)² = 1/2)
    // predicts [1/6, 2/3, 7/6]; errors [−1/6, 1/3, −1/6], Σ e² = 1/6 against Σ(y − ȳ)² = 2/3: EV 1 − (1/6)/(2/3) = 0.75.
    // Turn 2: values follow the score exactly: error 0. Pooled: 1 − (1/6 + 0)/(2/3 + 2) = 1 − 1/16.
    const rows = [
      { turn: 1, score: 0, value: 0 },
      { turn: 1, score: 1, value: 1 },
      { turn: 1, score: 2, value: 1 },
      { turn: 2, score: 0, value: 0 },
      { turn: 2, score: 2, value: 2 },
    ];
    expect(scoreLineOf(rows.slice(0, 3))).toBeCloseTo(0.75, 12);
    expect(scoreLineOf(rows)).toBeCloseTo(1 - 1 / 16, 12);
  });

  it('spread and verdicts: mean − 2·SE against the bar', () => {
    // [0.4, 0.6]: mean 0.5, sample SD √(0.02/1) = 0.1414, SE 0.1414/√2 = 0.1.
    const s = spreadOf([0.4, 0.6]);
    expect(s.mean).toBeCloseTo(0.5, 12);
    expect(s.se).toBeCloseTo(0.1, 12);
    expect([s.min, s.max, s.n]).toEqual([0.4, 0.6, 2]);
    expect(spreadOf([0.3]).se).toBe(0);
    const row = (variant: string, init: number, seed: number, ev: number, ceiling = 0.9): GateRow => ({
      variant,
      init,
      seed,
      result: { at: [0, 1], gateEV: [0, ev], perTurnEV: [0, ev], pooledEV: ev, ceiling, scoreLine: 0.9, baseline: { gateEV: 0, pooledEV: 0.2 }, steps: 1, tokens: 1, seconds: 0 },
    });
    const steady = [1, 2, 3].flatMap((seed) => [0, 1].map((init) => row('a', init, seed, 0.6)));
    expect(gateVerdicts(steady)[0].verdict).toBe('pass'); // SE 0: mean 0.6 ≥ 0.5
    // Mean 0.55 but SE = √(0.25·6/5)/√6 ≈ 0.2236: mean − 2·SE < 0.5.
    const noisy = [1, 2, 3].flatMap((seed) => [0, 1].map((init) => row('b', init, seed, init === 0 ? 1.05 : 0.05)));
    const v = gateVerdicts(noisy)[0];
    expect(v.spread.mean).toBeCloseTo(0.55, 12);
    expect(v.verdict).toBe('fail');
    expect(v.byInit.get(0)?.mean).toBeCloseTo(1.05, 12);
    expect(gatePasses(steady)).toBe(true);
    expect(gatePasses([...steady, ...noisy])).toBe(false); // every variant must pass
    expect(gatePasses([])).toBe(false);
    // Values that barely vary within turns (ceiling < 0.5): the variant is not gated either way.
    const flat = [1, 2, 3].map((seed) => row('c', 0, seed, -3, 0.05));
    expect(gateVerdicts(flat)[0].verdict).toBe('not gated');
    expect(gateVerdicts(flat)[0].ceiling).toBeCloseTo(0.05, 12);
    expect(gatePasses([...steady, ...flat])).toBe(true);
    expect(gatePasses(flat)).toBe(false); // nothing gated
    expect(GATE_EV).toBe(0.5);
  });

  it('gives each critic input its own verdict; the gate passes when one input passes every gated variant', () => {
    const row = (arm: string, variant: string, seed: number, ev: number): GateRow => ({
      arm,
      variant,
      init: 0,
      seed,
      result: { at: [0, 1], gateEV: [0, ev], perTurnEV: [0, ev], pooledEV: ev, ceiling: 0.9, scoreLine: 0.9, baseline: { gateEV: 0, pooledEV: 0.2 }, steps: 1, tokens: 1, seconds: 0 },
    });
    // The text critic fails variant a (0.2 < 0.5), the numeric-m_t critic passes a and b.
    const rows = [1, 2, 3].flatMap((seed) => [row('cc-pre', 'a', seed, 0.2), row('cc-pre', 'b', seed, 0.7), row('cc-pre-mt', 'a', seed, 0.8), row('cc-pre-mt', 'b', seed, 0.9)]);
    expect(gateVerdicts(rows).map((v) => [v.arm, v.variant, v.verdict])).toEqual([
      ['cc-pre', 'a', 'fail'],
      ['cc-pre', 'b', 'pass'],
      ['cc-pre-mt', 'a', 'pass'],
      ['cc-pre-mt', 'b', 'pass'],
    ]);
    expect(gateArmPasses(rows, 'cc-pre')).toBe(false);
    expect(gateArmPasses(rows, 'cc-pre-mt')).toBe(true);
    expect(passingGateArms(rows)).toEqual(['cc-pre-mt']);
    expect(gatePasses(rows)).toBe(true);
    expect(gatePasses(rows.filter((r) => r.arm === 'cc-pre'))).toBe(false);
    // A row without an arm is the text critic's.
    const { arm: _dropped, ...legacy } = rows[0];
    expect(gateVerdicts([legacy])[0].arm).toBe('cc-pre');
    // Which gate speaks for which arm of the bench: λ arms share their input's gate; controls, DC and MAGRPO have none.
    const forArm = (id: string) => gateArmFor(PAPER_ARMS.find((a) => a.id === id) as PaperArm);
    expect(['cc-pre', 'cc-pre-raw', 'cc-pre-lambda', 'cc-pre-mt', 'cc-pre-mt-lambda', 'cc-pre-blind', 'cc-pre-frozen', 'cc-random', 'dc-pre', 'magrpo-k2'].map(forArm)).toEqual([
      'cc-pre',
      'cc-pre',
      'cc-pre',
      'cc-pre-mt',
      'cc-pre-mt',
      null,
      null,
      null,
      null,
      null,
    ]);
  });

  it('the two vocabulary orders hold the same words in different orders (5b1078f moved `);`)', () => {
    const pre = criticWords('pre-5b1078f');
    expect([...pre].sort()).toEqual([...CRITIC_WORDS].sort());
    expect(pre.indexOf(');')).toBe(pre.indexOf('9') + 1);
    expect(CRITIC_WORDS.indexOf(');')).toBeGreaterThan(CRITIC_WORDS.indexOf('9') + 1);
    expect(criticWords('bench')).toBe(CRITIC_WORDS);
  });
});

describe('the critic-fit gate on its quick budget (plumbing)', () => {
  let cleanup: () => Promise<void>;
  let dir: string;
  beforeAll(async () => {
    setBackendLogger(null);
    await initBackend('wasm');
    ({ dir, cleanup } = await tempDir('critic-gate'));
  });
  afterAll(async () => {
    await cleanup();
  });

  /** Two critic inits, each in its own vocabulary order; each load makes the init's critic afresh (a fit trains its LM in place; small critics: the plumbing, not the fit). */
  const critics: GateCritic[] = [
    { init: 0, load: () => tinyCritic(dir, 'i0', 10, criticWords('bench'), { hiddenSize: 16, numLayers: 1 }) },
    { init: 1, load: () => tinyCritic(dir, 'i1', 1010, criticWords('pre-5b1078f'), { hiddenSize: 16, numLayers: 1 }) },
  ];

  it('fits seeds × inits on the run\'s schedule and prints per-turn EVs, the mean with its spread and the verdict', async () => {
    const variant: PaperVariant = { name: 'sparse H=2', horizon: 2, payment: 'sparse' };
    const rows: GateRow[] = [];
    for (const seed of GATE_QUICK.seeds) {
      rows.push(...(await gateFits(variant, seed, 1, critics, GATE_QUICK, dir)));
    }
    // Per seed: the text critic's fits (inits 0, 1), then the numeric-m_t critic's.
    expect(rows.map((r) => [r.seed, r.arm, r.init])).toEqual(
      [1, 2, 3].flatMap((seed) => ['cc-pre', 'cc-pre-mt'].flatMap((arm) => [0, 1].map((init) => [seed, arm, init]))),
    );
    for (const r of rows) {
      // One flush: the run's schedule is 2 turn groups × 16/8 minibatches × 2 update epochs.
      expect(r.result.steps).toBe(criticStepsPerRun(2, 1));
      expect(r.result.at).toEqual([0, 1]);
      expect(r.result.gateEV).toHaveLength(2);
      expect(r.result.perTurnEV).toHaveLength(2);
      for (const e of [...r.result.gateEV, ...r.result.perTurnEV, r.result.pooledEV, r.result.baseline.pooledEV]) expect(Number.isFinite(e)).toBe(true);
      expect(r.result.ceiling).toBeLessThanOrEqual(1);
      expect(r.result.scoreLine).toBeLessThanOrEqual(1);
      expect(r.result.baseline.gateEV).toBeCloseTo(0, 10);
      expect(r.result.tokens).toBeGreaterThan(10);
    }
    // Same seed, same histories: the two inits' fits start from different critics.
    expect(rows[0].result.gateEV[0]).not.toBe(rows[1].result.gateEV[0]);
    // The featured head's feature columns start at zero: before its first step it predicts what the
    // text critic of the same init predicts; once trained on the features it predicts otherwise.
    const [text0, , featured0] = rows;
    expect(featured0.result.gateEV[0]).toBeCloseTo(text0.result.gateEV[0], 5);
    expect(featured0.result.gateEV[1]).not.toBeCloseTo(text0.result.gateEV[1], 5);
    const lines = gateReport(rows, { lr: 3e-3, batch: 8, target: 'mc', vocabOrder: 'bench' });
    const text = lines.join('\n');
    for (const input of ['text', 'text + numeric m_t']) {
      expect(lines.filter((l) => l.startsWith(`| ${input} | sparse H=2 | `))).toHaveLength(7); // 6 fits + the verdict row
      expect(text).toContain(`gate, ${input}: `);
    }
    expect(text).toMatch(/\| text \+ numeric m_t \| sparse H=2 \| -?\d\.\d{3} ± \d\.\d{3} \[-?\d\.\d{3}, -?\d\.\d{3}\] \(n = 6\) \| init 0: .* · init 1: .* \| -?\d\.\d{3} \| -?\d\.\d{3} \| -?\d\.\d{3} \| (pass|fail|not gated) \|/);
    expect(lines[lines.length - 1]).toMatch(/^gate: (PASSED|FAILED)$/);
    expect(lines[lines.length - 1]).toBe(`gate: ${gatePasses(rows) ? 'PASSED' : 'FAILED'}`);
  }, 60_000);
});
