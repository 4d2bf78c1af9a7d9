/**
 * The CoopHE sandbox against hostile candidates. For each one: the reward is computed (with the
 * meaning "this test failed"), no process of the run is left, nothing outside the work dir
 * changed, and the call took bounded time. Uses a 1 s per-test limit to stay fast.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoopHERewardRunner, PythonNotFoundError, type CoopHEProblem, type CoopHERewardBreakdown } from '../rewards/coophe/index.js';

const problem: CoopHEProblem = {
  task_id: 'sandbox/0',
  prompt: 'def inc(n):\n    """Return n + 1."""\n',
  test: 'def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(2) == 3\n    assert candidate(3) == 4\n',
  entry_point: 'inc',
};
const AUX = 'def aux(n):\n    return n + 1\n';
/** main whose body is `hostile` (indented by the caller) followed by a correct `return aux(n)`. */
const mainWith = (hostile: string) => `def inc(n):\n${hostile}\n    r = aux(n) * 1\n    return r\n`;
// All three tests fail: 0.4 + 0.6 + 0.5, no bonus without a passed test.
const ALL_FAIL = 1.5;
// Only the middle test fails: 0.4 + 0.6 + 0.5 + 2/3 + 0.5 (uses aux) + 1.0 (three code lines: not a wrapper).
const MIDDLE_FAILS = 0.4 + 0.6 + 0.5 + (2 / 3) * 1.0 + 0.5 + 1.0;
const ALL_PASS = 4.0;

const TEST_TIMEOUT_S = 1;
const GRACE_S = 1;
let workBase: string;
let outside: string;
let runner: CoopHERewardRunner;

/** Processes still carrying this runner's tag on their command line. */
function leftovers(tagPrefix: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(tagPrefix)) found.push(Number(entry));
    } catch {
      // the process ended while we looked
    }
  }
  return found;
}

async function scored(main: string, maxSeconds: number, r = runner): Promise<CoopHERewardBreakdown> {
  const t0 = Date.now();
  const b = await r.breakdown(AUX, main, problem);
  const seconds = (Date.now() - t0) / 1000;
  expect(seconds, 'wall-clock bound').toBeLessThan(maxSeconds);
  if (process.platform === 'linux') expect(leftovers(r.sandbox.tagPrefix), 'processes left behind').toEqual([]);
  expect(readdirSync(workBase), 'work dirs left behind').toEqual([]);
  return b;
}

beforeAll(() => {
  workBase = mkdtempSync(path.join(tmpdir(), 'comlrl-h5-work-'));
  outside = mkdtempSync(path.join(tmpdir(), 'comlrl-h5-outside-'));
  writeFileSync(path.join(outside, 'victim.txt'), 'original');
  runner = new CoopHERewardRunner({ testTimeoutS: TEST_TIMEOUT_S, graceS: GRACE_S, tmpDir: workBase, concurrency: 4, log: () => undefined });
});

afterAll(() => {
  rmSync(workBase, { recursive: true, force: true });
  rmSync(outside, { recursive: true, force: true });
});

describe('CoopHE sandbox construction', () => {
  it('fails at construction, naming the executable, when python is missing', () => {
    const bogus = '/nonexistent/bin/python3-comlrl';
    expect(() => new CoopHERewardRunner({ python: bogus })).toThrow(PythonNotFoundError);
    expect(() => new CoopHERewardRunner({ python: bogus })).toThrow(bogus);
  });

  it('rejects bad options with the field name', () => {
    expect(() => new CoopHERewardRunner({ testTimeoutS: -1 })).toThrow(/testTimeoutS/);
    expect(() => new CoopHERewardRunner({ concurency: 2 } as unknown as { concurrency: number })).toThrow(/concurency/);
  });

  it('reports the isolation it applies (Linux: network cut, writes confined, no new processes)', () => {
    const iso = runner.isolation;
    expect(iso.python).toMatch(/python/);
    if (process.platform === 'linux') {
      expect(iso.network).not.toBe('none');
      expect(iso.filesystem).not.toBe('none');
      expect(iso.processCreation).not.toBe('none');
      expect(iso.rlimits.RLIMIT_NPROC).toBe(64);
      expect(iso.rlimits.RLIMIT_AS).toBe(1024 * 1024 * 1024);
    }
  });

  it('scores a well-behaved pair normally and fast', async () => {
    const b = await scored(mainWith('    pass'), 10);
    expect(b.reward).toBe(ALL_PASS);
    expect(b.sandbox?.attempts).toBe(1);
  });
});

