import { describe, expect, it } from 'vitest';
import {
  TLDR_LOGGER_STOPWORDS,
  TLDR_STOPWORDS,
  TLDR_TRANSITION_CATEGORIES,
  tldrLoggerMetrics,
  tldrLoggerMetricsBatch,
  tldrReward,
  tldrRewardBreakdown,
  tldrRewards,
} from '../rewards/tldr/index.js';
import { readFixtureJson } from './shared-fixtures.js';

interface TLDRCase {
  name: string;
  completion1: string;
  completion2: string;
  expected_reward: number;
  last_level_reached: number;
  breakdown: Record<string, unknown>;
  logger_metrics: Record<string, unknown>;
}

// A committed copy of ../shared/vectors/tldr.json (test/fixtures/tldr/NOTICE.md).
const vectors = readFixtureJson<{ cases: TLDRCase[] }>('tldr/vectors.json');

// The vectors store Python sets as lists in arbitrary order; everything else compares exactly.
const SET_KEYS = new Set(['categories_found', 'transition_categories_found']);

function expectSameValue(key: string, actual: unknown, expected: unknown): void {
  if (SET_KEYS.has(key)) {
    expect([...(actual as string[])].sort(), key).toEqual([...(expected as string[])].sort());
  } else if (typeof expected === 'number') {
    expect(actual, key).toBe(expected);
  } else {
    expect(actual, key).toEqual(expected);
  }
}

describe('TLDR reward against the reference vectors', () => {
  it('has every case of the vector file', () => {
    expect(vectors.cases.length).toBeGreaterThanOrEqual(33);
  });

  for (const c of vectors.cases) {
    it(`${c.name}: reward and breakdown`, () => {
      expect(tldrReward(c.completion1, c.completion2)).toBe(c.expected_reward);
      const b = tldrRewardBreakdown(c.completion1, c.completion2) as unknown as Record<string, unknown>;
      expect(b.last_level_reached).toBe(c.last_level_reached);
      // Same key set: a level's keys exist exactly when the reference reached it.
      const own = Object.keys(b).filter((k) => k !== 'reward' && k !== 'last_level_reached');
      expect(own.sort()).toEqual(Object.keys(c.breakdown).sort());
      for (const [key, expected] of Object.entries(c.breakdown)) expectSameValue(key, b[key], expected);
    });

    it(`${c.name}: eval logger metrics`, () => {
      const m = tldrLoggerMetrics(c.completion1, c.completion2) as unknown as Record<string, unknown>;
      expect(Object.keys(m).sort()).toEqual(Object.keys(c.logger_metrics).sort());
      for (const [key, expected] of Object.entries(c.logger_metrics)) expectSameValue(key, m[key], expected);
    });
  }

  it('list forms score pair by pair and reject unequal lengths', () => {
    const c1 = vectors.cases.map((c) => c.completion1);
    const c2 = vectors.cases.map((c) => c.completion2);
    expect(tldrRewards(c1, c2)).toEqual(vectors.cases.map((c) => c.expected_reward));
    expect(tldrLoggerMetricsBatch(c1, c2).map((m) => m.gated_total_reward)).toEqual(
      vectors.cases.map((c) => c.logger_metrics.gated_total_reward),
    );
    expect(() => tldrRewards(['a'], [])).toThrow(/completions2 has 0/);
  });
});

describe('TLDR constants (tasks-reference §1.2)', () => {
  it('has 106 stopwords and the logger swaps were for high', () => {
    expect(TLDR_STOPWORDS.size).toBe(106);
    expect(TLDR_LOGGER_STOPWORDS.size).toBe(106);
    expect(TLDR_LOGGER_STOPWORDS.has('were')).toBe(false);
    expect(TLDR_LOGGER_STOPWORDS.has('high')).toBe(true);
  });

  it('has the 12 categories with the spec phrase counts, in dictionary order', () => {
    expect(TLDR_TRANSITION_CATEGORIES.map((c) => [c.name, c.phrases.length])).toEqual([
      ['elaboration', 21],
      ['examples', 22],
      ['explanation', 22],
      ['cause_effect', 26],
      ['contrast', 29],
      ['sequence', 33],
      ['emphasis', 24],
      ['summary', 21],
      ['comparison', 17],
      ['concession', 19],
      ['condition', 19],
      ['time', 26],
    ]);
  });
});

// Hand-derived quirk cases. Shared pieces: c1 = 8 distinct 3-letter words (no stopwords,
// no transition substrings), 40 characters after padding; so L1 = 0.5 and u1 = 8.
const C1 = 'cat dog red big run top hot funxxxxxxxxx';

