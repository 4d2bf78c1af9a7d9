import { describe, expect, it } from 'vitest';
import { TLDREnv, TLDR_MAX_REWARD } from '../envs/index.js';
import { readFixtureJson } from './shared-fixtures.js';

interface TLDRCase {
  name: string;
  completion1: string;
  completion2: string;
  expected_reward: number;
}
// A committed copy of ../shared/vectors/tldr.json (test/fixtures/tldr/NOTICE.md).
const vectors = readFixtureJson<{ cases: TLDRCase[] }>('tldr/vectors.json');

const row = { prompt: 'SUBREDDIT: r/test TITLE: a title POST: a post body' };

describe('TLDREnv', () => {
  it('one turn: agent prompts, vector rewards, done after the step', async () => {
    const env = new TLDREnv();
    expect(env.horizon).toBe(1);
    const s0 = env.initialState(row);
    expect(env.observe(s0, 0)).toBe(
      'Create a concise summary response to this post.\n\nQuery:\n' + row.prompt +
        '\n\nIMPORTANT INSTRUCTIONS:\n- Provide a brief, focused summary in one sentence or a few sentences\n- Be factual and informative\n',
    );
    expect(env.observe(s0, 1)).toBe(
      'Create a detailed summary response to this post.\n\nOriginal Query:\n' + row.prompt +
        '\n\nIMPORTANT INSTRUCTIONS:\n- Use more unique words\n- Use some transition words to improve flow\n',
    );
    for (const c of vectors.cases.filter((_, i) => i % 5 === 0)) {
      const r = await env.step(s0, [c.completion1, c.completion2]);
      expect(r.reward, c.name).toBe(c.expected_reward);
      expect(r.done).toBe(true);
      expect((r.info.breakdown as { reward: number }).reward).toBe(c.expected_reward);
    }
  });

  it('scale and shift apply to reward and max reward', async () => {
    const env = new TLDREnv({ rewardScale: 2, rewardShift: -1 });
    const c = vectors.cases.find((x) => x.expected_reward > 0)!;
    const r = await env.step(env.initialState(row), [c.completion1, c.completion2]);
    expect(r.reward).toBe(c.expected_reward * 2 - 1);
    expect(r.info.rawReward).toBe(c.expected_reward);
    expect(env.globalInfo(r.next)).toEqual({ turn: 1, numTurns: 1, lastReward: c.expected_reward * 2 - 1, maxReward: TLDR_MAX_REWARD * 2 - 1 });
  });
});
