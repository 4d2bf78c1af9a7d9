import { describe, expect, it } from 'vitest';
import { globalFeaturesOf, runEpisode, stepMany } from '../src/decpomdp/index.js';
import { COOPHE_PAPER_REWARD_SHIFT, CoopHEEnv } from '../envs/index.js';
import { CoopHERewardRunner } from '../rewards/coophe/index.js';
import { readSharedJson, sharedOrSkip } from './shared-fixtures.js';

interface Case {
  name: string;
  task_id: string;
  entry_point: string;
  prompt: string;
  test: string;
  aux_completion: string;
  main_completion: string;
  expected_reward: number;
}
interface FollowUp {
  case: string;
  mode: string;
  prompt_history_per_agent: [string[], string[]];
  response_history_per_agent: [string[], string[]];
  aux_prompt: string;
  main_prompt: string;
}
interface Vectors {
  cases: Case[];
  prompts: { first_turn_prompts: Record<string, { aux: string; main: string }>; followup_prompts: FollowUp[] };
}
// Reference vectors live in the shared folder (never committed here: their CoopHumanEval problem
// text has no licence); without it the episode test skips and the test-written problems still run.
const shared = readSharedJson<Vectors>(
  'vectors/coophe.json',
  "a 2-turn CoopHEEnv episode against the original Python's first-turn prompts, level_feedback follow-ups and rewards",
);
const rowOf = (c: Case) => ({ task_id: c.task_id, prompt: c.prompt, test: c.test, entry_point: c.entry_point });

// A small problem written for these tests.
const addOne = {
  task_id: 'Test/add_one',
  prompt: 'def add_one(x):\n    """Return x plus one."""\n',
  test: 'def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(5) == 6\n',
  entry_point: 'add_one',
};
const AUX = 'def aux(x):\n    return x + 1\n';
const MAIN_WRAPPER = 'def add_one(x):\n    y = aux(x)\n    return y\n';
const MAIN_FULL = 'def add_one(x):\n    y = aux(x)\n    z = y\n    return z\n';

const runner = new CoopHERewardRunner({ concurrency: 4 });

