/**
 * CoopHE reward, prompts and follow-ups against the shared folder's vectors/coophe.json (values
 * returned by the original Python code), plus hand-derived cases for quirks the vectors do not cover.
 * The vectors embed CoopHumanEval problem text, which has no licence and is never committed: without
 * the shared folder the vector checks skip (test/shared-fixtures.ts) and the hand-derived ones run.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CoopHEConfigError,
  CoopHEFeedback,
  CoopHERewardRunner,
  checkAuxCallWithoutAssignment,
  checkAuxFunctionUsage,
  cleanupCode,
  coopHEAuxPrompt,
  coopHEMainPrompt,
  coopHEProblemSchema,
  coopHEReward,
  extractImportsFromPrompt,
  extractSpecificFunction,
  extractTestCases,
  isWrapperFunction,
  lastJsonObject,
  sliceSandboxTests,
  type CoopHEProblem,
  type CoopHERewardBreakdown,
} from '../rewards/coophe/index.js';
import { readSharedJson, sharedOrSkip } from './shared-fixtures.js';

interface VectorCase {
  name: string;
  task_id: string;
  entry_point: string;
  aux_completion: string;
  main_completion: string;
  prompt: string;
  test: string;
  expected_reward: number;
  expected_reward_fork: number;
  breakdown: Record<string, unknown>;
}
interface FollowUpCase {
  case: string;
  mode: 'level_feedback' | 'plain';
  sandbox_slice: number;
  tests_sandbox: string;
  prompt_history_per_agent: [string[], string[]];
  response_history_per_agent: [string[], string[]];
  aux_prompt: string;
  main_prompt: string;
}
interface Vectors {
  cases: VectorCase[];
  crash_cases: Array<Omit<VectorCase, 'expected_reward' | 'expected_reward_fork' | 'breakdown' | 'prompt' | 'test'> & { raises: string }>;
  prompts: {
    first_turn_prompts: Record<string, { aux: string; main: string }>;
    followup_prompts: FollowUpCase[];
  };
}

const shared = readSharedJson<Vectors>(
  'vectors/coophe.json',
  "the CoopHE reward (upstream and fork variants) and every breakdown key against the original Python's, the exit() crash case, and the first-turn and follow-up prompts",
);
const vectors = shared.present ? shared.value : undefined;
const problemOf = (c: VectorCase): CoopHEProblem => ({ task_id: c.task_id, prompt: c.prompt, test: c.test, entry_point: c.entry_point });

// Keys of the breakdown that mark how far the computation went (absent in a vector = not reached).
const LEVEL_KEYS = [
  'combined_code', 'syntax_passed', 'syntax_message', 'test_cases_list', 'passed_tests', 'total_tests',
  'timeout_count', 'test_reward', 'main_uses_aux', 'bonus_reward', 'is_wrapper', 'anti_wrapper_bonus',
  'has_ignored_calls', 'ignored_calls',
] as const;

let upstream: CoopHERewardRunner;
let fork: CoopHERewardRunner;
const upstreamResults = new Map<string, CoopHERewardBreakdown>();
const forkResults = new Map<string, number>();

beforeAll(async () => {
  // The spec's 10 s per-test limit, so the two infinite-loop cases run as in the reference
  // (3 × 10 s); everything runs at once to keep the file well under a minute.
  upstream = new CoopHERewardRunner({ concurrency: 12, log: () => undefined });
  fork = new CoopHERewardRunner({ variant: 'fork', concurrency: 12, log: () => undefined });
  await Promise.all(
    (vectors?.cases ?? []).flatMap((c) => [
      upstream.breakdown(c.aux_completion, c.main_completion, problemOf(c)).then((b) => upstreamResults.set(c.name, b)),
      fork.reward(c.aux_completion, c.main_completion, problemOf(c)).then((r) => forkResults.set(c.name, r)),
    ]),
  );
}, 90_000);

describe('CoopHE reward vectors', () => {
  it('has the vectors file', (ctx) => {
    expect(sharedOrSkip(shared, ctx).cases.length).toBeGreaterThanOrEqual(20);
  });

  for (const c of vectors?.cases ?? []) {
    it(`${c.name}: upstream reward, fork reward and every breakdown key`, () => {
      const b = upstreamResults.get(c.name)!;
      expect(b.reward).toBe(c.expected_reward);
      expect(forkResults.get(c.name)).toBe(c.expected_reward_fork);
      for (const [key, value] of Object.entries(c.breakdown)) {
        expect((b as unknown as Record<string, unknown>)[key], key).toEqual(value);
      }
      for (const key of LEVEL_KEYS) {
        if (!(key in c.breakdown)) expect(b[key], `${key} should not be reached`).toBeUndefined();
      }
    });
  }

  it('counts a candidate exit() as failed tests instead of crashing (the reference raises SystemExit)', async (ctx) => {
    const vectors = sharedOrSkip(shared, ctx);
    const crash = vectors.crash_cases[0];
    const base = vectors.cases.find((c) => c.task_id === crash.task_id)!;
    const b = await upstream.breakdown(crash.aux_completion, crash.main_completion, problemOf(base));
    // 0.4 + 0.6 (both defined) + 0.5 (syntax) + 0/5 tests; no bonus without a passed test.
    expect(b.reward).toBe(1.5);
    expect(b.passed_tests).toBe(0);
    expect(b.sandbox?.tests.every((t) => t.status === 'fail' && t.errorType === 'SystemExit')).toBe(true);
  });
});

describe('CoopHE reward, hand-derived cases', () => {
  const problem: CoopHEProblem = {
    task_id: 'hand/0',
    prompt: 'def add_one(xs):\n    """Add one to each element."""\n',
    test: 'def check(candidate):\n    assert candidate([1]) == [2]\n    assert candidate([]) == []\n    assert candidate([0, 5]) == [1, 6]\n',
    entry_point: 'add_one',
  };
  const aux = 'def aux(x):\n    return x + 1\n';

  it('applies the -0.5 deduction only to the exact `aux (x)` form', async () => {
    const main = 'def add_one(xs):\n    out = []\n    for x in xs:\n        aux (x)\n        out.append(aux(x))\n    return out\n';
    const b = await upstream.breakdown(aux, main, problem);
    // 0.4 + 0.6 + 0.5 + 3/3 + 0.5 (uses aux) + 1.0 (not a wrapper) - 0.5 = 3.5
    expect(b.ignored_calls).toEqual(['Line 4: aux (x)']);
    expect(b.reward).toBe(3.5);
  });

  it('prepends prompt imports and drops helpers other than aux', async () => {
    const p = { ...problem, prompt: 'from typing import List\n\n\n' + problem.prompt };
    const auxWithHelper = 'def helper(x):\n    return x + 1\n\ndef aux(x):\n    return helper(x)\n';
    const main = 'def add_one(xs: List[int]) -> List[int]:\n    return [aux(x) for x in xs]\n';
    const b = await upstream.breakdown(auxWithHelper, main, p);
    expect(b.combined_code?.startsWith('from typing import List\n\ndef aux(x):')).toBe(true);
    // helper() was dropped: the tests with elements raise NameError, [] == [] passes.
    // A single `return …aux…` line is a wrapper: 0.4 + 0.6 + 0.5 + 1/3 + 0.5, no +1.0.
    expect(b.passed_tests).toBe(1);
    expect(b.is_wrapper).toBe(true);
    expect(b.reward).toBe(0.4 + 0.6 + 0.5 + (1 / 3) * 1.0 + 0.5);
  });

  it('stops at level 1 without starting Python when main is missing', async () => {
    const b = await upstream.breakdown(aux, 'def other(xs):\n    return xs\n', problem);
    expect(b.reward).toBe(0.4);
    expect(b.sandbox).toBeUndefined();
  });

  it('gives 1.1 (no aux) or 1.5 when the test block has no asserts', async () => {
    const p = { ...problem, test: 'def check(candidate):\n    pass\n' };
    expect(await upstream.reward(aux, 'def add_one(xs):\n    return [aux(x) for x in xs]\n', p)).toBe(1.5);
    expect(await upstream.reward('', 'def add_one(xs):\n    return [x + 1 for x in xs]\n', p)).toBe(1.1);
  });

  it('coopHEReward works with a given runner and validates the problem', async () => {
    // `ys = [aux(x) …]` is not `v = aux(…)`, so no wrapper: 0.4 + 0.6 + 0.5 + 1.0 + 0.5 + 1.0.
    expect(await coopHEReward(aux, 'def add_one(xs):\n    ys = [aux(x) for x in xs]\n    return ys\n', problem, { runner: upstream })).toBe(4.0);
    await expect(upstream.reward(aux, '', { ...problem, entry_point: '' })).rejects.toThrow(/entry_point/);
    expect(coopHEProblemSchema.safeParse({ prompt: 'x', test: 'y', entry_point: 'f' }).success).toBe(false);
  });

  it('rejects an unknown variant at construction', () => {
    expect(() => new CoopHERewardRunner({ variant: 'newest' as 'fork' })).toThrow(/variant/);
  });
});

describe('CoopHE text processing quirks (hand-derived)', () => {
  it('cleanupCode keeps function blocks only and splits at nested defs', () => {
    const code = 'Here you go:\n```python\nimport os\nX = 1\ndef f(a):\n    def g():\n        return 1\n    return g()\nprint(f(1))\n```\nThis works.';
    // "import os", "X = 1" and the call are outside any block; the nested def closes f's block,
    // and `return g()` (not indented past g's def) closes g's block and is lost.
    expect(cleanupCode(code)).toBe('def f(a):\n\n    def g():\n        return 1');
  });

  it('extractSpecificFunction takes the named function from the cleaned text', () => {
    expect(extractSpecificFunction('def helper():\n    return 1\n\ndef aux(n):\n    return helper()\n', 'aux')).toBe('def aux(n):\n    return helper()');
    expect(extractSpecificFunction('def aux(n):\n    return n\n', 'main')).toBe('');
  });

  it('extractTestCases needs whitespace after assert and replaces candidate inside strings too', () => {
    const test = "def check(candidate):\n    assert candidate('candidate') == 1\n    assert(candidate(2) == 2)\n    assert candidate('candidate') == 1\n\ndef other():\n    assert candidate(3)\n";
    expect(extractTestCases(test, 'f')).toEqual(["assert f('f') == 1"]);
  });

  it('extractImportsFromPrompt keeps import lines once', () => {
    expect(extractImportsFromPrompt('from typing import List\nimport math\n  from typing import List\ndef f(): pass\n')).toBe('from typing import List\nimport math');
  });

  it('strips Python whitespace (U+001C is whitespace in Python, U+FEFF is not)', () => {
    expect(extractImportsFromPrompt('\x1cimport math\x1c')).toBe('import math');
    expect(extractImportsFromPrompt('\ufeffimport math')).toBe('');
  });

  it('the deduction regex fires only for `aux` + one space + one-character argument', () => {
    expect(checkAuxCallWithoutAssignment('def f(n):\n    aux (n)\n    return 1').calls).toEqual(['Line 2: aux (n)']);
    expect(checkAuxCallWithoutAssignment('def f(n):\n    aux(n)\n    aux (n, x)\n    return 1').found).toBe(false);
  });

  it('aux usage is a text match (comments count); \\b is Unicode-aware', () => {
    expect(checkAuxFunctionUsage('def f(n):\n    # aux(n)\n    return n')).toBe(true);
    expect(checkAuxFunctionUsage('def f(n):\n    return éaux(n)')).toBe(false);
    expect(checkAuxFunctionUsage('def f(n):\n    return my_aux(n)')).toBe(false);
  });

  it('the wrapper heuristic keeps the reference docstring flaw', () => {
    // A closing `"""` on its own line re-opens the docstring, hiding the two code lines below.
    const main = 'def f(n):\n    """\n    Doc.\n    """\n    v = aux(n) * 2\n    return v + 1\n';
    expect(isWrapperFunction(main)).toBe(true);
    expect(isWrapperFunction('def f(n):\n    v = aux(n) * 2\n    return v + 1\n')).toBe(false);
    expect(isWrapperFunction('def f(n):\n    r = aux(n)\n    return r\n')).toBe(true);
  });

  it('sliceSandboxTests keeps the first / last asserts and the import preamble', () => {
    const test = 'import math\n\ndef check(candidate):\n    assert candidate(1) == 1\n    assert candidate(2) == 2\n    assert candidate(3) == 3\n';
    expect(sliceSandboxTests(test, 1)).toBe('import math\ndef check(candidate):\n    assert candidate(1) == 1\n');
    expect(sliceSandboxTests(test, -2)).toBe('import math\ndef check(candidate):\n    assert candidate(2) == 2\n    assert candidate(3) == 3\n');
    expect(sliceSandboxTests(test, 'all')).toBe(test);
  });

  it('lastJsonObject takes the last parseable object of the reply', () => {
    expect(lastJsonObject('x {"aux": "a"} y {"aux": "b", "main": {"k": 1}} {bad}')).toEqual({ aux: 'b', main: { k: 1 } });
    expect(() => lastJsonObject('no json')).toThrow();
  });
});

describe('CoopHE prompts', () => {
  it('renders the 16 first-turn prompt pairs of the vectors', (ctx) => {
    const firstTurn = Object.entries(sharedOrSkip(shared, ctx).prompts.first_turn_prompts);
    expect(firstTurn.length).toBe(16);
    for (const [taskId, expected] of firstTurn) {
      // The raw problem text and entry point are recovered from the rendered pair; the test checks
      // the templates and the parameter extraction around them.
      const prompt = expected.aux.split('Problem:\n')[1].split('\n\nIMPORTANT INSTRUCTIONS:')[0];
      const entry = /Implement ONLY the '([^']+)' function/.exec(expected.main)![1];
      const problem = { prompt, entry_point: entry };
      expect(coopHEAuxPrompt(problem), taskId).toBe(expected.aux);
      expect(coopHEMainPrompt(problem), taskId).toBe(expected.main);
    }
  });

  it('gives the reference error text when the problem has no parameters', () => {
    expect(coopHEAuxPrompt({ prompt: 'def f():\n    pass\n', entry_point: 'f' })).toBe('Error: Could not extract function information from prompt.');
  });

  it('renders every level_feedback and plain follow-up of the vectors', async (ctx) => {
    const vectors = sharedOrSkip(shared, ctx);
    const fallback = vectors.cases.find((c) => c.name === 'perfect_collab')!;
    const level = new CoopHEFeedback({ mode: 'level_feedback', sandboxSlice: 1, runner: upstream });
    const plain = new CoopHEFeedback({ mode: 'plain' });
    const followUps = vectors.prompts.followup_prompts;
    expect(followUps.length).toBe(14);
    await Promise.all(
      followUps.map(async (f) => {
        const base = vectors.cases.find((c) => c.name === f.case) ?? fallback;
        const problem = problemOf(base);
        expect(coopHEAuxPrompt(problem)).toBe(f.prompt_history_per_agent[0][0]);
        expect(sliceSandboxTests(problem.test, f.sandbox_slice)).toBe(f.tests_sandbox);
        const out = await (f.mode === 'plain' ? plain : level).followUps({
          problem,
          promptHistory: f.prompt_history_per_agent,
          responseHistory: f.response_history_per_agent,
        });
        expect(out.aux, `${f.case} ${f.mode} aux`).toBe(f.aux_prompt);
        expect(out.main, `${f.case} ${f.mode} main`).toBe(f.main_prompt);
      }),
    );
  });

  it('expert_edits: needs an expert at construction, retries, then builds the follow-up', async (ctx) => {
    expect(() => new CoopHEFeedback({ mode: 'expert_edits' })).toThrow(CoopHEConfigError);
    const problem = problemOf(sharedOrSkip(shared, ctx).cases[0]);
    const prompts: string[] = [];
    let calls = 0;
    const expert = async (prompt: string) => {
      prompts.push(prompt);
      calls++;
      if (calls === 1) throw new Error('rate limited');
      return 'Sure: {"aux": "  def aux(n):\\n    return n > 1  ", "main": "Perfect! No changes needed!"}';
    };
    const fb = new CoopHEFeedback({ mode: 'expert_edits', expert });
    const out = await fb.followUps({
      problem,
      promptHistory: [['P-aux'], ['P-main']],
      responseHistory: [['R-aux'], ['R-main']],
    });
    expect(calls).toBe(2);
    expect(prompts[0]).toContain('def x_or_y(n, x, y)');
    expect(out.aux).toBe(
      'History: previous prompts:\n- Turn 1 prompt:\nP-aux\n\nHistory: your previous aux(...) responses:\n- Turn 1 response:\nR-aux\n\n' +
        'Here is edited snippet from an expert model:\ndef aux(n):\n    return n > 1\n\nRevise your aux(...) accordingly. Output ONLY the function code with no extra text.',
    );
    expect(out.main.endsWith('Here is edited snippet from an expert model:\nPerfect! No changes needed!\n\nRevise your x_or_y(...) accordingly. Output ONLY the function code with no extra text.')).toBe(true);

    const failing = new CoopHEFeedback({ mode: 'expert_edits', expert: async () => 'no json here', log: () => undefined });
    const empty = await failing.followUps({ problem, promptHistory: [[], []], responseHistory: [['a'], ['b']] });
    expect(empty.aux).toContain('Here is edited snippet from an expert model:\n\n\nRevise your aux(...)');
  });
});

afterAll(() => {
  upstreamResults.clear();
});
