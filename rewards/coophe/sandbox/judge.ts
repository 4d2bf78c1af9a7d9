/**
 * One judge process: spawn `judge.py` in its own process group with an empty environment and a
 * fresh work dir, feed it the job, collect its events until it exits or the call's deadline
 * passes, and make sure that nothing of it is left (the group is killed, the work dir removed).
 * The judge itself starts and supervises the sandboxed runners.
 */
import { spawn } from 'node:child_process';
import { parseEvent, type JudgeEvent, type JudgeJob } from './protocol.js';
import { makeWorkDir, removeWorkDir } from './workdir.js';

/** What one judge process did. */
export interface JudgeRunResult {
  events: JudgeEvent[];
  /** Set when Node killed the judge because the call's wall clock ran out. */
  killedBy: 'deadline' | null;
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** The judge's own stderr (its traceback if it failed), capped. */
  stderr: string;
  /** Set when the process could not be started at all. */
  spawnError?: Error;
}

/** Options of {@link runJudge}. */
export interface JudgeRunOptions {
  /** The interpreter and its flags. */
  command: string;
  args: string[];
  judgePath: string;
  tmpDir: string;
  tag: string;
  /** Absolute time (Date.now()) at which the judge is killed whatever it is doing. */
  deadline: number;
}

// The judge's output is a few events per test plus the capped candidate output; far beyond this
// is a bug, and stops the run rather than filling memory.
const MAX_JUDGE_BYTES = 64 * 1024 * 1024;
const MAX_STDERR_BYTES = 64 * 1024;
// After the process exits, how long to wait for its pipes to drain.
const DRAIN_MS = 1000;

// Process groups of judges in flight, killed if the trainer exits while they run.
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

/** Runs the judge on `job` and resolves when it has ended and been cleaned up. */
export async function runJudge(job: JudgeJob, o: JudgeRunOptions): Promise<JudgeRunResult> {
  const workDir = await makeWorkDir(o.tmpDir);
  try {
    return await new Promise<JudgeRunResult>((resolve) => {
      const events: JudgeEvent[] = [];
      const stderrChunks: Buffer[] = [];
      let stderrBytes = 0;
      let killedBy: JudgeRunResult['killedBy'] = null;
      let settled = false;
      let pending = '';
      let outBytes = 0;
      let exitInfo: { code: number | null; signal: NodeJS.Signals | null } | null = null;

      const child = spawn(o.command, [...o.args, o.judgePath, `--comlrl-sandbox=${o.tag}`], {
        cwd: workDir,
        env: {},
        stdio: ['pipe', 'pipe', 'pipe'],
        detached: true,
        windowsHide: true,
      });

      const kill = () => {
        if (exitInfo) return;
        killedBy ??= 'deadline';
        killGroup(child.pid);
      };
      const deadlineTimer = setTimeout(kill, Math.max(0, o.deadline - Date.now()));
      const finish = (spawnError?: Error) => {
        if (settled) return;
        settled = true;
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
          stderr: Buffer.concat(stderrChunks).toString('utf8'),
          spawnError,
        });
      };

      if (child.pid !== undefined) track(child.pid);
      child.on('error', (err) => finish(err));
      child.stdin.on('error', () => undefined); // EPIPE when the judge dies before reading
      child.stderr.on('data', (c: Buffer) => {
        if (stderrBytes >= MAX_STDERR_BYTES) return;
        const part = c.subarray(0, MAX_STDERR_BYTES - stderrBytes);
        stderrChunks.push(part);
        stderrBytes += part.length;
      });
      child.stdout.on('data', (chunk: Buffer) => {
        outBytes += chunk.length;
        if (outBytes > MAX_JUDGE_BYTES) {
          kill();
          return;
        }
        pending += chunk.toString('utf8');
        let newline: number;
        while ((newline = pending.indexOf('\n')) >= 0) {
          const ev = parseEvent(pending.slice(0, newline));
          pending = pending.slice(newline + 1);
          if (ev) events.push(ev);
        }
      });
      child.on('exit', (code, signal) => {
        exitInfo = { code, signal };
        // Anything else in the group (the runner's launcher, stragglers) goes with the judge.
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
