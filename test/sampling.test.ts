import { describe, expect, it } from 'vitest';
import { createRng } from '../src/util/rng.js';
import {
  greedyToken,
  kthLargest,
  processLogits,
  processRow,
  sampleNextTokens,
  type NextTokenOptions,
} from '../src/sampling/index.js';

const ln = Math.log;

/** Dense probabilities of the processed distribution. */
function probs(row: number[], options: NextTokenOptions): number[] {
  return Array.from(processLogits(row, options), (lp) => Math.exp(lp));
}

function expectClose(actual: number[], expected: number[], tol = 1e-12): void {
  expect(actual.length).toBe(expected.length);
  actual.forEach((a, i) => expect(Math.abs(a - expected[i]), `index ${i}: ${a} vs ${expected[i]}`).toBeLessThan(tol));
}

/**
 * Independent reference written literally after HF's warpers: divide by T; top-k removes scores
 * below the k-th largest; top-p sorts ascending, removes where the cumulative softmax ≤ 1 − top_p,
 * always keeping the most probable token. Full sorts, no shortcuts.
 */
function referenceProbs(row: number[], t: number, k: number, p: number): number[] {
  let scores = row.map((x) => x / t);
  if (k > 0 && k < row.length) {
    const thr = [...scores].sort((a, b) => b - a)[k - 1];
    scores = scores.map((s) => (s < thr ? -Infinity : s));
  }
  const softmax = (s: number[]): number[] => {
    const m = s.reduce((a, b) => (b > a ? b : a), -Infinity);
    const e = s.map((x) => Math.exp(x - m));
    const z = e.reduce((a, b) => a + b, 0);
    return e.map((x) => x / z);
  };
  if (p < 1) {
    const pr = softmax(scores);
    const order = pr.map((_, i) => i).sort((a, b) => pr[a] - pr[b]);
    let cum = 0;
    order.forEach((idx, j) => {
      cum += pr[idx];
      if (cum <= 1 - p && j < order.length - 1) scores[idx] = -Infinity;
    });
  }
  return softmax(scores);
}

describe('processLogits: hand-derived distributions', () => {
  const row = [0, ln(2), ln(4)];

  it('temperature 1 is the softmax: 1/7, 2/7, 4/7', () => {
    expectClose(probs(row, {}), [1 / 7, 2 / 7, 4 / 7]);
  });

  it('temperature 0.5 squares the odds: 1, 4, 16 over 21', () => {
    expectClose(probs(row, { temperature: 0.5 }), [1 / 21, 4 / 21, 16 / 21]);
  });

  it('temperature 2 takes square roots: 1, √2, 2 over 3+√2', () => {
    const z = 3 + Math.SQRT2;
    expectClose(probs(row, { temperature: 2 }), [1 / z, Math.SQRT2 / z, 2 / z]);
  });

  it('top-k keeps the k largest and renormalises', () => {
    const e3 = Math.exp(3);
    const e2 = Math.exp(2);
    expectClose(probs([3, 1, 2, 0], { topK: 2 }), [e3 / (e3 + e2), 0, e2 / (e3 + e2), 0]);
  });

  it('top-k keeps every token tied with the k-th (as HF does)', () => {
    expectClose(probs([2, 2, 0], { topK: 1 }), [0.5, 0.5, 0]);
    expectClose(probs([1, 2, 2, 0], { topK: 2 }), [0, 0.5, 0.5, 0]);
  });

  it('top-k null, 0 or ≥ V is off', () => {
    const full = probs([3, 1, 2, 0], {});
    expectClose(probs([3, 1, 2, 0], { topK: null }), full);
    expectClose(probs([3, 1, 2, 0], { topK: 0 }), full);
    expectClose(probs([3, 1, 2, 0], { topK: 4 }), full);
    expectClose(probs([3, 1, 2, 0], { topK: 99 }), full);
  });

  // p = [0.1, 0.5, 0.25, 0.15]; descending 0.5, 0.25, 0.15, 0.1.
  const nuc = [ln(0.1), ln(0.5), ln(0.25), ln(0.15)];

  it('top-p 0.6 keeps the smallest prefix reaching 0.6: {0.5, 0.25} → 2/3, 1/3', () => {
    expectClose(probs(nuc, { topP: 0.6 }), [0, 2 / 3, 1 / 3, 0]);
  });

  it('top-p 0.85 keeps three tokens: 0.5, 0.25, 0.15 over 0.9', () => {
    expectClose(probs(nuc, { topP: 0.85 }), [0, 0.5 / 0.9, 0.25 / 0.9, 0.15 / 0.9]);
  });

  it('top-p 0.45 and a tiny top-p keep only the most probable token (log p = 0)', () => {
    expectClose(probs(nuc, { topP: 0.45 }), [0, 1, 0, 0]);
    const tiny = processRow(nuc, { topP: 1e-12 });
    expect(Array.from(tiny.indices)).toEqual([1]);
    expect(tiny.logProbs[0]).toBe(0);
  });

  it('top-p breaks ties by lower token id', () => {
    // p = [.3, .4, .3], top-p 0.5: 0.4 first (nothing before it), then the tied 0.3 with the lower
    // id (0.4 before it < 0.5), then the other 0.3 has 0.7 before it ≥ 0.5 → dropped.
    expectClose(probs([ln(0.3), ln(0.4), ln(0.3)], { topP: 0.5 }), [0.3 / 0.7, 0.4 / 0.7, 0]);
  });

  it('top-p 1 is off', () => {
    expectClose(probs(nuc, { topP: 1 }), [0.1, 0.5, 0.25, 0.15], 1e-12);
  });

  it('top-p runs on the top-k-renormalised distribution (HF order)', () => {
    // p = [.4, .3, .2, .1]; top-k 3 → 4/9, 3/9, 2/9; mass before the third is 7/9 ≥ 0.75 → dropped.
    // (top-p on the un-renormalised p would keep it: 0.7 < 0.75.)
    const r = [ln(0.4), ln(0.3), ln(0.2), ln(0.1)];
    expectClose(probs(r, { topK: 3, topP: 0.75 }), [4 / 7, 3 / 7, 0, 0]);
  });

  it('temperature applies before top-p', () => {
    // p = [.5, .3, .2]. T = 1: mass before the third is 0.8 ≥ 0.7 → {0, 1}.
    // T = 10: p^0.1 normalised ≈ .349, .332, .319; mass before the third ≈ .681 < 0.7 → all kept.
    const r = [ln(0.5), ln(0.3), ln(0.2)];
    expectClose(probs(r, { topP: 0.7 }), [0.5 / 0.8, 0.3 / 0.8, 0]);
    const w = [0.5, 0.3, 0.2].map((p) => p ** 0.1);
    const z = w.reduce((a, b) => a + b, 0);
    expectClose(probs(r, { topP: 0.7, temperature: 10 }), w.map((x) => x / z));
  });

  it('-Infinity logits are never kept', () => {
    expectClose(probs([-Infinity, 0, 0], {}), [0, 0.5, 0.5]);
    expectClose(probs([-Infinity, 0, ln(3)], { topK: 2 }), [0, 0.25, 0.75]);
  });

  it('matches a literal full-sort reference on random rows and options', () => {
    const rng = createRng('sampling-reference');
    for (let trial = 0; trial < 300; trial++) {
      const V = 2 + rng.int(60);
      const scale = [0.3, 1, 4][trial % 3];
      const row = Array.from({ length: V }, () => rng.normal() * scale);
      const t = [0.3, 0.6, 1, 1.7][rng.int(4)];
      const k = [0, 1, 5, 20, 50][rng.int(5)];
      const p = [1, 0.05, 0.3, 0.6, 0.95][rng.int(5)];
      const got = probs(row, { temperature: t, topK: k, topP: p });
      const want = referenceProbs(row, t, k, p);
      expectClose(got, want, 1e-9);
    }
  });
});

