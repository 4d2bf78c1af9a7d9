/**
 * Judge processes: `judge.py` runs in its own process group with an empty environment and takes
 * one job after another (a JSON line in, events out until `done`). A judge is reused while it
 * behaves; one that overruns the call's deadline, exits or misbehaves is killed with its whole
 * group and replaced. Idle judges do not keep Node alive and end after a while, or with Node.
 * The judge itself starts and supervises the sandboxed runners.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { parseEvent, type JudgeEvent, type JudgeJob } from './protocol.js';

/** What one job did. */
export interface JudgeRunResult {
  events: JudgeEvent[];
  /** Set when Node killed the judge because the call's wall clock ran out. */
  killedBy: 'deadline' | null;
  /** Set when the judge process ended during the job (it is then not reused). */
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** The judge's own stderr (its traceback if it failed), capped. */
  stderr: string;
  /** Set when the process could not be started at all. */
  spawnError?: Error;
}

/** How judge processes are started. */
export interface JudgeCommand {
  /** The interpreter and its flags. */
  command: string;
  args: string[];
  judgePath: string;
  /** Working directory of the judge between jobs. */
  cwd: string;
  /** `--comlrl-judge=<tag>` on its command line, to find it by name. */
  tag: string;
}

// A job's output is a few events per test plus the capped candidate output; far beyond this is a
// bug, and stops the judge rather than filling memory.
const MAX_JOB_OUTPUT_BYTES = 64 * 1024 * 1024;
const MAX_STDERR_BYTES = 64 * 1024;
// After the process exits, how long to wait for its pipes to drain.
const DRAIN_MS = 1000;

// Process groups of judges (busy or idle), killed if the trainer exits.
const live = new Set<number>();
let exitHookInstalled = false;

function track(pid: number): void {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const group of live) killGroup(group);
    });
  }
  live.add(pid);
}

function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // ESRCH: the group is already gone.
  }
}

function hasRef(handle: unknown): handle is { ref(): unknown; unref(): unknown } {
  return typeof handle === 'object' && handle !== null && 'ref' in handle && 'unref' in handle && typeof handle.ref === 'function' && typeof handle.unref === 'function';
}

interface Job {
  events: JudgeEvent[];
  bytes: number;
  resolve: (r: JudgeRunResult) => void;
  timer: NodeJS.Timeout;
  killedBy: 'deadline' | null;
}

/** One judge process, reusable for jobs one at a time. */
export class JudgeProcess {
  private readonly child: ChildProcessWithoutNullStreams;
  private pending = '';
  private stderrText = '';
  private job: Job | null = null;
  private exitInfo: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  private spawnError: Error | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  private killed = false;

  constructor(c: JudgeCommand) {
    this.child = spawn(c.command, [...c.args, c.judgePath, `--comlrl-judge=${c.tag}`], {
      cwd: c.cwd,
      env: {},
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
      windowsHide: true,
    });
    if (this.child.pid !== undefined) track(this.child.pid);
    this.child.on('error', (err) => {
      this.spawnError = err;
      this.ended({ code: null, signal: null });
    });
    this.child.stdin.on('error', () => undefined); // EPIPE when the judge dies before reading
    this.child.stderr.on('data', (chunk: Buffer) => {
      if (this.stderrText.length < MAX_STDERR_BYTES) this.stderrText += chunk.toString('utf8').slice(0, MAX_STDERR_BYTES - this.stderrText.length);
    });
    this.child.stdout.on('data', (chunk: Buffer) => this.onData(chunk));
    this.child.on('exit', (code, signal) => {
      // Anything else in the group (a runner's launcher, stragglers) goes with the judge.
      killGroup(this.child.pid);
      if (this.child.pid !== undefined) live.delete(this.child.pid);
      // Let the pipes drain (the last events), then settle the job in flight.
      setTimeout(() => this.ended({ code, signal }), DRAIN_MS).unref();
    });
    this.child.on('close', (code: number | null, signal: NodeJS.Signals | null) => this.ended({ code, signal }));
  }

  /** False once the process has ended or been killed. */
  get alive(): boolean {
    return !this.killed && this.exitInfo === null && this.spawnError === undefined;
  }

  /** Runs `job`; resolves when the judge reported `done`, ended, or was killed at `deadline`. */
  run(job: JudgeJob, deadline: number): Promise<JudgeRunResult> {
    clearTimeout(this.idleTimer);
    return new Promise<JudgeRunResult>((resolve) => {
      if (!this.alive) {
        resolve(this.result([], null));
        return;
      }
      const timer = setTimeout(() => {
        if (this.job) this.job.killedBy = 'deadline';
        this.kill();
      }, Math.max(0, deadline - Date.now()));
      // kill() marks the judge dead at once; its exit event settles the job.
      this.job = { events: [], bytes: 0, resolve, timer, killedBy: null };
      this.setRef(true);
      this.child.stdin.write(`${JSON.stringify(job)}\n`);
    });
  }

  /** Keeps the idle judge for `ms`, then ends it. */
  idle(ms: number): void {
    this.setRef(false);
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => this.kill(), ms);
    this.idleTimer.unref();
  }

  /** Ends the judge and everything in its process group. */
  kill(): void {
    clearTimeout(this.idleTimer);
    this.killed = true;
    if (this.exitInfo === null) killGroup(this.child.pid);
  }

  private setRef(ref: boolean): void {
    // Idle judges must not keep the trainer (or a test runner) alive. The stdio pipes are
    // net.Sockets at run time (typed as plain streams), which hold the event loop too.
    const handles: unknown[] = [this.child, this.child.stdin, this.child.stdout, this.child.stderr];
    for (const handle of handles) {
      if (!hasRef(handle)) continue;
      if (ref) handle.ref();
      else handle.unref();
    }
  }

  private onData(chunk: Buffer): void {
    const job = this.job;
    if (!job) {
      this.kill(); // output outside a job: not a judge we can trust to be in sync
      return;
    }
    job.bytes += chunk.length;
    if (job.bytes > MAX_JOB_OUTPUT_BYTES) {
      this.kill();
      return;
    }
    this.pending += chunk.toString('utf8');
    let newline: number;
    while ((newline = this.pending.indexOf('\n')) >= 0) {
      const ev = parseEvent(this.pending.slice(0, newline));
      this.pending = this.pending.slice(newline + 1);
      if (!ev) continue;
      job.events.push(ev);
      if (ev.ev === 'done') {
        this.settle(null);
        return;
      }
    }
  }

  private ended(info: { code: number | null; signal: NodeJS.Signals | null }): void {
    if (this.exitInfo === null) this.exitInfo = info;
    clearTimeout(this.idleTimer);
    this.settle(this.exitInfo);
  }

  private settle(exit: { code: number | null; signal: NodeJS.Signals | null } | null): void {
    const job = this.job;
    if (!job) return;
    this.job = null;
    clearTimeout(job.timer);
    this.pending = '';
    const r = this.result(job.events, exit);
    r.killedBy = job.killedBy;
    this.stderrText = '';
    job.resolve(r);
  }

  private result(events: JudgeEvent[], exit: { code: number | null; signal: NodeJS.Signals | null } | null): JudgeRunResult {
    return {
      events,
      killedBy: null,
      exitCode: exit?.code ?? null,
      signal: exit?.signal ?? null,
      stderr: this.stderrText,
      spawnError: this.spawnError,
    };
  }
}