describe('CoopHE sandbox: hostile candidates', () => {
  it('exit(), quit() and sys.exit() count as failed tests', async () => {
    for (const hostile of ['    exit()', '    quit(3)', '    import sys\n    sys.exit("bye")']) {
      const b = await scored(mainWith(hostile), 10);
      expect(b.reward).toBe(ALL_FAIL);
      expect(b.sandbox?.tests.map((t) => t.errorType)).toEqual(['SystemExit', 'SystemExit', 'SystemExit']);
    }
  });

  it('os._exit in one test fails that test only: a fresh process resumes with the next', async () => {
    const b = await scored(mainWith('    import os\n    if n == 2:\n        os._exit(0)'), 10);
    expect(b.sandbox?.tests.map((t) => t.status)).toEqual(['pass', 'fail', 'pass']);
    expect(b.sandbox?.attempts).toBe(2);
    expect(b.reward).toBe(MIDDLE_FAILS);
  });

  it('os._exit in every test: three restarts, all failed', async () => {
    const b = await scored(mainWith('    import os\n    os._exit(7)'), 15);
    expect(b.sandbox?.attempts).toBe(3);
    expect(b.reward).toBe(ALL_FAIL);
  });

  it('a signal that kills the interpreter (os.abort) fails that test only', async () => {
    const b = await scored(mainWith('    import os\n    if n == 2:\n        os.abort()'), 10);
    expect(b.sandbox?.tests.map((t) => t.status)).toEqual(['pass', 'fail', 'pass']);
    expect(b.reward).toBe(MIDDLE_FAILS);
  });

  it('os.kill(os.getppid(), 9) cannot kill the trainer', async () => {
    if (runner.isolation.signals === 'none') return; // nothing would stop it: do not kill the test worker
    const b = await scored(mainWith('    import os\n    os.kill(os.getppid(), 9)'), 10);
    // This process is alive to check. In a pid namespace the parent is outside (getppid() == 0, so
    // the call signals the runner's own group, which ignores it as its init): the tests pass.
    // Without one, the signal is refused (PermissionError): the tests fail.
    const pidNamespace = runner.isolation.namespaces.includes('pid');
    expect(b.reward).toBe(pidNamespace ? ALL_PASS : ALL_FAIL);
    expect(process.kill(process.pid, 0)).toBe(true);
  });

  it('a fork bomb is stopped (seccomp, else RLIMIT_NPROC) and leaves no process', async () => {
    if (runner.isolation.processCreation === 'none') return; // root without seccomp: unsafe to run
    const b = await scored(mainWith('    import os\n    while True:\n        os.fork()'), 15);
    expect(b.reward).toBe(ALL_FAIL);
  });

  it('a daemonized child is killed with the run (pid namespace), seccomp off', async () => {
    if (!runner.isolation.namespaces.includes('pid')) return;
    const noSeccomp = new CoopHERewardRunner({ testTimeoutS: TEST_TIMEOUT_S, graceS: GRACE_S, tmpDir: workBase, seccomp: false, log: () => undefined });
    const daemon = '    import os, time\n    if n == 1 and os.fork() == 0:\n        os.setsid()\n        time.sleep(60)\n        os._exit(0)';
    const b = await scored(mainWith(daemon), 10, noSeccomp);
    // The forked child is a copy of the runner: it must never report results; the parent passes all.
    expect(b.reward).toBe(ALL_PASS);
  });

  it('endless print() times out per test; the 3-timeout rule ends the run', async () => {
    const b = await scored(mainWith("    while True:\n        print('x')"), 3 * (TEST_TIMEOUT_S + GRACE_S) + 8);
    expect(b.timeout_count).toBe(3);
    expect(b.reward).toBe(ALL_FAIL);
    expect(b.sandbox!.stdout.length).toBeLessThanOrEqual(64 * 1024);
  });

  it('endless raw writes to fd 1 are drained and capped', async () => {
    const b = await scored(mainWith("    import os\n    while True:\n        os.write(1, b'y' * 65536)"), 3 * (TEST_TIMEOUT_S + GRACE_S) + 8);
    expect(b.reward).toBe(ALL_FAIL);
    expect(b.sandbox!.stdout.length).toBeLessThanOrEqual(64 * 1024);
    expect(b.sandbox!.stdout.length).toBeGreaterThan(0);
  });

  it('an ignored SIGALRM is caught by the judge (hard limit) and counts as a timeout', async () => {
    const hostile = '    import signal\n    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n    if n == 2:\n        while True:\n            pass';
    const b = await scored(mainWith(hostile), 2 * (TEST_TIMEOUT_S + GRACE_S) + 8);
    expect(b.sandbox?.tests.map((t) => t.status)).toEqual(['pass', 'timeout', 'pass']);
    expect(b.timeout_count).toBe(1);
    expect(b.reward).toBe(MIDDLE_FAILS);
  });

  it('allocating 50 GB raises MemoryError (RLIMIT_AS): a failed test', async () => {
    const b = await scored(mainWith('    x = bytearray(50 * 10**9)'), 10);
    expect(b.sandbox?.tests.every((t) => t.errorType === 'MemoryError')).toBe(true);
    expect(b.reward).toBe(ALL_FAIL);
  });

  it('writing, replacing or deleting files outside the work dir changes nothing', async () => {
    if (runner.isolation.filesystem === 'none') return;
    const escape = path.join(outside, 'escape.txt');
    const victim = path.join(outside, 'victim.txt');
    const hostile = [
      '    import os',
      `    for p in (${JSON.stringify(escape)}, "../escape.txt", "/escape-comlrl.txt"):`,
      '        try:',
      '            open(p, "w").write("x")',
      '        except OSError:',
      '            pass',
      `    open(${JSON.stringify(victim)}, "w").write("changed")`,
    ].join('\n');
    const b = await scored(mainWith(hostile), 10);
    expect(b.reward).toBe(ALL_FAIL);
    expect(existsSync(escape)).toBe(false);
    expect(existsSync('/escape-comlrl.txt')).toBe(false);
    expect(readFileSync(victim, 'utf8')).toBe('original');
    const deleter = await scored(mainWith(`    import os\n    os.remove(${JSON.stringify(victim)})`), 10);
    expect(deleter.reward).toBe(ALL_FAIL);
    expect(readFileSync(victim, 'utf8')).toBe('original');
  });

  it('files inside the work dir work as usual', async () => {
    const b = await scored(mainWith('    open("scratch.txt", "w").write(str(n))\n    assert open("scratch.txt").read() == str(n)'), 10);
    expect(b.reward).toBe(ALL_PASS);
  });

  it('reading files outside the interpreter and work dir fails the test, nothing else', async () => {
    if (runner.isolation.filesystem !== 'landlock') return;
    const b = await scored(mainWith(`    open(${JSON.stringify(path.join(outside, 'victim.txt'))}).read()`), 10);
    expect(b.reward).toBe(ALL_FAIL);
  });

  it('network access fails', async () => {
    if (runner.isolation.network === 'none') return;
    const b = await scored(mainWith('    import socket\n    socket.create_connection(("127.0.0.1", 9), timeout=0.5)'), 10);
    expect(b.reward).toBe(ALL_FAIL);
  });

  it('printing fake result events to stdout does not forge a result', async () => {
    const fake = JSON.stringify({ ev: 'result', i: 0, status: 'pass', n: 'x' });
    const b = await scored(`def inc(n):\n    print(${JSON.stringify(fake)})\n    r = aux(n) * 0\n    return r\n`, 10);
    expect(b.reward).toBe(ALL_FAIL);
  });

  it('a sleeping test is interrupted at the per-test limit (a timeout, as in the reference)', async () => {
    const b = await scored(mainWith('    import time\n    if n == 2:\n        time.sleep(30)'), 2 * (TEST_TIMEOUT_S + GRACE_S) + 8);
    expect(b.sandbox?.tests.map((t) => t.status)).toEqual(['pass', 'timeout', 'pass']);
    expect(b.reward).toBe(MIDDLE_FAILS);
  });

  it('the process check sees a run while it is going (so its empty answer afterwards means something)', async () => {
    if (process.platform !== 'linux') return;
    // 0.2 s per call; the double evaluation calls inc three times per test (0.6 s < the 1 s limit).
    const running = runner.breakdown(AUX, mainWith('    import time\n    time.sleep(0.2)'), problem);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(leftovers(runner.sandbox.tagPrefix).length).toBeGreaterThan(0);
    expect((await running).reward).toBe(ALL_PASS);
    expect(leftovers(runner.sandbox.tagPrefix)).toEqual([]);
  });

  it('a batch of hostile and normal pairs runs concurrently and keeps input order', async () => {
    const mains = [mainWith('    pass'), mainWith('    exit()'), mainWith('    import os\n    os._exit(1)'), mainWith('    pass')];
    const rewards = await runner.rewardBatch(mains.map((main) => ({ aux: AUX, main, problem })));
    expect(rewards).toEqual([ALL_PASS, ALL_FAIL, ALL_FAIL, ALL_PASS]);
    expect(leftovers(runner.sandbox.tagPrefix)).toEqual([]);
  });
});