describe('CoopHEEnv', () => {
  it('a full 2-turn episode: vector prompts, level_feedback follow-ups, rewards with the paper shift', async (ctx) => {
    const vectors = sharedOrSkip(shared, ctx);
    const vCase = (name: string) => vectors.cases.find((c) => c.name === name)!;
    const vFollow = (name: string, mode: string) => vectors.prompts.followup_prompts.find((f) => f.case === name && f.mode === mode)!;
    const env = new CoopHEEnv({ runner, rewardShift: COOPHE_PAPER_REWARD_SHIFT });
    expect(env.horizon).toBe(2);
    const first = vCase('all_tests_fail_uses_aux');
    const second = vCase('perfect_collab');
    expect(second.task_id).toBe(first.task_id);
    const follow = vFollow('all_tests_fail_uses_aux', 'level_feedback');
    const row = rowOf(first);
    const seen: string[][] = [];
    const ep = await runEpisode(env, row, (obs, _s, turn) => {
      seen.push([...obs]);
      return turn === 0 ? [first.aux_completion, first.main_completion] : [second.aux_completion, second.main_completion];
    });
    const firstTurn = vectors.prompts.first_turn_prompts[first.task_id];
    expect(seen[0]).toEqual([firstTurn.aux, firstTurn.main]);
    // The vector's follow-up was built from exactly this history.
    expect(follow.prompt_history_per_agent).toEqual([[firstTurn.aux], [firstTurn.main]]);
    expect(follow.response_history_per_agent).toEqual([[first.aux_completion], [first.main_completion]]);
    expect(seen[1]).toEqual([follow.aux_prompt, follow.main_prompt]);

    expect(ep.steps.map((s) => s.info.rawReward)).toEqual([first.expected_reward, second.expected_reward]);
    expect(ep.history.rewards).toEqual([first.expected_reward - 4, second.expected_reward - 4]);
    expect(ep.steps.map((s) => s.done)).toEqual([false, true]);
    expect(ep.states[2].endReason).toBe('horizon');
    expect(env.globalInfo(ep.states[1])).toEqual({ turn: 1, numTurns: 2, lastReward: first.expected_reward - 4, maxReward: 0 });
  });

  it('hand-derived rewards on a test-written problem, stepped together', async () => {
    const env = new CoopHEEnv({ runner, numTurns: 1 });
    const s0 = env.initialState(addOne);
    const results = await stepMany(env, [s0, s0, s0, s0], [
      [AUX, MAIN_FULL], // 0.4 + 0.6 + 0.5 + 2/2 + 0.5 (calls aux) + 1.0 (not a wrapper) = 4.0
      [AUX, MAIN_WRAPPER], // a two-line `y = aux(x)` / `return y` wrapper: 4.0 − 1.0 = 3.0
      ['', 'def add_one(x):\n    return x - 1\n'], // no aux: 0.6 + 0.5 + 0/2 = 1.1
      [AUX, 'print("hi")'], // no main: stops at 0.4
    ]);
    expect(results.map((r) => r.reward)).toEqual([4, 3, 1.1, 0.4]);
    expect(results.every((r) => r.done)).toBe(true);
    expect((results[1].info.breakdown as { is_wrapper: boolean }).is_wrapper).toBe(true);
    // Numeric m_t: turn/H, tests passed/total, raw reward/4 — nothing played at s_0; 2/2 tests,
    // 0/2 tests, and no test run (the main check stopped the reward at 0.4).
    expect(globalFeaturesOf(env, s0)).toEqual([0, 0, 0]);
    expect(results.map((r) => globalFeaturesOf(env, r.next))).toEqual([
      [1, 1, 1],
      [1, 1, 0.75],
      [1, 0, 1.1 / 4],
      [1, 0, 0.4 / 4],
    ]);
  });

  it('plain follow-ups wrapped in the turn-1 template when passthrough is off', async () => {
    const plain = new CoopHEEnv({ runner, feedbackMode: 'plain' });
    const wrapped = new CoopHEEnv({ runner, feedbackMode: 'plain', externalPromptPassthrough: false });
    const s = await plain.step(plain.initialState(addOne), [AUX, MAIN_FULL]);
    const w = await wrapped.step(wrapped.initialState(addOne), [AUX, MAIN_FULL]);
    const rawAux = plain.observe(s.next, 0);
    expect(rawAux.endsWith('Revise your aux(...) accordingly. Output ONLY the function code.')).toBe(true);
    expect(rawAux.startsWith('History: previous prompts:\n- Turn 1 prompt:\nCreate a helper function')).toBe(true);
    expect(w.info.externalPrompts).toEqual(s.info.externalPrompts);
    const wAux = wrapped.observe(w.next, 0);
    expect(wAux.startsWith(`Create a helper function for this coding problem.\n\nProblem:\n${rawAux}\n\nIMPORTANT INSTRUCTIONS:\n`)).toBe(true);
    const wMain = wrapped.observe(w.next, 1);
    expect(wMain.startsWith(`Solve this coding problem by implementing the required function.\n\nProblem:\n${plain.observe(s.next, 1)}\n`)).toBe(true);
    // The first `def` in the feedback text is the problem's, so its parameters fill the template.
    expect(wMain.endsWith('def add_one(x):\n # your function code here\nreturn result\n')).toBe(true);
  });

  it('expert_edits: needs an expert at construction; uses its JSON reply', async () => {
    expect(() => new CoopHEEnv({ runner, feedbackMode: 'expert_edits' })).toThrow(/needs an expert model/);
    const env = new CoopHEEnv({
      runner,
      feedbackMode: 'expert_edits',
      expert: async () => 'Sure: {"aux": "Perfect! No changes needed!", "main": "use aux(x) once"}',
    });
    const { next } = await env.step(env.initialState(addOne), [AUX, MAIN_WRAPPER]);
    expect(env.observe(next, 0)).toContain('Here is edited snippet from an expert model:\nPerfect! No changes needed!\n\nRevise your aux(...) accordingly. Output ONLY the function code with no extra text.');
    expect(env.observe(next, 1)).toContain('Here is edited snippet from an expert model:\nuse aux(x) once\n\nRevise your add_one(...) accordingly.');
  });

  it('early termination above the threshold skips the feedback', async () => {
    const env = new CoopHEEnv({ runner, rewardShift: -4, earlyTerminationThreshold: -0.2 });
    const s0 = env.initialState(addOne);
    const top = await env.step(s0, [AUX, MAIN_FULL]); // 4 − 4 = 0 > −0.2
    expect(top).toMatchObject({ reward: 0, done: true, info: { earlyTerminated: true } });
    const low = await env.step(s0, [AUX, MAIN_WRAPPER]); // 3 − 4 = −1
    expect(low.done).toBe(false);
    expect(env.observe(low.next, 1)).toContain('- Warning: main appears to be a thin wrapper over aux');
  });
});
