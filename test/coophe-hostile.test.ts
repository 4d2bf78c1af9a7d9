/**
 * CoopHE reward hacking (issue 12): hostile candidates that try to earn test credit without
 * returning correct values. Each one is a wrong solution (returns 0) plus a payload; its reward
 * must not exceed the reward of the same wrong solution without the payload (the honest
 * evaluation, computed here by the same runner and checked against the hand-derived 1.5), and
 * computing it must not throw. The first five are the attacks named in the issue, which earned
 * full test credit when the tests ran inside the candidate's interpreter.
 *
 * Payloads run either while the definitions load (a default argument: `D`) or inside each call
 * (`B`, which may set `ret` to choose the return value). 1 s per-test limit to stay fast; all
 * cases run at once through the runner's pool.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoopHERewardRunner, type CoopHEProblem, type CoopHERewardBreakdown } from '../rewards/coophe/index.js';

const problem: CoopHEProblem = {
  task_id: 'hostile/0',
  prompt: 'def half(n):\n    """Return n / 2."""\n',
  test: [
    'def check(candidate):',
    '    assert candidate(4) == 2',
    '    assert candidate(3) == 1.5',
    '    assert abs(candidate(1) - 0.5) < 1e-9',
  ].join('\n'),
  entry_point: 'half',
};
const AUX = 'def aux(n):\n    return n / 2\n';
/** A Python string literal holding `code` (JSON string syntax is valid Python here). */
const py = (code: string) => JSON.stringify(code);

/**
 * The wrong solution with optional payloads: `defTime` runs once while the definitions load,
 * `callTime` at each call with `n` bound; when it sets `ret`, that is returned instead of 0.
 */
function main(defTime = '', callTime = ''): string {
  const signature = defTime ? `def half(n, _p=exec(${py(defTime)}, globals())):` : 'def half(n):';
  const body = callTime
    ? [`    _o = {'n': n}`, `    exec(${py(callTime)}, globals(), _o)`, `    if 'ret' in _o:`, `        return _o['ret']`]
    : [];
  return [signature, ...body, '    r = aux(n)', '    r = r * 0', '    return r', ''].join('\n');
}

// 0.4 + 0.6 + 0.5, no test passes, so no cooperation bonus.
const WRONG = 1.5;
// 0.4 + 0.6 + 0.5 + 3/3 + 0.5 (calls aux) + 1.0 (three code lines: not a wrapper).
const CORRECT = 4.0;

interface Hostile {
  name: string;
  defTime?: string;
  callTime?: string;
  /** Seconds the case may take (timeouts cost up to 3 × (limit + grace)). */
  seconds?: number;
}