describe('CoopHE sandbox without namespaces (the fallback launcher)', () => {
  let direct: CoopHERewardRunner;
  beforeAll(() => {
    direct = new CoopHERewardRunner({ namespaces: false, testTimeoutS: TEST_TIMEOUT_S, graceS: GRACE_S, tmpDir: workBase, log: () => undefined });
  });

  it('runs directly and still confines the candidate where Landlock/seccomp exist', () => {
    expect(direct.isolation.launcher).toBe('direct');
    expect(direct.isolation.namespaces).toEqual([]);
  });

  it('scores normal, exit(), os._exit and abort() cases as with namespaces', async () => {
    expect((await scored(mainWith('    pass'), 10, direct)).reward).toBe(ALL_PASS);
    expect((await scored(mainWith('    exit()'), 10, direct)).reward).toBe(ALL_FAIL);
    expect((await scored(mainWith('    import os\n    if n == 2:\n        os._exit(0)'), 10, direct)).reward).toBe(MIDDLE_FAILS);
    expect((await scored(mainWith('    import os\n    if n == 2:\n        os.abort()'), 10, direct)).reward).toBe(MIDDLE_FAILS);
  });

  it('refuses os.kill(os.getppid(), 9) (the parent is the trainer here)', async () => {
    if (direct.isolation.signals === 'none') return;
    expect((await scored(mainWith('    import os\n    os.kill(os.getppid(), 9)'), 10, direct)).reward).toBe(ALL_FAIL);
    expect(process.kill(process.pid, 0)).toBe(true);
  });

  it('contains a fork bomb and keeps writes inside the work dir', async () => {
    if (direct.isolation.processCreation !== 'none') {
      expect((await scored(mainWith('    import os\n    while True:\n        os.fork()'), 15, direct)).reward).toBe(ALL_FAIL);
    }
    if (direct.isolation.filesystem !== 'none') {
      const escape = path.join(outside, 'escape-direct.txt');
      expect((await scored(mainWith(`    open(${JSON.stringify(escape)}, "w").write("x")`), 10, direct)).reward).toBe(ALL_FAIL);
      expect(existsSync(escape)).toBe(false);
    }
  });
});
