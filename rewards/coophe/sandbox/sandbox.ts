/**
 * The CoopHE Python sandbox: runs the syntax check, the definitions and the tests of one
 * (aux, main) program in a locked-down subprocess, a bounded number of them at once.
 *
 * Test semantics follow the reference: a per-test limit, tests stop after `maxTimeouts` timeouts
 * (the rest count as failed). Where the reference would crash or hang (candidate `exit()`,
 * `os._exit`, killed interpreter, ignored alarm), the test at fault counts as failed — or as a
 * timeout when it overran — and a fresh subprocess resumes with the next test.
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { setUpSandbox, sandboxConfig, type CoopHESandboxIsolation, type SandboxSetup } from './launch.js';
import { resolveSandboxOptions, type CoopHESandboxOptions, type ResolvedSandboxOptions } from './options.js';
import { Pool } from './pool.js';
import { runAttempt, type AttemptResult } from './attempt.js';
import type { ExecReport, RunnerIsolation, RunnerJob, SyntaxReport, TestOutcome } from './protocol.js';

/** Raised when the sandbox itself (not the candidate) fails: the runner did not start. */
export class CoopHESandboxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CoopHESandboxError';
  }
}

/** A program to check and run. */
export interface SandboxProgram {
  /** The combined code (imports, aux, main). */
  code: string;
  /** Asserts to run one by one after the code is executed; [] = syntax check only. */
  tests: string[];
  /** Pre-inject `math` into the globals (newest upstream reward); false = `{}` (fork, feedback). */
  injectMath: boolean;
  /** Evaluate `f(args)` and the expected value before each `assert f(args) == expected` (reward). */
  doubleEval: boolean;
  /** Feedback only: main's function text for the AST check of how it uses aux. */
  mainFunc?: string | null;
}

/** What happened to a program. */
export interface SandboxReport {
  syntax: SyntaxReport;
  /** Feedback only: `Line N: reason` for each problematic aux call in main. */
  analysis?: string[];
  /** Absent when no test was due (syntax error or no tests). */
  exec?: ExecReport;
  /** One entry per test, in order. */
  tests: TestOutcome[];
  passed: number;
  timeouts: number;
  /** Subprocesses used (1 unless candidate code ended or hung one). */
  attempts: number;
  stdout: string;
  stderr: string;
  /** The `--comlrl-sandbox=<tag>` argument of this call's processes (to find them by name). */
  tag: string;
  wallMs: number;
  isolation: RunnerIsolation | null;
}

const TIMEOUT_MESSAGE = 'Code execution timed out';

/**
 * Kills every process whose command line carries `tag`. Only used when neither a pid namespace
 * nor seccomp keeps candidate code from leaving processes behind: forked copies of the runner
 * keep its command line, so they are found even after escaping the process group with setsid.
 */
function sweepTagged(tag: string): void {
  const needle = `--comlrl-sandbox=${tag}\0`;
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(needle)) process.kill(Number(entry), 'SIGKILL');
    } catch {
      // gone already, or not ours to read
    }
  }
}

function exitDescription(a: AttemptResult): string {
  if (a.killedBy === 'deadline') return 'the call exceeded its wall-clock limit';
  if (a.signal) return `the test process was killed by ${a.signal}`;
  return `the test process exited with status ${a.exitCode}`;
}

/**
 * A pool of sandboxed Python runs. Construct once: the constructor resolves the interpreter
 * (throwing {@link PythonNotFoundError} when it is missing) and probes the isolation layers.
 */
export class PythonSandbox {
  /** Protections each run gets here. */
  readonly isolation: CoopHESandboxIsolation;
  /** Absolute path of the interpreter. */
  readonly python: string;
  /** Prefix of every run's `--comlrl-sandbox=` tag (unique per instance). */
  readonly tagPrefix: string;
  private readonly options: ResolvedSandboxOptions;
  private readonly setup: SandboxSetup;
  private readonly pool: Pool;
  private readonly sweep: boolean;
  private calls = 0;

  constructor(options: CoopHESandboxOptions = {}) {
    this.options = resolveSandboxOptions(options);
    this.setup = setUpSandbox(this.options);
    this.isolation = this.setup.isolation;
    this.python = this.setup.python;
    this.pool = new Pool(this.options.concurrency);
    this.tagPrefix = `coophe-${process.pid}-${randomBytes(4).toString('hex')}`;
    this.sweep = process.platform === 'linux' && !this.isolation.namespaces.includes('pid') && !this.isolation.seccomp;
    if (this.isolation.warnings.length > 0) {
      this.options.log(`CoopHE sandbox (${this.isolation.launcher}): ${this.isolation.warnings.join('; ')}`);
    }
  }

  /** Subprocesses allowed at once. */
  get concurrency(): number {
    return this.pool.size;
  }

  /** The per-test limit in seconds. */
  get testTimeoutS(): number {
    return this.options.testTimeoutS;
  }

  /** Checks and runs `program`, waiting for a pool slot first. */
  run(program: SandboxProgram, mode: 'reward' | 'feedback'): Promise<SandboxReport> {
    return this.pool.run(() => this.runNow(program, mode));
  }

