import { describe, expect, it } from 'vitest';
import { numpyMean, numpyPairwiseSum } from '../rewards/tldr/numpy-mean.js';
import { pyFloatRepr, pyFormatFixed, pyInt, pyLen, pySplit, pySplitLines } from '../src/util/python-text.js';
import {
  checkTldrNumTurns,
  splitGrpoResponse,
  tldrAggregateMetrics,
  tldrElaborationPrompt,
  tldrFormatters,
  tldrLoggerMetrics,
  tldrSummaryPrompt,
} from '../rewards/tldr/index.js';

describe('TLDR prompts (tasks-reference §1.4)', () => {
  it('renders both agents exactly, ending with a newline', () => {
    expect(tldrSummaryPrompt('SUBREDDIT: r/x POST: y')).toBe(
      'Create a concise summary response to this post.\n\nQuery:\nSUBREDDIT: r/x POST: y\n\n' +
        'IMPORTANT INSTRUCTIONS:\n- Provide a brief, focused summary in one sentence or a few sentences\n' +
        '- Be factual and informative\n',
    );
    expect(tldrElaborationPrompt('P')).toBe(
      'Create a detailed summary response to this post.\n\nOriginal Query:\nP\n\n' +
        'IMPORTANT INSTRUCTIONS:\n- Use more unique words\n- Use some transition words to improve flow\n',
    );
  });

  it('is single-turn only', () => {
    expect(() => checkTldrNumTurns(2)).toThrow(/num_turns.*got 2/);
    expect(() => checkTldrNumTurns(1)).not.toThrow();
  });

  it('returns the error text for an empty prompt', () => {
    expect(tldrSummaryPrompt('')).toBe('Error: No prompt provided.');
    expect(tldrFormatters[1]({})).toBe('Error: No prompt provided.');
  });
});

describe('GRPO baseline response split', () => {
  it('splits on the delimiter, then "Paragraph 2:", then len // 3 code points', () => {
    expect(splitGrpoResponse(' Paragraph 1: a b [PARAGRAPH_SPLIT] Paragraph 2:  c d ')).toEqual(['a b', 'c d']);
    expect(splitGrpoResponse('PARAGRAPH 1: one\nparagraph 2: two')).toEqual(['one', 'two']);
    // 'abcdefghi' has 9 code points → split at 3.
    expect(splitGrpoResponse('abcdefghi')).toEqual(['abc', 'defghi']);
    // 2 code points → 2 // 3 = 0 → at least 1.
    expect(splitGrpoResponse('😀x')).toEqual(['😀', 'x']);
  });
});

describe('Python str semantics', () => {
  it('pySplit / pyLen / pySplitLines', () => {
    expect(pySplit(' a\u3000b\u001fc ')).toEqual(['a', 'b', 'c']);
    expect(pyLen('a😀')).toBe(2);
    // splitlines: \r\n is one break; a trailing break opens no empty line; \x1c is a break.
    expect(pySplitLines('a\r\nb\x1cc\n')).toEqual(['a', 'b', 'c']);
  });

  it('pyInt accepts what Python int() accepts', () => {
    // '+3' → 3, '0_5' → 5, '٣' (Arabic-Indic three) → 3, '-0' → 0; '1.0', '1__0', '' refused.
    expect(['+3', '0_5', '\u0663', '-0', '1.0', '1__0', ''].map(pyInt)).toEqual([3, 5, 3, 0, null, null, null]);
  });

  it('pyFormatFixed rounds exact ties half to even (JS toFixed rounds them up)', () => {
    // 0.03125 = 1/32 is exact in binary: a true tie at 4 places → even digit 2.
    expect(pyFormatFixed(0.03125, 4)).toBe('0.0312');
    expect(pyFormatFixed(0.09375, 4)).toBe('0.0938'); // 3/32: tie, even neighbour is 8
    expect(pyFormatFixed(0.5395, 4)).toBe('0.5395');
    expect(pyFormatFixed(-0.0, 4)).toBe('-0.0000');
  });

  it('pyFloatRepr prints like Python repr', () => {
    expect([5, 0.1 + 0.2, 1e16, 1.5e-5, 0.0001, -2.5].map(pyFloatRepr)).toEqual([
      '5.0',
      '0.30000000000000004',
      '1e+16',
      '1.5e-05',
      '0.0001',
      '-2.5',
    ]);
  });
});

describe('logger means use numpy pairwise summation', () => {
  it('differs from a left-to-right sum where numpy does', () => {
    // [1e16, 1 ×8]: numpy keeps 8 accumulators r0..r7 = the first 8 values, then
    // ((r0+r1)+(r2+r3)) + ((r4+r5)+(r6+r7)) = (1e16 + 2) + 4 (1e16+1 rounds to 1e16, ulp 2),
    // then adds the 9th: 1e16+7 is a tie between 1e16+6 and 1e16+8 → even significand → 1e16+8.
    // Left to right every +1 rounds away: 1e16.
    const values = [1e16, 1, 1, 1, 1, 1, 1, 1, 1];
    expect(numpyPairwiseSum(values)).toBe(1e16 + 8);
    expect(values.reduce((a, b) => a + b, 0)).toBe(1e16);
    expect(numpyMean(values)).toBe((1e16 + 8) / 9);
  });

  it('aggregates logger metrics under turn_1/tldr/', () => {
    const m = tldrLoggerMetrics('a b c d e f g h', 'a b c d e f g h i j k l m n o p');
    const agg = tldrAggregateMetrics([m, m]);
    expect(agg['turn_1/tldr/summary_tokens']).toBe(8);
    expect(agg['turn_1/tldr/has_transition_words_rate']).toBe(m.has_transition_words ? 1 : 0);
    expect(Object.keys(agg)).toHaveLength(21);
    expect(tldrAggregateMetrics([])).toEqual({});
  });
});
