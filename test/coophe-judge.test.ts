/**
 * The CoopHE judge (tests run in a trusted process, candidate calls answered with plain data)
 * against the reference way of running tests (in-process `exec` in the candidate's globals,
 * re-implemented below from the spec in a few lines of Python): for honest code, every test
 * must pass or fail exactly as there. The cases cover what crosses the process boundary: tuple
 * vs list, int vs float vs bool, NaN, -0.0, infinities, nested containers, sets, big ints,
 * bytes, complex, keyword arguments, dict order, exceptions, and the reference's double
 * evaluation (the function runs twice per `assert f(x) == y`, side effects count).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { CoopHERewardRunner, type CoopHEProblem } from '../rewards/coophe/index.js';

const CODE = String.raw`import math

def probe(k):
    values = {
        'tuple': (1, 2), 'list': [1, 2], 'float1': 1.0, 'true': True, 'nan': float('nan'),
        'negzero': -0.0, 'inf': float('-inf'), 'big': 10 ** 40, 'bytes': b'ab',
        'complex': 1 + 2j, 'frozen': frozenset({1}), 'set': {1, 2}, 'str': 'é\u2603\ud800',
        'none': None, 'dictorder': {'b': 1, 'a': 2}, 'range': range(3),
        'nested': {'a': [1, (2, 3.5)], 'b': None, 3: {4, 5}, (1, 'x'): [[], {}]},
        'sqrt': math.sqrt(2), 'tiny': 5e-324, 'emptytuple': (), 'huge': -7 ** 6000,
        'edge': [2 ** 63 - 1, -2 ** 63, 2 ** 63, -2 ** 63 - 1],
    }
    if k not in values:
        raise ValueError('unknown kind %s' % k)
    return values[k]

def echo(*args, **kwargs):
    return [list(args), kwargs]

def reads():
    return input()

def count():
    globals()['N'] = globals().get('N', 0) + 1
    return globals()['N']
`;

const TESTS = [
  "assert probe('tuple') == (1, 2)",
  "assert probe('tuple') == [1, 2]",
  "assert probe('list') == [1, 2]",
  "assert probe('list') == (1, 2)",
  "assert probe('float1') == 1",
  "assert type(probe('float1')) is float",
  "assert probe('true') == 1",
  "assert probe('true') is True",
  "assert probe('nan') == probe('nan')",
  "assert probe('nan') != probe('nan')",
  "assert str(probe('negzero')) == '-0.0'",
  "assert probe('inf') < -1e308",
  "assert probe('nested') == {'a': [1, (2, 3.5)], 'b': None, 3: {4, 5}, (1, 'x'): [[], {}]}",
  "assert probe('nested') == {'a': [1, [2, 3.5]], 'b': None, 3: {4, 5}, (1, 'x'): [[], {}]}",
  "assert probe('big') == 10 ** 40",
  "assert probe('bytes') == b'ab'",
  "assert probe('complex') == 1 + 2j",
  "assert probe('frozen') == {1}",
  "assert probe('set') == {2, 1}",
  "assert probe('str') == 'é\\u2603\\ud800'",
  "assert probe('range') == [0, 1, 2]",
  "assert list(probe('dictorder')) == ['b', 'a']",
  "assert probe('none') is None",
  "assert probe('sqrt') == math.sqrt(2)",
  "assert probe('tiny') > 0",
  "assert probe('emptytuple') == ()",
  "assert probe('huge') == -7 ** 6000",
  "assert probe('huge') == -7 ** 6000 + 1",
  "assert probe('edge') == [2 ** 63 - 1, -2 ** 63, 2 ** 63, -2 ** 63 - 1]",
  "assert echo(-7 ** 6000, 2 ** 64) == [[-7 ** 6000, 2 ** 64], {}]",
  "assert abs(probe('float1') - 0.9) < 0.2",
  "assert probe('missing') == 1",
  "assert undefined_function(1) == 1",
  "assert probe('li' + 'st') == [1, 2], 'with a message'",
  "assert sorted(probe('set')) == [1, 2]",
  "assert echo([1, (2, 3)], k={'x': 1.5}) == [[[1, (2, 3)]], {'k': {'x': 1.5}}]",
  "assert echo(*[1, 2]) == [[1, 2], {}]",
  "assert reads() == ''",
  "assert probe('list') == [1, 2]",
  'assert count() == 2',
  'assert count() == 4',
  'assert count() == 5',
  "assert probe('list') == [1, 2",
];

/** The reference: exec in one globals dict, double evaluation, any Exception fails the test. */
const REFERENCE = String.raw`
import json, math, re, sys
job = json.load(sys.stdin)
env = {'math': math} if job['inject_math'] else {}
exec(job['code'], env)
out = []
for t in job['tests']:
    try:
        m = re.search(r"assert\s+(\w+)\(([^)]*)\)\s*==\s*(.+)", t) if job['double_eval'] else None
        if m:
            eval("%s(%s)" % (m.group(1), m.group(2)), env)
            eval(m.group(3), env)
        exec(t, env)
        out.append('pass')
    except Exception:
        out.append('fail')
print(json.dumps(out))
`;

let runner: CoopHERewardRunner;