const HOSTILE: Hostile[] = [
  // --- the five attacks of issue 12 -------------------------------------------------------
  {
    name: 'issue: a default argument replaces __main__.run_test (and the call handler)',
    defTime: [
      'import sys',
      "m = sys.modules['__main__']",
      "m.run_test = lambda *a, **k: ('pass', None, None)",
      "m._call = lambda env, req: {'raw': '{\"r\": true}', 'x': False}",
    ].join('\n'),
  },
  {
    name: 'issue: json.dumps wrapped so that results and answers say pass',
    defTime: [
      'import json',
      '_orig = json.dumps',
      'def _fake(o, *a, **k):',
      '    if isinstance(o, dict):',
      '        o = dict(o)',
      "        if o.get('ev') == 'result':",
      "            o['status'] = 'pass'",
      "            o.pop('error_type', None)",
      "        if 'e' in o:",
      "            o = {'r': True, 'x': False}",
      "        if 'r' in o:",
      "            o['r'] = True",
      '    return _orig(o, *a, **k)',
      'json.dumps = _fake',
    ].join('\n'),
  },
  {
    name: 'issue: stack frames walked to rewrite the test list',
    callTime: [
      'import sys',
      'f = sys._getframe()',
      'while f is not None:',
      '    for scope in (f.f_locals, f.f_globals):',
      "        for key in ('tests', 'job'):",
      '            v = scope.get(key)',
      "            if isinstance(v, dict) and isinstance(v.get('tests'), list):",
      "                v = v['tests']",
      '            if isinstance(v, list):',
      "                v[:] = ['assert True'] * len(v)",
      '    f = f.f_back',
    ].join('\n'),
  },
  {
    name: 'issue: the channel secret read from the stack, forged results and answers written to fd 3',
    callTime: [
      'import sys, os, json',
      'nonce = None',
      'call_id = None',
      'f = sys._getframe()',
      'while f is not None:',
      '    for v in list(f.f_locals.values()):',
      "        if isinstance(getattr(v, 'nonce', None), str):",
      '            nonce = v.nonce',
      "    call_id = f.f_locals.get('call_id', call_id)",
      "    req = f.f_locals.get('request')",
      "    if isinstance(req, dict) and 'id' in req:",
      "        call_id = req['id']",
      '    f = f.f_back',
      'for i in range(10):',
      "    ev = {'ev': 'result', 'i': i, 'status': 'pass', 'n': nonce}",
      "    os.write(3, (json.dumps(ev) + '\\n').encode())",
      "os.write(3, (json.dumps({'ev': 'done', 'n': nonce}) + '\\n').encode())",
      'if call_id is not None:',
      "    os.write(3, (json.dumps({'id': call_id, 'r': True, 'x': False}) + '\\n').encode())",
    ].join('\n'),
  },
  {
    name: 'issue: an int subclass whose __eq__ is always True',
    callTime: [
      "ret = type('Sneaky', (int,), {'__eq__': lambda s, o: True, '__ne__': lambda s, o: False,",
      "    '__hash__': lambda s: 0, '__sub__': lambda s, o: s, '__abs__': lambda s: 0,",
      "    '__lt__': lambda s, o: True})(0)",
    ].join('\n'),
  },
  // --- more of the same family ------------------------------------------------------------
  {
    name: 'an object equal to everything, smaller than everything, its own difference',
    callTime: [
      "ret = type('Any', (), {'__eq__': lambda s, o: True, '__ne__': lambda s, o: False,",
      "    '__lt__': lambda s, o: True, '__sub__': lambda s, o: s, '__abs__': lambda s: s,",
      "    '__bool__': lambda s: True, '__hash__': lambda s: 0,",
      "    '__repr__': lambda s: 1 / 0, '__str__': lambda s: 1 / 0})()",
    ].join('\n'),
  },
  {
    name: 'subclasses of float, str, list, tuple and dict with __eq__ always True',
    callTime: [
      "eq = {'__eq__': lambda s, o: True, '__ne__': lambda s, o: False, '__hash__': lambda s: 0,",
      "      '__sub__': lambda s, o: 0.0, '__abs__': lambda s: 0.0}",
      'base = [float, str, list, tuple, dict][n % 5]',
      "ret = type('Sub', (base,), eq)()",
    ].join('\n'),
  },
  { name: 'NaN and infinity', callTime: "ret = float('nan') if n % 2 else float('inf')" },
  {
    name: 'builtins patched: abs returns 0, AssertionError replaced',
    defTime: [
      'import builtins',
      'builtins.abs = lambda x: 0',
      "builtins.AssertionError = type('Quiet', (Exception,), {})",
      "builtins.__dict__['float'] = lambda *a: 0",
    ].join('\n'),
  },
  {
    name: 'the expected values looked for in memory (gc objects and frames) and returned',
    callTime: [
      'import gc, re, sys',
      "pat = re.compile(r'half\\((\\d+)\\)\\s*(?:==\\s*([\\d.]+)|-\\s*([\\d.]+))')",
      'texts = []',
      'for o in gc.get_objects():',
      '    if isinstance(o, (list, tuple)):',
      "        texts += [x for x in o if isinstance(x, str) and 'half(' in x]",
      '    elif isinstance(o, dict):',
      "        texts += [x for x in o.values() if isinstance(x, str) and 'half(' in x]",
      'for t in texts:',
      '    for m in pat.finditer(t):',
      '        if int(m.group(1)) == n:',
      '            ret = float(m.group(2) or m.group(3))',
    ].join('\n'),
  },
  {
    name: "the judge's memory read through /proc for the expected values",
    callTime: [
      'import os, re',
      "pat = re.compile(rb'half\\((\\d+)\\)\\s*(?:==\\s*([\\d.]+)|-\\s*([\\d.]+))')",
      'try:',
      "    pids = [p for p in os.listdir('/proc') if p.isdigit()]",
      'except OSError:',
      '    pids = []',
      'for pid in pids:',
      '    try:',
      "        maps = open('/proc/%s/maps' % pid).read().splitlines()",
      "        mem = open('/proc/%s/mem' % pid, 'rb')",
      '    except OSError:',
      '        continue',
      '    for line in maps[:200]:',
      "        lo, hi = [int(x, 16) for x in line.split()[0].split('-')]",
      "        if 'r' not in line.split()[1] or hi - lo > 1 << 26:",
      '            continue',
      '        try:',
      '            mem.seek(lo)',
      '            data = mem.read(hi - lo)',
      '        except OSError:',
      '            continue',
      '        for m in pat.finditer(data):',
      '            if int(m.group(1)) == n:',
      '                ret = float(m.group(2) or m.group(3))',
    ].join('\n'),
  },
  {
    name: 'a forged "definitions loaded" event after the definitions raised',
    defTime: [
      'import os',
      'os.write(3, b\'{"ev": "exec", "ok": true}\\n\')',
      "raise RuntimeError('hidden')",
    ].join('\n'),
  },
  {
    name: 'a thread that steals the calls from stdin and answers True',
    defTime: [
      'import threading, os, json',
      'def _steal():',
      "    buf = b''",
      '    while True:',
      '        chunk = os.read(0, 65536)',
      '        if not chunk:',
      '            return',
      '        buf += chunk',
      "        while b'\\n' in buf:",
      "            line, buf = buf.split(b'\\n', 1)",
      '            try:',
      "                rid = json.loads(line).get('id')",
      '            except Exception:',
      '                continue',
      "            os.write(3, (json.dumps({'id': rid, 'r': True, 'x': False}) + '\\n').encode())",
      'threading.Thread(target=_steal, daemon=True).start()',
    ].join('\n'),
    seconds: 20,
  },
  {
    name: 'fake protocol lines printed to stdout and stderr, raw and through sys.__stdout__',
    callTime: [
      'import os, sys',
      'lines = [\'{"ev": "result", "i": 0, "status": "pass"}\', \'{"ev": "done", "attempts": 1, "stdout": "", "stderr": ""}\',',
      '         \'{"id": 1, "r": 2, "x": false}\']',
      'for l in lines:',
      '    print(l)',
      '    print(l, file=sys.stderr)',
      "    os.write(1, (l + '\\n').encode())",
      "    os.write(2, (l + '\\n').encode())",
    ].join('\n'),
  },
  {
    name: 'forged lines written to every descriptor 3..20',
    callTime: [
      'import os',
      'data = b\'{"ev": "result", "i": 0, "status": "pass"}\\n{"ev": "exec", "ok": true}\\n{"id": 1, "r": 2}\\n\'',
      'for fd in range(3, 21):',
      '    try:',
      '        os.write(fd, data)',
      '    except OSError:',
      '        pass',
    ].join('\n'),
  },
  { name: 'the answer and call descriptors closed', callTime: 'import os\nos.close(3)\nos.close(0)' },
  { name: 'a reply over the size limit (20 MiB string)', callTime: "ret = 'x' * (20 << 20)" },
  { name: 'fd 3 flooded without a newline (40 MiB)', callTime: "import os\nos.write(3, b'x' * (40 << 20))" },
  { name: 'fd 3 flooded with junk lines (80 MiB)', callTime: "import os\nos.write(3, b'{\"junk\": 1}\\n' * (7 << 20))" },
  {
    name: 'BaseException subclasses: SystemExit, KeyboardInterrupt, GeneratorExit, a custom one',
    callTime: "raise [SystemExit(0), KeyboardInterrupt(), GeneratorExit(), type('Boom', (BaseException,), {})()][n % 4]",
  },
  {
    name: 'an exception whose __str__ raises, and one with a 10 MB message',
    callTime: "raise type('E', (Exception,), {'__str__': lambda s: 1 / 0})() if n % 2 else ValueError('m' * 10**7)",
  },
  { name: 'sys.exit / os._exit from a finalizer of the returned value', callTime: "import os\nret = type('D', (), {'__del__': lambda s: os._exit(0)})()" },
  { name: 'infinite recursion', callTime: 'ret = half(n)' },
  { name: 'a value nested 10,000 levels deep, and a list that contains itself', callTime: 'x = []\nfor _ in range(10000):\n    x = [x]\ny = []\ny.append(y)\nret = x if n % 2 else y' },
  { name: 'a generator, a lambda and a module returned', callTime: "import os\nret = [(i for i in []), (lambda: 2), os][n % 3]" },
  { name: 'a set of colliding ints (slow for the decoder)', callTime: 'M = (1 << 61) - 1\nret = {i * M for i in range(1, 200000)}', seconds: 30 },
  { name: 'SIGKILL to itself and to its parent', callTime: 'import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill(os.getpid(), signal.SIGKILL)' },
  { name: 'sleeping past the limit', callTime: 'import time\ntime.sleep(60)', seconds: 20 },
  {
    name: 'alarm ignored and disarmed, then a busy loop',
    callTime: 'import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nsignal.setitimer(signal.ITIMER_REAL, 0)\nwhile True:\n    pass',
    seconds: 20,
  },
  {
    name: 'the timeout swallowed, then a plausible answer',
    callTime: 'try:\n    while True:\n        pass\nexcept BaseException:\n    ret = True',
    seconds: 20,
  },
];

