import { describe, expect, it } from 'vitest';
import { loadHouseBuildTasks } from '../src/data/index.js';
import { globalFeaturesOf, runEpisode, type CoMLRLState } from '../src/decpomdp/index.js';
import type { HouseBuildTask } from '../src/data/schemas.js';
import { HOUSEBUILD_PAPER_REWARD_SHIFT, HouseBuildEnv } from '../envs/index.js';
import { readFixtureJson } from './shared-fixtures.js';

interface FollowUp {
  scenario: string;
  mode: string;
  agent_completions: [string, string];
  prompts: [string, string];
}
interface RewardCase {
  name: string;
  agent1: string;
  agent2: string;
  expected_reward: number;
}
// A committed copy of ../shared/vectors/housebuild.json (MIT; test/fixtures/housebuild/NOTICE.md).
const vectors = readFixtureJson<{
  cases: RewardCase[];
  prompts: {
    first_turn_prompts_no_chat_template: Record<string, { agent1: string; agent2: string }>;
    followup_prompts_0002: FollowUp[];
  };
}>('housebuild/vectors.json');
const followUp = (scenario: string, mode: string) =>
  vectors.prompts.followup_prompts_0002.find((f) => f.scenario === scenario && f.mode === mode)!;
const perfect = vectors.cases.find((c) => c.name === 'perfect_fit_with_kill')!;

describe('HouseBuildEnv', async () => {
  const [task0002] = await loadHouseBuildTasks();

  it('a full 4-turn episode: vector prompts, rewards with the paper shift, termination', async () => {
    // Seed 42 draws attacks [3, 1, 1] (dmg 5 on 5 HP → penalty 0.1), the state the prompt vectors used.
    const env = new HouseBuildEnv({ seed: 42, rewardShift: HOUSEBUILD_PAPER_REWARD_SHIFT });
    expect(env.horizon).toBe(4);
    expect(env.rpgState?.spiderAtkValues).toEqual([3, 1, 1]);
    const partial = followUp('partial_no_kill', 'score_feedback');
    const script = [partial.agent_completions, [perfect.agent1, perfect.agent2], ['', 'not a command'], [perfect.agent1, perfect.agent2]];
    const seen: string[][] = [];
    const ep = await runEpisode<HouseBuildTask, CoMLRLState<HouseBuildTask>>(env, task0002, (obs, _s, turn) => {
      seen.push([...obs]);
      return script[turn];
    });

    // Turn 1: the rendered first-turn prompts of the vectors (no chat template).
    const first = vectors.prompts.first_turn_prompts_no_chat_template.house_build_0002;
    expect(seen[0]).toEqual([first.agent1, first.agent2]);
    // Turn 2: the vectors' score_feedback follow-ups for that joint action.
    expect(seen[1]).toEqual(partial.prompts);
    // The reported previous reward is the turn-1 raw reward (match score − 0.1 penalty).
    const raw1 = ep.steps[0].info.rawReward as number;
    expect(raw1.toFixed(4)).toBe('0.5395');
    expect(ep.steps[0].reward).toBe(raw1 - 1);
    // Turn 3: perfect build with /kill → 1.0 → shifted 0, and the feedback says so at turn 3.
    expect(ep.steps[1].info.rawReward).toBe(1);
    expect(seen[2][0]).toContain('Score feedback:\n- Turn: 3\n- Previous reward: 1.0000\n');
    expect(seen[2][1].endsWith(`Your previous commands:\n${perfect.agent2}`)).toBe(true);
    // Turn 4: nothing built (only the 122 air cells of 294 match), nobody killed the spiders: − 0.1.
    expect(ep.steps[2].info.rawReward).toBe(122 / 294 - 0.1);
    expect(seen[3][0]).toContain('- Previous reward: 0.3150\n');
    // Agent 1's empty completion: no "previous commands" block at all.
    expect(seen[3][0]).not.toContain('Your previous commands:');

    expect(ep.history.rewards).toHaveLength(4);
    expect(ep.steps.map((s) => s.done)).toEqual([false, false, false, true]);
    expect(ep.states[4].endReason).toBe('horizon');
    expect(env.globalInfo(ep.states[2])).toEqual({ turn: 2, numTurns: 4, lastReward: 0, maxReward: 0 });
    const breakdown = ep.steps[1].info.breakdown as { has_kill: boolean; spider_penalty: number };
    expect(breakdown).toMatchObject({ has_kill: true, spider_penalty: 0 });
    // Numeric m_t: turn/H, cells right, IoU of the last build, spiders killed. s_0: nothing built.
    const features = ep.states.map((s) => globalFeaturesOf(env, s));
    expect(features[0]).toEqual([0, 0, 0, 0]);
    // Turn 1: no kill, so the penalty 0.1 came off the match score.
    expect(features[1][0]).toBe(1 / 4);
    expect(features[1][1]).toBeCloseTo(raw1 + 0.1, 12);
    expect(features[1][3]).toBe(0);
    // Turn 2: the perfect build with /kill; turn 3: nothing built (the 122 air cells match, no
    // non-air cell overlaps: IoU 0).
    expect(features[2]).toEqual([2 / 4, 1, 1, 1]);
    expect(features[3]).toEqual([3 / 4, 122 / 294, 0, 0]);
  });

  it('early termination: a perfect build ends the episode at threshold −0.1 with the −1 shift', async () => {
    const env = new HouseBuildEnv({ seed: 42, rewardShift: -1, earlyTerminationThreshold: -0.1 });
    const s0 = env.initialState(task0002);
    const ok = await env.step(s0, [perfect.agent1, perfect.agent2]);
    expect(ok).toMatchObject({ reward: 0, done: true, info: { earlyTerminated: true } });
    const partial = followUp('partial_no_kill', 'score_feedback');
    const go = await env.step(s0, partial.agent_completions);
    expect(go.done).toBe(false);
  });

  it('rendering: chat [system, user] on turn 1, raw text afterwards; other feedback modes', async () => {
    const env = new HouseBuildEnv({ seed: 42, feedbackMode: 'position_modification' });
    const s0 = env.initialState(task0002);
    const r0 = env.rendering(s0, 1);
    expect(r0.kind).toBe('chat');
    if (r0.kind === 'chat') expect(`${r0.system}\n\n${r0.user}`).toBe(env.observe(s0, 1));
    const partial = followUp('partial_no_kill', 'position_modification');
    const { next } = await env.step(s0, partial.agent_completions);
    expect(env.rendering(next, 0)).toEqual({ kind: 'raw' });
    expect([env.observe(next, 0), env.observe(next, 1)]).toEqual(partial.prompts);
  });

  it('without spiders the penalty is gone', async () => {
    const env = new HouseBuildEnv({ rpgState: null, numTurns: 1 });
    const r = await env.step(env.initialState(task0002), ['', '']);
    // Empty world: only the air cells match (122 of 294 in task 0002).
    expect(r.reward).toBe(122 / 294);
    expect(r.done).toBe(true);
  });
});
