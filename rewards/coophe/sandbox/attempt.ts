/**
 * One sandbox subprocess: spawn it in its own process group with an empty environment and a
 * fresh work dir, feed it the job, follow its fd-3 events under a watchdog, and make sure that
 * when it ends nothing of it is left (the whole group is killed, the work dir removed).
 */
import { spawn } from 'node:child_process';
import type { Readable } from 'node:stream';
import type { Launcher } from './launch.js';
import { parseEvent, type RunnerEvent, type RunnerJob } from './protocol.js';
import { makeWorkDir, removeWorkDir } from './workdir.js';

/** Watchdog budgets (ms) by what the runner is doing. */
export interface AttemptBudgets {
  startupMs: number;
  /** A test, the definitions' exec, or the trusted analysis of the code. */
  phaseMs: number;
  /** Between events that involve no candidate code. */
  graceMs: number;
  /** Absolute time (Date.now()) at which the attempt is killed whatever it is doing. */
  deadline: number;
}

/** What one subprocess did. */
export interface AttemptResult {
  events: RunnerEvent[];
  /** Set when Node killed the process: `watchdog` (a phase overran) or `deadline` (the call's wall clock). */
  killedBy: 'watchdog' | 'deadline' | null;
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Set when the process could not be started at all. */
  spawnError?: Error;
}

/** Options of {@link runAttempt}. */
export interface AttemptOptions {
  launcher: Launcher;
  runnerPath: string;
  tmpDir: string;
  tag: string;
  outputLimitBytes: number;
  budgets: AttemptBudgets;
}

// fd-3 traffic beyond this is protocol abuse (only candidate code could produce it).
const MAX_EVENT_BYTES = 32 * 1024 * 1024;
// After the process exits, how long to wait for its pipes to drain.
const DRAIN_MS = 1000;

class CappedText {
  private readonly chunks: Buffer[] = [];
  private kept = 0;

  constructor(private readonly limit: number) {}

  add(chunk: Buffer): void {
    if (this.kept >= this.limit) return;
    const part = chunk.subarray(0, this.limit - this.kept);
    this.chunks.push(part);
    this.kept += part.length;
  }

  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

// Process groups of runs in flight, killed if the trainer exits while they run.
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

function nextBudget(ev: RunnerEvent, b: AttemptBudgets): number {
  switch (ev.ev) {
    case 'ready':
    case 'analysis':
    case 'exec_start':
    case 'start':
      return b.phaseMs;
    default:
      return b.graceMs;
  }
}

/** Runs one subprocess for `job` and resolves when it has ended and been cleaned up. */
export async function runAttempt(job: RunnerJob, o: AttemptOptions): Promise<AttemptResult> {
  const workDir = await makeWorkDir(o.tmpDir);
  try {
    return await new Promise<AttemptResult>((resolve) => {
      const events: RunnerEvent[] = [];
      const stdout = new CappedText(o.outputLimitBytes);
      const stderr = new CappedText(o.outputLimitBytes);
      let killedBy: AttemptResult['killedBy'] = null;
      let settled = false;
      let pending = '';
      let eventBytes = 0;
      let exitInfo: { code: number | null; signal: NodeJS.Signals | null } | null = null;

      const child = spawn(o.launcher.command, [...o.launcher.args, o.runnerPath, `--comlrl-sandbox=${o.tag}`], {
        cwd: workDir,
        env: {},
        stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
        detached: true,
        windowsHide: true,
      });

      let watchdog: NodeJS.Timeout | undefined;
      const deadlineTimer = setTimeout(() => kill('deadline'), Math.max(0, o.budgets.deadline - Date.now()));
      const arm = (ms: number) => {
        clearTimeout(watchdog);
        watchdog = setTimeout(() => kill('watchdog'), ms);
      };
      const kill = (reason: 'watchdog' | 'deadline') => {
        if (exitInfo) return;
        killedBy ??= reason;
        killGroup(child.pid);
      };
      const finish = (spawnError?: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(watchdog);
        clearTimeout(deadlineTimer);
        // After 'exit' the group was killed at once; killing it again later could hit a reused pid.
        if (!exitInfo) killGroup(child.pid);
        if (child.pid !== undefined) live.delete(child.pid);
        for (const stream of child.stdio) stream?.destroy();
        resolve({
          events,
          killedBy,
          exitCode: exitInfo?.code ?? null,
          signal: exitInfo?.signal ?? null,
          stdout: stdout.text(),
          stderr: stderr.text(),
          spawnError,
        });
      };

      if (child.pid !== undefined) track(child.pid);
      arm(o.budgets.startupMs);
      child.on('error', (err) => finish(err));
      child.stdin.on('error', () => undefined); // EPIPE when the child dies before reading
      child.stdout.on('data', (c: Buffer) => stdout.add(c));
      child.stderr.on('data', (c: Buffer) => stderr.add(c));
      const channel = child.stdio[3] as Readable;
      channel.on('error', () => undefined);
      channel.on('data', (chunk: Buffer) => {
        eventBytes += chunk.length;
        if (eventBytes > MAX_EVENT_BYTES) {
          kill('watchdog');
          return;
        }
        pending += chunk.toString('utf8');
        let newline: number;
        while ((newline = pending.indexOf('\n')) >= 0) {
          const line = pending.slice(0, newline);
          pending = pending.slice(newline + 1);
          const ev = parseEvent(line, job.nonce);
          if (!ev) continue;
          events.push(ev);
          if (!exitInfo) arm(nextBudget(ev, o.budgets));
        }
      });
      child.on('exit', (code, signal) => {
        exitInfo = { code, signal };
        clearTimeout(watchdog);
        // Anything else in the group (threads' children, stragglers) goes with the runner.
        killGroup(child.pid);
        if (child.pid !== undefined) live.delete(child.pid);
        setTimeout(() => finish(), DRAIN_MS).unref();
      });
      child.on('close', () => finish());
      child.stdin.end(JSON.stringify(job));
    });
  } finally {
    await removeWorkDir(workDir);
  }
}