describe('TLDR quirks (hand-derived)', () => {
  it('splits tokens on U+0085, U+001C and NBSP but not on U+200B or U+FEFF (Python str.split)', () => {
    // 'a\u0085b\u001cc\u00a0d e f g h' → Python split: a b c d e f g h = 8 tokens → in range.
    // 'a\u200bb\ufeffc d e f g' → U+200B/U+FEFF are not whitespace: 'a​b﻿c' d e f g = 5 tokens → out.
    const eight = 'a\u0085b\u001cc\u00a0d e f g h';
    const five = 'a\u200bb\ufeffc d e f g';
    expect(tldrRewardBreakdown(eight, five).token_count1).toBe(8);
    expect(tldrRewardBreakdown(eight, five).token_count2).toBe(5);
    expect(tldrReward(eight, five)).toBe(0.0);
  });

  it('counts an astral emoji as one character (Python len) in the length ratio', () => {
    // c2 = the vectors' ratio_exact_1.6 elaboration (64 chars) with its final 'ramxx' replaced by
    // 'ramx😀' → still 64 code points (65 UTF-16 units): ratio 64/40 = 1.6, band 1.0.
    const c2 = 'cup pen box jam owl pig cow fox yak elk ant bee ox gnu emu ramx\u{1F600}';
    const b = tldrRewardBreakdown(C1, c2);
    expect(b.len2).toBe(64);
    expect(b.length_ratio).toBe(1.6);
    expect(b.level2_reward).toBe(1.0);
  });

  it('lowers a word-final Σ to ς as CPython does, so ΟΔΟΣ and οδοσ are two words', () => {
    // CPython str.lower() applies Final_Sigma: 'ΟΔΟΣ' → 'οδος' (final ς) ≠ 'οδοσ' (typed σ).
    // words: οδος, οδοσ, a, b, c, d, e, f → 8 unique.
    expect(tldrRewardBreakdown('ΟΔΟΣ οδοσ a b c d e f', 'x').unique_words1).toBe(8);
    // 'İ' lowers to 'i' + U+0307 (a combining mark, not \w): 'İz' → words 'i', 'z'.
    expect(tldrRewardBreakdown('İz', 'x').unique_words1).toBe(2);
  });

  it('matches transition phrases as substrings: "also" hits so, "was" hits as', () => {
    // c2 words: 14 neutral words + 'also' + 'was'. Substrings found, in category order:
    // elaboration: 'also'; cause_effect: 'so' (in also); time: 'as' (in was) → 3 categories,
    // scale = 0.4 + min(2·0.05, 0.6) = 0.5, transition component = 0.4·0.5 = 0.2.
    const c2 = 'cup pen box jam owl pig cow fox yak elk ant bee gnu emu also was';
    const b = tldrRewardBreakdown(C1, c2);
    expect(b.transition_words_found).toEqual(['also', 'so', 'as']);
    expect(b.categories_found).toEqual(['cause_effect', 'elaboration', 'time']);
    expect(b.transition_component).toBe(0.4 * (0.4 + 2 * 0.05));
  });

  it('does not exclude stopwords from the level-3 unique count', () => {
    // 'the a an and of to in is' → 8 unique words although all are stopwords (u1 = 8).
    expect(tldrRewardBreakdown('the a an and of to in is', 'x').unique_words1).toBe(8);
  });

  it('proceeds past level 2 when the length ratio is exactly 1.1 (band 0, gate open)', () => {
    // len1 = 40, len2 = 44 → ratio 1.1 → band (1.1-1.1)/(0.5000000000000001) = 0 but proceed.
    // c2 = 11 distinct 3-letter words = 43 chars + 1 pad = 44; u2 = 11, q = 11/8 = 1.375 →
    // L3 = ((1.375-1.3)/(2.0-1.3))·0.5; L4: no transitions, Jaccard 0 → 0.
    const c2 = 'cup pen box jam owl pig cow fox yak elk antx';
    const b = tldrRewardBreakdown(C1, c2);
    expect(b.length_ratio).toBe(1.1);
    expect(b.level2_reward).toBe(0);
    expect(b.proceed_to_level3).toBe(true);
    expect(b.level3_reward).toBe(((1.375 - 1.3) / (2.0 - 1.3)) * 0.5);
    expect(b.reward).toBe(0.5 + 0 + ((1.375 - 1.3) / (2.0 - 1.3)) * 0.5 + 0);
    // The logger's gated total stops at a zero level 2.
    expect(tldrLoggerMetrics(C1, c2).gated_total_reward).toBe(0.5);
  });

  it('splits NFD text at every combining mark (not a word character)', () => {
    // 'cafe\u0301' = c a f e + U+0301 (Mn, not \w) → word 'cafe'.
    // 'e\u0301t\u00e9' → 'e', 't\u00e9' (U+00E9 is a letter) → 2 more words: 3 in all.
    const b = tldrRewardBreakdown('cafe\u0301 e\u0301t\u00e9', 'x');
    expect(b.unique_words1).toBe(3);
  });
});