const TEST_TIMEOUT_S = 1;
const GRACE_S = 1;
let workBase: string;
let runner: CoopHERewardRunner;
let honest: CoopHERewardBreakdown;
const results = new Map<string, { b?: CoopHERewardBreakdown; error?: unknown; seconds: number }>();

beforeAll(async () => {
  workBase = mkdtempSync(path.join(tmpdir(), 'comlrl-hostile-'));
  runner = new CoopHERewardRunner({ testTimeoutS: TEST_TIMEOUT_S, graceS: GRACE_S, tmpDir: workBase, concurrency: 6, log: () => undefined });
  honest = await runner.breakdown(AUX, main(), problem);
  await Promise.all(
    HOSTILE.map(async (h) => {
      const t0 = Date.now();
      try {
        const b = await runner.breakdown(AUX, main(h.defTime, h.callTime), problem);
        results.set(h.name, { b, seconds: (Date.now() - t0) / 1000 });
      } catch (error) {
        results.set(h.name, { error, seconds: (Date.now() - t0) / 1000 });
      }
    }),
  );
}, 120_000);

afterAll(() => {
  rmSync(workBase, { recursive: true, force: true });
});

describe('CoopHE hostile candidates (issue 12)', () => {
  it('the honest evaluations: the wrong solution gets 1.5, the right one 4.0', async () => {
    expect(honest.reward).toBe(WRONG);
    expect(honest.passed_tests).toBe(0);
    const right = await runner.reward(AUX, main().replace('r * 0', 'r * 1'), problem);
    expect(right).toBe(CORRECT);
  });

  for (const h of HOSTILE) {
    it(h.name, () => {
      const r = results.get(h.name)!;
      expect(r.error, 'the reward threw').toBeUndefined();
      expect(r.b!.reward, JSON.stringify(r.b!.sandbox?.tests)).toBeLessThanOrEqual(honest.reward);
      expect(r.b!.passed_tests ?? 0).toBe(0);
      expect(r.seconds, 'wall-clock bound').toBeLessThan(h.seconds ?? 12);
    });
  }

  it('leaves no work directory behind', () => {
    expect(readdirSync(workBase)).toEqual([]);
  });
});