describe('sampleNextTokens', () => {
  it('empirical frequencies match the processed distribution (chi-square)', () => {
    // p = [.05, .3, .25, .2, .15, .05]; top-k 5 then top-p 0.8 and T = 0.8: computed expected below.
    const base = [ln(0.05), ln(0.3), ln(0.25), ln(0.2), ln(0.15), ln(0.05)];
    const options = { temperature: 0.8, topK: 5, topP: 0.8 };
    const expected = probs(base, options);
    const kept = expected.filter((p) => p > 0).length;
    expect(kept).toBeGreaterThanOrEqual(3);

    const rows = 4000;
    const logits = new Float32Array(rows * base.length);
    for (let b = 0; b < rows; b++) logits.set(base, b * base.length);
    // Processing float32 logits: the expected distribution is that of the float32 row.
    const expected32 = probs(Array.from(logits.subarray(0, base.length)), options);
    const counts = new Array<number>(base.length).fill(0);
    const rng = createRng(7);
    const N = 5 * rows;
    for (let rep = 0; rep < 5; rep++) {
      const { tokens, logProbs } = sampleNextTokens(logits, base.length, options, rng);
      tokens.forEach((tok, b) => {
        counts[tok]++;
        // The returned log-prob is that of the processed distribution.
        expect(Math.abs(logProbs[b] - Math.log(expected32[tok]))).toBeLessThan(1e-6);
      });
    }
    let chi2 = 0;
    for (let v = 0; v < base.length; v++) {
      if (expected32[v] === 0) {
        expect(counts[v], `token ${v} is outside the nucleus`).toBe(0);
        continue;
      }
      chi2 += (counts[v] - N * expected32[v]) ** 2 / (N * expected32[v]);
    }
    // 99.9% quantile of chi-square with (kept − 1) ≤ 4 degrees of freedom is 18.47; the draw is seeded,
    // so this is deterministic, and a wrong distribution (e.g. no renormalisation) gives chi2 in the hundreds.
    expect(chi2).toBeLessThan(18.47);
  });

  it('the same seed repeats; another seed differs', () => {
    const V = 1000;
    const r = createRng('logits');
    const logits = Float32Array.from({ length: 8 * V }, () => r.normal());
    const opts = { temperature: 0.7, topP: 0.9, topK: 50 };
    const a = sampleNextTokens(logits, V, opts, createRng(123));
    const b = sampleNextTokens(logits, V, opts, createRng(123));
    const c = sampleNextTokens(logits, V, opts, createRng(124));
    expect(Array.from(a.tokens)).toEqual(Array.from(b.tokens));
    expect(Array.from(a.logProbs)).toEqual(Array.from(b.logProbs));
    expect(Array.from(a.tokens)).not.toEqual(Array.from(c.tokens));
  });

  it('draws exactly one uniform per row', () => {
    const rng = createRng(5);
    const ref = createRng(5);
    sampleNextTokens(new Float32Array(3 * 4), 4, {}, rng);
    for (let i = 0; i < 3; i++) ref.next();
    expect(rng.next()).toBe(ref.next());
  });

  it('greedy: argmax (lowest id on ties) with log p under the temperature-1 full softmax', () => {
    const logits = Float32Array.from([0, Math.log(2), Math.log(4), /* row 2 */ 5, 1, 5]);
    const out = sampleNextTokens(logits, 3, { greedy: true, temperature: 0.1, topK: 1, topP: 0.1 });
    expect(Array.from(out.tokens)).toEqual([2, 0]);
    expect(out.logProbs[0]).toBeCloseTo(Math.log(4 / 7), 6);
    const z = 2 * Math.exp(5) + Math.exp(1);
    expect(out.logProbs[1]).toBeCloseTo(Math.log(Math.exp(5) / z), 6);
    expect(greedyToken([-Infinity, -1, -Infinity]).token).toBe(1);
    // Sampling fields are ignored under greedy, so temperature 0 is accepted there.
    expect(Array.from(sampleNextTokens(logits, 3, { greedy: true, temperature: 0 }).tokens)).toEqual([2, 0]);
  });

  it('rejects bad options and logits with messages naming the problem', () => {
    const l = new Float32Array(4);
    const rng = createRng(1);
    expect(() => sampleNextTokens(l, 4, { temperature: 0 }, rng)).toThrow(/temperature.*greedy/);
    expect(() => sampleNextTokens(l, 4, { temperature: -1 }, rng)).toThrow(/temperature/);
    expect(() => sampleNextTokens(l, 4, { topP: 0 }, rng)).toThrow(/topP/);
    expect(() => sampleNextTokens(l, 4, { topP: 1.5 }, rng)).toThrow(/topP/);
    expect(() => sampleNextTokens(l, 4, { topK: -1 }, rng)).toThrow(/topK/);
    expect(() => sampleNextTokens(l, 4, { topK: 2.5 }, rng)).toThrow(/topK/);
    expect(() => sampleNextTokens(l, 4, {})).toThrow(/rng/);
    expect(() => sampleNextTokens(l, 3, {}, rng)).toThrow(/multiple of vocabSize/);
    expect(() => sampleNextTokens(Float32Array.from([0, NaN]), 2, {}, rng)).toThrow(/NaN/);
    expect(() => sampleNextTokens(Float32Array.from([-Infinity, -Infinity]), 2, {}, rng)).toThrow(/no finite/);
  });

  it('at a 151,936-token vocabulary the shortcut paths equal the full-sort reference', () => {
    const V = 151_936;
    const r = createRng('big');
    const row = Array.from({ length: V }, () => r.normal() * 3);
    for (const opts of [
      { temperature: 0.6, topK: 50, topP: 0.6 },
      { temperature: 0.6, topP: 0.6 },
      { temperature: 1.3, topP: 0.95 },
    ]) {
      const got = processLogits(row, opts);
      const want = referenceProbs(row, opts.temperature, opts.topK ?? 0, opts.topP);
      let kept = 0;
      for (let v = 0; v < V; v++) {
        if (want[v] > 0) kept++;
        const g = Math.exp(got[v]);
        if (Math.abs(g - want[v]) > 1e-12) throw new Error(`token ${v}: ${g} vs ${want[v]} (${JSON.stringify(opts)})`);
      }
      expect(kept).toBeGreaterThan(0);
    }
    // Timing is printed, not asserted (timed checks belong in bench/).
    const logits = Float32Array.from(row);
    const t0 = performance.now();
    sampleNextTokens(logits, V, { temperature: 0.6, topK: 50, topP: 0.6 }, createRng(1));
    console.log(`sampling one 151,936-token row (top-k 50, top-p 0.6): ${(performance.now() - t0).toFixed(1)} ms`);
  });
});

describe('kthLargest', () => {
  it('agrees with a sort', () => {
    const r = createRng('kth');
    const v = Array.from({ length: 500 }, () => r.normal());
    const sorted = [...v].sort((a, b) => b - a);
    for (const k of [1, 2, 50, 499, 500]) expect(kthLargest(v, k)).toBe(sorted[k - 1]);
    expect(() => kthLargest(v, 0)).toThrow(/k must be/);
  });
});