  private async runNow(program: SandboxProgram, mode: 'reward' | 'feedback'): Promise<SandboxReport> {
    const o = this.options;
    const started = Date.now();
    const n = program.tests.length;
    const phaseS = o.testTimeoutS + o.graceS;
    const wallS = o.wallClockLimitS ?? o.startupTimeoutS + (n + 2) * phaseS;
    const deadline = started + wallS * 1000;
    const tag = `${this.tagPrefix}-${++this.calls}`;
    const tests: TestOutcome[] = program.tests.map(() => ({ status: 'skipped' }));
    let syntax: SyntaxReport | undefined;
    let analysis: string[] | undefined;
    let exec: ExecReport | undefined;
    let isolation: RunnerIsolation | null = null;
    let start = 0;
    let timeouts = 0;
    let attempts = 0;
    let stdout = '';
    let stderr = '';

    const fail = (i: number, outcome: TestOutcome) => {
      tests[i] = outcome;
      if (outcome.status === 'timeout') timeouts++;
    };

    for (;;) {
      attempts++;
      const remainingS = Math.max(1, (deadline - Date.now()) / 1000);
      const job: RunnerJob = {
        mode,
        nonce: randomBytes(16).toString('hex'),
        sandbox: sandboxConfig(o, this.setup.launcher, {
          cpuS: (n - start + 2) * o.testTimeoutS + 10,
          wallS: remainingS + o.graceS,
        }),
        code: program.code,
        tests: program.tests,
        start,
        timeouts,
        max_timeouts: o.maxTimeouts,
        test_timeout_s: o.testTimeoutS,
        inject_math: program.injectMath,
        double_eval: program.doubleEval,
        main_func: attempts === 1 ? (program.mainFunc ?? null) : null,
      };
      const a = await runAttempt(job, {
        launcher: this.setup.launcher,
        runnerPath: this.setup.runnerPath,
        tmpDir: o.tmpDir,
        tag,
        outputLimitBytes: o.outputLimitBytes,
        budgets: { startupMs: o.startupTimeoutS * 1000, phaseMs: phaseS * 1000, graceMs: o.graceS * 1000, deadline },
      });
      if (this.sweep) sweepTagged(tag);
      stdout = (stdout + a.stdout).slice(0, o.outputLimitBytes);
      stderr = (stderr + a.stderr).slice(0, o.outputLimitBytes);
      if (a.spawnError) throw new CoopHESandboxError(`CoopHE sandbox: cannot start the runner: ${a.spawnError.message}`);
      const ready = a.events.find((e) => e.ev === 'ready');
      if (!ready) {
        throw new CoopHESandboxError(
          `CoopHE sandbox: the runner ended before locking itself down (${exitDescription(a)}): ${a.stderr.slice(-1000)}`,
        );
      }
      isolation ??= ready.isolation;

      let running: number | null = null;
      let inExec = false;
      let done = false;
      let resumedExecFailed: ExecReport | undefined;
      for (const ev of a.events) {
        switch (ev.ev) {
          case 'analysis':
            analysis ??= ev.problems;
            break;
          case 'syntax':
            syntax ??= { ok: ev.ok, message: ev.message, line: ev.line, offset: ev.offset, msg: ev.msg };
            break;
          case 'exec_start':
            inExec = true;
            break;
          case 'exec': {
            inExec = false;
            const report: ExecReport = ev.ok ? { ok: true } : { ok: false, errorType: ev.error_type, errorMessage: ev.error_message };
            if (!exec) exec = report;
            else if (!report.ok) resumedExecFailed = report;
            break;
          }
          case 'start':
            if (ev.i >= start && ev.i < n && tests[ev.i].status === 'skipped') running = ev.i;
            break;
          case 'result':
            if (ev.i === running) {
              fail(ev.i, { status: ev.status, errorType: ev.error_type, errorMessage: ev.error_message });
              running = null;
            }
            break;
          case 'done':
            done = true;
            break;
        }
      }

      if (!syntax) {
        // The trusted parse itself did not finish (pathological input): a failed syntax level.
        syntax = {
          ok: false,
          message: `Combined code has syntax error: the syntax check did not complete (${exitDescription(a)})`,
          line: null,
          offset: null,
          msg: null,
        };
        break;
      }
      if (!syntax.ok || n === 0) break;
      if (!exec) {
        // Executing the definitions ended the process (e.g. os._exit in a default argument).
        exec =
          a.killedBy === 'watchdog'
            ? { ok: false, errorType: 'TimeoutException', errorMessage: TIMEOUT_MESSAGE }
            : { ok: false, errorType: 'ProcessExit', errorMessage: exitDescription(a) };
        break;
      }
      if (!exec.ok) break;
      if (resumedExecFailed) {
        for (let i = start; i < n; i++) if (tests[i].status === 'skipped') fail(i, { status: 'fail', ...resumedExecFailed });
        break;
      }
      if (done) break;

      // The process ended early: charge the test that was running (or the next one due).
      if (running === null && !inExec) {
        const next = tests.findIndex((t, i) => i >= start && t.status === 'skipped');
        running = next >= 0 ? next : null;
      }
      if (running !== null) {
        fail(
          running,
          a.killedBy === 'watchdog'
            ? { status: 'timeout', errorType: 'TimeoutException', errorMessage: TIMEOUT_MESSAGE }
            : { status: 'fail', errorType: 'ProcessExit', errorMessage: exitDescription(a) },
        );
        start = running + 1;
      }
      if (a.killedBy === 'deadline' || Date.now() >= deadline) break;
      if (start >= n || timeouts >= o.maxTimeouts || running === null) break;
    }

    const passed = tests.filter((t) => t.status === 'pass').length;
    return {
      syntax: syntax!,
      analysis,
      exec,
      tests,
      passed,
      timeouts,
      attempts,
      stdout,
      stderr,
      tag,
      wallMs: Date.now() - started,
      isolation,
    };
  }
}
