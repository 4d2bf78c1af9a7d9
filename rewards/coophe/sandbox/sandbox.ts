/**
 * The CoopHE Python sandbox: checks the syntax of one (aux, main) program, executes its
 * definitions and runs its tests, a bounded number of programs at once.
 *
 * Two processes per program: the trusted judge (`judge.py`) runs the tests and decides every
 * result; the candidate's code runs only in the sandboxed runner (`runner.py`), which the judge
 * starts and calls. The runner answers each call of the candidate's functions with plain data,
 * which the judge decodes into fresh built-in values and compares itself, so candidate code
 * cannot reach the comparison, the test list, the timeout rule or the reported results.
 *
 * Test semantics follow the reference: a per-test limit, tests stop after `maxTimeouts` timeouts
 * (the rest count as failed). Where the reference would crash or hang (candidate `exit()`,
 * `os._exit`, killed interpreter, ignored alarm), the test at fault counts as failed, or as a
 * timeout when it overran, and a fresh runner resumes with the next test.
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { PYTHON_FLAGS, setUpSandbox, sandboxConfig, type CoopHESandboxIsolation, type SandboxSetup } from './launch.js';
import { resolveSandboxOptions, type CoopHESandboxOptions, type ResolvedSandboxOptions } from './options.js';
import { Pool } from './pool.js';
import { JudgeProcess, type JudgeRunResult } from './judge.js';
import { makeWorkDir, removeWorkDir } from './workdir.js';
import type { ExecReport, JudgeJob, RunnerIsolation, SyntaxReport, TestOutcome } from './protocol.js';

/** Raised when the sandbox itself (not the candidate) fails: the judge or the runner did not start. */
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
  /**
   * The problem's import lines (trusted text, also at the top of `code`). A test that uses a name
   * they bind (`math.sqrt(2)`) gets the judge's own module, as the reference's shared globals would.
   */
  imports?: string;
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
  /** Sandboxed runner processes used (1 unless candidate code ended or hung one; 0 when the code was not run). */
  attempts: number;
  stdout: string;
  stderr: string;
  /** Set when the program was not run because its code is over `maxCodeBytes`. */
  oversized?: boolean;
  /** The `--comlrl-sandbox=<tag>` argument of this call's processes (to find them by name). */
  tag: string;
  wallMs: number;
  isolation: RunnerIsolation | null;
}

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

// How long an idle judge process is kept for the next call.
const JUDGE_IDLE_MS = 30_000;

