/**
 * The tests' one way to reach the shared reference folder (`../shared` beside the repository,
 * which developers and CI have and a clone does not).
 *
 * The suite stands alone: what it needs from the folder and may ship is committed under
 * test/fixtures/. What it may not ship (the CoopHE vectors embed problem text that has no licence)
 * is read from the folder, and the checks that need it skip with a note saying what they would
 * check. COMLRL_SHARED_DIR overrides the folder's location; .ci/run points it at a missing path for
 * one run of the files that import this module, and fails if any of them skipped in the normal pass.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { TestContext } from 'vitest';

/** The repository root (this file is in test/). */
export const REPO_ROOT = path.resolve(import.meta.dirname, '..');

/** Environment variable that overrides where the shared folder is. */
export const SHARED_DIR_ENV = 'COMLRL_SHARED_DIR';

/** The shared folder: `$COMLRL_SHARED_DIR` when set (relative to the working directory), else ../shared. */
export function sharedDir(env: NodeJS.ProcessEnv = process.env): string {
  const override = env[SHARED_DIR_ENV];
  return override !== undefined && override !== '' ? path.resolve(override) : path.resolve(REPO_ROOT, '..', 'shared');
}

/** Absolute path of `rel` inside the shared folder. */
export function sharedPath(rel: string): string {
  return path.join(sharedDir(), rel);
}

/** Absolute path of a committed fixture, `rel` inside test/fixtures/. */
export function fixturePath(rel: string): string {
  return path.join(REPO_ROOT, 'test', 'fixtures', rel);
}

/** Parses a committed fixture's JSON. The caller names the shape it expects. */
export function readFixtureJson<T>(rel: string): T {
  return JSON.parse(readFileSync(fixturePath(rel), 'utf8')) as T;
}

/** Parses a repository file's JSON (`rel` from the repository root). */
export function readRepoJson<T>(rel: string): T {
  return JSON.parse(readFileSync(path.join(REPO_ROOT, rel), 'utf8')) as T;
}

/** A file of the shared folder that some checks need: its content when present, else the skip note. */
export type SharedFile<T> = { present: true; value: T } | { present: false; note: string };

/**
 * The note a test skips with when `rel` is missing from the shared folder: the path looked at,
 * `checks` (what the skipped test would have checked) and how to run it.
 */
export function sharedSkipNote(rel: string, checks: string): string {
  return `needs ${sharedPath(rel)} (not found; set ${SHARED_DIR_ENV} to the shared folder): would check ${checks}`;
}

/**
 * Reads and parses `rel` from the shared folder. When it is missing, warns once (the note shows in
 * the run's output even where the reporter hides skipped tests) and returns the skip note.
 */
export function readSharedJson<T>(rel: string, checks: string): SharedFile<T> {
  const file = sharedPath(rel);
  if (!existsSync(file)) {
    const note = sharedSkipNote(rel, checks);
    console.warn(`[shared] skipped: ${note}`);
    return { present: false, note };
  }
  return { present: true, value: JSON.parse(readFileSync(file, 'utf8')) as T };
}

/** Inside a test: the shared file's content, or the test skips with the file's note. */
export function sharedOrSkip<T>(file: SharedFile<T>, ctx: TestContext): T {
  if (!file.present) ctx.skip(file.note);
  return file.value;
}
