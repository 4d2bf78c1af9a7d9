/**
 * One run per run directory: a lock file (`run.lock`) holding the owner's pid, host, start time,
 * command and a random token, taken atomically before the run writes anything there and removed
 * when the run ends (normally, on an error, or at `process.exit` after a second Ctrl-C).
 *
 * Taking it: the owner's record is written to a private temporary file, which is then hard-linked
 * to `run.lock`; the link fails when a lock is already there, so exactly one of two racing runs
 * gets it and nobody ever reads a half-written lock. A filesystem without hard links falls back
 * to an exclusive create.
 *
 * A lock whose process is gone (same host, no such pid: the run was killed with SIGKILL, the
 * machine ran out of memory, ...) is stale: it is named in the log and taken over, since a
 * dead process cannot be harmed and making the user delete the file would only add a step. A lock
 * of another host cannot be checked from here, so it is refused with the command that clears it.
 * A pid that is alive is trusted to be the run (pid reuse makes a stale lock look alive: the
 * message names the file to remove then).
 */
import { randomBytes } from 'node:crypto';
import { linkSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import * as path from 'node:path';
import { displayPath } from '../display-path.js';

/** The lock file's name inside a run directory. */
export const RUN_LOCK_FILE = 'run.lock';

/** What a lock file holds. */
export interface RunLockOwner {
  readonly pid: number;
  readonly host: string;
  readonly started_at: string;
  readonly command: string;
  /** Tells this lock from a later one of the same pid (an in-process test, a reused pid). */
  readonly token: string;
}

/** The run directory is locked by a live run (or one this process cannot check). */
export class RunLockedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RunLockedError';
  }
}

/** A held lock; {@link RunLock.release} removes it (idempotent). */
export interface RunLock {
  readonly file: string;
  readonly owner: RunLockOwner;
  release(): void;
}

/**
 * Takes the lock of `runDir` (which must exist), taking over a stale one (said through `log`).
 * @throws RunLockedError naming the owner and the lock file when another run holds it
 */
export function acquireRunLock(runDir: string, log: (line: string) => void): RunLock {
  const file = path.join(runDir, RUN_LOCK_FILE);
  const owner: RunLockOwner = {
    pid: process.pid,
    host: hostname(),
    started_at: new Date().toISOString(),
    command: [path.basename(process.argv[1] ?? 'node'), ...process.argv.slice(2)].join(' '),
    token: randomBytes(8).toString('hex'),
  };
  const text = `${JSON.stringify(owner, null, 2)}\n`;
  // A few rounds: a stale lock taken over by a racing run, or one released between two reads.
  for (let round = 0; round < 5; round++) {
    if (createExclusive(file, text, owner.token)) return held(file, owner);
    const holder = readOwner(file);
    if (holder === 'gone') continue;
    const clear = `rm ${displayPath(file)}`;
    if (holder === 'unreadable') {
      throw new RunLockedError(`output directory ${displayPath(runDir)} is locked by ${displayPath(file)}, which is not a comlrl lock file this version can read; if no comlrl run uses that directory, remove it (${clear}) and run again`);
    }
    const who = `pid ${holder.pid} on host ${holder.host}, started ${holder.started_at}${holder.command ? ` (${holder.command})` : ''}`;
    const state = processState(holder);
    if (state === 'alive') {
      throw new RunLockedError(
        `output directory ${displayPath(runDir)} is in use by another comlrl run: ${who}; one run per directory (their checkpoints and logs would interleave): wait for it to finish or stop it, or choose another directory. If that process is not a comlrl run (a reused pid), remove the lock: ${clear}`,
      );
    }
    if (state === 'other-host') {
      throw new RunLockedError(
        `output directory ${displayPath(runDir)} is locked by a comlrl run on another host: ${who}; it cannot be checked from ${owner.host}. If that run is over, remove the lock: ${clear}`,
      );
    }
    log(`[comlrl] taking over the stale lock ${displayPath(file)} of ${who}: that process is no longer running (the run ended without releasing it, e.g. killed)`);
    takeOver(file, holder.token);
  }
  throw new RunLockedError(`output directory ${displayPath(runDir)}: could not take its lock ${displayPath(file)} (other runs keep taking it); try again`);
}

/** Writes `text` to `file` unless it exists; false when it does. */
function createExclusive(file: string, text: string, token: string): boolean {
  const tmp = `${file}.${token}.tmp`;
  writeFileSync(tmp, text);
  try {
    linkSync(tmp, file);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return false;
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'ENOSYS' && code !== 'EOPNOTSUPP') throw err;
    // No hard links here: an exclusive create (a reader may then meet an empty file for an instant).
    try {
      writeFileSync(file, text, { flag: 'wx' });
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw e;
    }
  } finally {
    rmQuiet(tmp);
  }
}

function readOwner(file: string): RunLockOwner | 'gone' | 'unreadable' {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'gone';
    throw err;
  }
  try {
    const o = JSON.parse(text) as Partial<RunLockOwner>;
    if (typeof o.pid === 'number' && typeof o.host === 'string' && typeof o.token === 'string') {
      return { pid: o.pid, host: o.host, token: o.token, started_at: String(o.started_at ?? '?'), command: String(o.command ?? '') };
    }
  } catch {
    // Not JSON: reported as unreadable below.
  }
  return 'unreadable';
}

/** Whether the lock's owner still runs: 'alive' when it may (signal 0 reaches it, or we may not signal it). */
function processState(o: RunLockOwner): 'alive' | 'dead' | 'other-host' {
  if (o.host !== hostname()) return 'other-host';
  try {
    process.kill(o.pid, 0);
    return 'alive';
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH' ? 'dead' : 'alive';
  }
}

/**
 * Removes the stale lock with token `token`: it is renamed away first and checked, so that a lock
 * a racing run has just taken in its place is put back, never deleted.
 */
function takeOver(file: string, token: string): void {
  const aside = `${file}.stale-${randomBytes(6).toString('hex')}`;
  try {
    renameSync(file, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  const moved = readOwner(aside);
  if (moved !== 'gone' && moved !== 'unreadable' && moved.token !== token) {
    // Another run's fresh lock: put it back (it wins; this run then meets it as alive).
    try {
      linkSync(aside, file);
    } catch {
      // A third run took the place meanwhile; either way the lock stays held by a live run.
    }
  }
  rmQuiet(aside);
}

function held(file: string, owner: RunLockOwner): RunLock {
  let done = false;
  const release = (): void => {
    if (done) return;
    done = true;
    process.off('exit', release);
    // Only our own lock: a directory someone cleared and another run locked stays locked.
    const now = readOwner(file);
    if (now !== 'gone' && now !== 'unreadable' && now.token === owner.token) rmQuiet(file);
  };
  // `process.exit` (a second Ctrl-C, an uncaught error) runs no finally block, but 'exit' listeners.
  process.on('exit', release);
  return { file, owner, release };
}

function rmQuiet(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // Already gone.
  }
}