function reference(doubleEval: boolean, injectMath: boolean, tests = TESTS): string[] {
  const r = spawnSync(runner.sandbox.python, ['-I', '-c', REFERENCE], {
    input: JSON.stringify({ code: CODE, tests, double_eval: doubleEval, inject_math: injectMath }),
    encoding: 'utf8',
  });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as string[];
}

beforeAll(() => {
  runner = new CoopHERewardRunner({ testTimeoutS: 2, log: () => undefined });
});

describe('CoopHE judge: honest code keeps the reference test semantics', () => {
  for (const doubleEval of [true, false]) {
    for (const injectMath of [true, false]) {
      it(`every test passes or fails as in-process exec (double evaluation ${doubleEval}, math injected ${injectMath})`, async () => {
        const expected = reference(doubleEval, injectMath);
        const report = await runner.sandbox.run({ code: CODE, tests: TESTS, injectMath, doubleEval, imports: 'import math' }, 'reward');
        expect(report.exec).toEqual({ ok: true });
        const got = report.tests.map((t) => t.status);
        const table = TESTS.map((t, i) => `${expected[i]} ${got[i]} ${t}`).join('\n');
        expect(got, table).toEqual(expected);
        // The set is not trivial: both outcomes occur.
        expect(expected.filter((s) => s === 'pass').length).toBeGreaterThan(20);
        expect(expected.filter((s) => s === 'fail').length).toBeGreaterThan(5);
      });
    }
  }

  it('the candidate sees fresh copies of the arguments and returns fresh values each call', async () => {
    const code = 'def grow(xs):\n    xs.append(1)\n    return xs\n';
    const tests = ['assert grow([]) == [1]', 'assert grow([0]) == [0, 1]'];
    const report = await runner.sandbox.run({ code, tests, injectMath: false, doubleEval: true }, 'reward');
    expect(report.tests.map((t) => t.status)).toEqual(['pass', 'pass']);
  });

  it('a value that is not plain data fails the test even where the reference comparison would succeed (documented limit)', async () => {
    const code = 'from fractions import Fraction\n\ndef half():\n    return Fraction(1, 2)\n';
    const tests = ['assert half() == 0.5'];
    const report = await runner.sandbox.run({ code, tests, injectMath: false, doubleEval: true }, 'reward');
    expect(report.tests[0]).toMatchObject({ status: 'fail', errorType: 'TypeError' });
    expect(report.tests[0].errorMessage).toMatch(/Fraction is not plain data/);
  });

  it('candidate exceptions keep their type and message (the feedback texts quote them)', async () => {
    const code = 'def f(x):\n    return {}[x]\n';
    const report = await runner.sandbox.run({ code, tests: ["assert f('k') == 1"], injectMath: false, doubleEval: false }, 'feedback');
    expect(report.tests[0]).toEqual({ status: 'fail', errorType: 'KeyError', errorMessage: "'k'" });
  });
});

/** Judge processes carrying `tag` on their command line. */
function judges(tag: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(`--comlrl-judge=${tag}\0`)) found.push(Number(entry));
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}

const inc: CoopHEProblem = {
  task_id: 'judge/0',
  prompt: 'def inc(n):\n    """Return n + 1."""\n',
  test: 'def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(2) == 3\n',
  entry_point: 'inc',
};
const AUX = 'def aux(n):\n    return n + 1\n';
const MAIN = 'def inc(n):\n    r = aux(n)\n    r = r * 1\n    return r\n';

describe.runIf(process.platform === 'linux')('CoopHE judge processes', () => {
  it('one judge serves consecutive calls; a judge that dies is replaced', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'comlrl-judges-'));
    try {
      const r = new CoopHERewardRunner({ concurrency: 1, tmpDir: dir, log: () => undefined });
      expect(await r.reward(AUX, MAIN, inc)).toBe(4.0);
      const first = judges(r.sandbox.judgeTag);
      expect(first).toHaveLength(1);
      expect(await r.reward(AUX, MAIN, inc)).toBe(4.0);
      expect(judges(r.sandbox.judgeTag)).toEqual(first);
      process.kill(first[0], 'SIGKILL');
      expect(await r.reward(AUX, MAIN, inc)).toBe(4.0);
      const second = judges(r.sandbox.judgeTag);
      expect(second).toHaveLength(1);
      expect(second).not.toEqual(first);
      r.sandbox.close();
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(judges(r.sandbox.judgeTag)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('idle judges neither keep Node running nor outlive it', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'comlrl-judges-'));
    try {
      const built = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'rewards', 'coophe', 'index.js');
      const script = [
        `const m = await import(${JSON.stringify(built)});`,
        `const r = new m.CoopHERewardRunner({ tmpDir: ${JSON.stringify(dir)}, log: () => {} });`,
        `console.log(await r.reward(${JSON.stringify(AUX)}, ${JSON.stringify(MAIN)}, ${JSON.stringify(inc)}), r.sandbox.judgeTag);`,
      ].join('\n');
      const t0 = Date.now();
      const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
      expect(child.status, child.stderr).toBe(0);
      const [reward, tag] = child.stdout.trim().split(' ');
      expect(reward).toBe('4');
      // Without the unref of idle judges, Node would wait for the 30 s idle timeout.
      expect(Date.now() - t0).toBeLessThan(15_000);
      const deadline = Date.now() + 2000;
      while (judges(tag).length > 0 && Date.now() < deadline) spawnSync('sleep', ['0.1']);
      expect(judges(tag)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