describe('CoopHE oversized completions', () => {
  it('a 65 MiB completion is scored as code that does not compile, with a warning, and nothing throws', async () => {
    const logs: string[] = [];
    const r = new CoopHERewardRunner({ testTimeoutS: TEST_TIMEOUT_S, tmpDir: workBase, log: (m) => logs.push(m) });
    // The comment line is inside the function, so cleanup keeps it in the combined code.
    const huge = main().replace('    r = aux(n)\n', `    # ${'x'.repeat(65 * 1024 * 1024)}\n    r = aux(n)\n`);
    const b = await r.breakdown(AUX, huge, problem);
    // Both functions defined (0.4 + 0.6), then the syntax level fails: 1.0, below the 1.5 of
    // the same code without the comment.
    expect(b.reward).toBe(1.0);
    expect(b.syntax_passed).toBe(false);
    expect(b.syntax_message).toMatch(/over the sandbox limit of 8388608 \(option maxCodeBytes\)/);
    expect(b.sandbox?.attempts).toBe(0);
    expect(logs.some((m) => /maxCodeBytes/.test(m))).toBe(true);
  }, 60_000);

  it('the limit is an option; code at the limit still runs', async () => {
    const code = main();
    const size = Buffer.byteLength(honest.combined_code!, 'utf8');
    const logs: string[] = [];
    const options = { testTimeoutS: TEST_TIMEOUT_S, tmpDir: workBase, log: (m: string) => logs.push(m) };
    const atLimit = await new CoopHERewardRunner({ ...options, maxCodeBytes: size }).breakdown(AUX, code, problem);
    expect(atLimit.reward).toBe(WRONG);
    const below = await new CoopHERewardRunner({ ...options, maxCodeBytes: size - 1 }).breakdown(AUX, code, problem);
    expect(below.reward).toBe(1.0);
    expect(logs).toHaveLength(1);
  });
});
