/** Fresh temporary work dirs for sandbox runs, removed afterwards whatever the candidate did. */
import { chmodSync, mkdtempSync, readdirSync, rmSync, lstatSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';

const PREFIX = 'comlrl-coophe-';

/** Creates an empty private directory under `parent`. */
export function makeWorkDir(parent: string): Promise<string> {
  return mkdtemp(join(parent, PREFIX));
}

/** Synchronous {@link makeWorkDir} (construction-time probes). */
export function makeWorkDirSync(parent: string): string {
  return mkdtempSync(join(parent, PREFIX));
}

/**
 * Removes `dir` and everything in it. Candidate code may have made sub-directories unreadable
 * (`chmod 000`), which blocks a plain recursive removal for a non-root user: permissions are then
 * restored and the removal retried.
 */
export async function removeWorkDir(dir: string): Promise<void> {
  try {
    await rm(dir, { recursive: true, force: true, maxRetries: 2 });
  } catch {
    restoreOwnerAccess(dir);
    await rm(dir, { recursive: true, force: true, maxRetries: 2 });
  }
}

/** Synchronous {@link removeWorkDir}. */
export function removeWorkDirSync(dir: string): void {
  try {
    rmSync(dir, { recursive: true, force: true });
  } catch {
    restoreOwnerAccess(dir);
    rmSync(dir, { recursive: true, force: true });
  }
}

function restoreOwnerAccess(dir: string): void {
  try {
    if (!lstatSync(dir).isDirectory()) return;
    chmodSync(dir, 0o700);
    for (const entry of readdirSync(dir)) restoreOwnerAccess(join(dir, entry));
  } catch {
    // Best effort: the retried removal reports what is still wrong.
  }
}