function exitDescription(a: JudgeRunResult): string {
  if (a.killedBy === 'deadline') return 'the call exceeded its wall-clock limit';
  if (a.signal) return `the judge process was killed by ${a.signal}`;
  return `the judge process exited with status ${a.exitCode}`;
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
  /** The `--comlrl-judge=` tag of this instance's judge processes (they outlive a call: reused). */
  readonly judgeTag: string;
  private readonly options: ResolvedSandboxOptions;
  private readonly setup: SandboxSetup;
  private readonly pool: Pool;
  private readonly sweep: boolean;
  private readonly warned = new Set<string>();
  private readonly idleJudges: JudgeProcess[] = [];
  private calls = 0;

  constructor(options: CoopHESandboxOptions = {}) {
    this.options = resolveSandboxOptions(options);
    this.setup = setUpSandbox(this.options);
    this.isolation = this.setup.isolation;
    this.python = this.setup.python;
    this.pool = new Pool(this.options.concurrency);
    this.tagPrefix = `coophe-${process.pid}-${randomBytes(4).toString('hex')}`;
    this.judgeTag = `judge-${process.pid}-${randomBytes(4).toString('hex')}`;
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

  /** Ends the idle judge processes now (they also end by themselves after a while idle, and with Node). */
  close(): void {
    for (const judge of this.idleJudges.splice(0)) judge.kill();
  }

  private takeIdleJudge(): JudgeProcess | undefined {
    for (let judge = this.idleJudges.pop(); judge; judge = this.idleJudges.pop()) {
      if (judge.alive) return judge;
    }
    return undefined;
  }

  /** Checks and runs `program`, waiting for a pool slot first. */
  run(program: SandboxProgram, mode: 'reward' | 'feedback'): Promise<SandboxReport> {
    return this.pool.run(() => this.runNow(program, mode));
  }

  private async runNow(program: SandboxProgram, mode: 'reward' | 'feedback'): Promise<SandboxReport> {
    const o = this.options;
    const started = Date.now();
    const n = program.tests.length;
    const tag = `${this.tagPrefix}-${++this.calls}`;
    const tests: TestOutcome[] = program.tests.map(() => ({ status: 'skipped' }));
    const codeBytes = Buffer.byteLength(program.code, 'utf8');
    if (codeBytes > o.maxCodeBytes) {
      // Scored as code that does not compile (the reward stops at the syntax level), never thrown.
      const message = `the combined code is ${codeBytes} bytes, over the sandbox limit of ${o.maxCodeBytes} (option maxCodeBytes)`;
      this.options.log(`CoopHE sandbox: ${message}; scored as a syntax error`);
      return {
        syntax: { ok: false, message: `Combined code has syntax error: ${message}`, line: null, offset: null, msg: null },
        tests,
        passed: 0,
        timeouts: 0,
        attempts: 0,
        stdout: '',
        stderr: '',
        oversized: true,
        tag,
        wallMs: Date.now() - started,
        isolation: null,
      };
    }
    const phaseS = o.testTimeoutS + o.graceS;
    const wallS = o.wallClockLimitS ?? o.startupTimeoutS + (n + 2) * phaseS;
    const job: Omit<JudgeJob, 'workdir'> = {
      mode,
      code: program.code,
      tests: program.tests,
      main_func: program.mainFunc ?? null,
      imports: program.imports ?? '',
      inject_math: program.injectMath,
      double_eval: program.doubleEval,
      test_timeout_s: o.testTimeoutS,
      grace_s: o.graceS,
      startup_s: o.startupTimeoutS,
      wall_s: wallS,
      max_timeouts: o.maxTimeouts,
      launcher: [this.setup.launcher.command, ...this.setup.launcher.args],
      runner: this.setup.runnerPath,
      tag,
      // cpu_s and wall_clock_s are set by the judge for each runner it starts.
      sandbox: sandboxConfig(o, this.setup.launcher, { cpuS: 0, wallS: 0 }),
      output_limit: o.outputLimitBytes,
    };
    // The judge enforces every limit itself; this is the backstop should it hang.
    const deadline = started + (wallS + o.graceS + o.startupTimeoutS) * 1000;
    const workDir = await makeWorkDir(o.tmpDir);
    let a: JudgeRunResult;
    let judge: JudgeProcess;
    try {
      for (;;) {
        const reused = this.takeIdleJudge();
        judge = reused ?? new JudgeProcess({ command: this.python, args: PYTHON_FLAGS, judgePath: this.setup.judgePath, cwd: o.tmpDir, tag: this.judgeTag });
        a = await judge.run({ ...job, workdir: workDir }, deadline);
        // A reused judge that ended while idle (before this job began): take a fresh one.
        if (!(reused && a.events.length === 0 && a.killedBy === null)) break;
      }
    } finally {
      await removeWorkDir(workDir);
    }
    if (judge.alive && a.killedBy === null && a.events.at(-1)?.ev === 'done') {
      judge.idle(JUDGE_IDLE_MS);
      this.idleJudges.push(judge);
    } else {
      judge.kill();
    }
    if (this.sweep) sweepTagged(tag);
    if (a.spawnError) throw new CoopHESandboxError(`CoopHE sandbox: cannot start the judge: ${a.spawnError.message}`);

    let syntax: SyntaxReport | undefined;
    let analysis: string[] | undefined;
    let exec: ExecReport | undefined;
    let isolation: RunnerIsolation | null = null;
    let attempts = 0;
    let stdout = '';
    let stderr = '';
    let done = false;
    let timeouts = 0;
    for (const ev of a.events) {
      switch (ev.ev) {
        case 'fatal':
          throw new CoopHESandboxError(`CoopHE sandbox: ${ev.message}`);
        case 'ready':
          isolation = ev.isolation;
          break;
        case 'analysis':
          analysis = ev.problems;
          break;
        case 'syntax':
          syntax = { ok: ev.ok, message: ev.message, line: ev.line, offset: ev.offset, msg: ev.msg };
          break;
        case 'exec':
          exec = ev.ok ? { ok: true } : { ok: false, errorType: ev.error_type, errorMessage: ev.error_message };
          break;
        case 'result':
          if (ev.i >= 0 && ev.i < n && tests[ev.i].status === 'skipped') {
            tests[ev.i] = { status: ev.status, errorType: ev.error_type, errorMessage: ev.error_message };
            if (ev.status === 'timeout') timeouts++;
          }
          break;
        case 'warning':
          if (!this.warned.has(ev.message)) {
            this.warned.add(ev.message);
            this.options.log(ev.message);
          }
          break;
        case 'done':
          done = true;
          attempts = ev.attempts;
          stdout = ev.stdout.slice(0, o.outputLimitBytes);
          stderr = ev.stderr.slice(0, o.outputLimitBytes);
          break;
      }
    }
    if (!isolation) {
      throw new CoopHESandboxError(`CoopHE sandbox: the judge ended before the sandbox was ready (${exitDescription(a)}): ${a.stderr.slice(-1000)}`);
    }
    if (!done) {
      // The judge itself failed or was stopped: report it; the tests it did not finish count as not passed.
      this.options.log(`CoopHE sandbox: the judge did not finish (${exitDescription(a)}) ${a.stderr.slice(-500)}`.trimEnd());
    }
    syntax ??= {
      ok: false,
      message: `Combined code has syntax error: the syntax check did not complete (${exitDescription(a)})`,
      line: null,
      offset: null,
      msg: null,
    };
    if (syntax.ok && n > 0 && !exec) exec = { ok: false, errorType: 'ProcessExit', errorMessage: exitDescription(a) };

    const passed = tests.filter((t) => t.status === 'pass').length;
    return {
      syntax,
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
