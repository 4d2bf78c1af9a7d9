// What the backend setup scripts (setup-tensorflow.mjs, setup-torch.mjs) share: where a backend
// goes, one setup at a time per folder, the build in a stage folder swapped in whole, and nothing
// left half-done when a step fails or the user interrupts.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/** A failure the user can act on: printed as its message, without a stack. */
export class SetupError extends Error {}

/**
 * Builds the library (scripts/build.mjs) when `<root>/dist` lacks it: a clone after
 * `npm ci --ignore-scripts`. An installed package ships dist/ and has no build script.
 */
export function ensureLibraryBuilt(root, log) {
  if (fs.existsSync(path.join(root, 'dist', 'src', 'index.js'))) return;
  const build = path.join(root, 'scripts', 'build.mjs');
  if (!fs.existsSync(build)) throw new SetupError(`${root}/dist is missing: reinstall comlrl.`);
  log('building the library (npm run build)');
  const r = spawnSync(process.execPath, [build], { cwd: root, encoding: 'utf8' });
  if (r.status !== 0) throw new SetupError(`the library did not build; run \`npm run build\` in ${root} and read its errors:\n${(r.stdout + r.stderr).trim().split('\n').slice(-5).join('\n')}`);
}

/**
 * The folder `backend` is set up in, as the library will look for it at run time (one rule, in
 * src/backend/setup-home.ts): `{ base, rule }`.
 */
export async function backendBase(root, backend, log) {
  ensureLibraryBuilt(root, log);
  const { nativeBackendBase } = await import(pathToFileURL(path.join(root, 'dist', 'src', 'backend', 'setup-home.js')).href);
  return nativeBackendBase(backend, { packageRoot: root, env: process.env, cwd: process.cwd() });
}

/** A folder as the user should read it: relative to the working directory when inside it. */
export function shownPath(p) {
  const rel = path.relative(process.cwd(), p);
  return rel === '' ? p : rel.startsWith('..') || path.isAbsolute(rel) ? p : rel;
}

/**
 * Takes `<base>/.setup.lock` (a lock whose process is gone is taken over) and removes what an
 * interrupted run left behind (`.stage-*`, `.old-*`).
 */
function takeLock(base, lock) {
  fs.mkdirSync(base, { recursive: true });
  try {
    fs.writeFileSync(lock, String(process.pid), { flag: 'wx' });
  } catch {
    const other = Number(fs.readFileSync(lock, 'utf8'));
    let alive = false;
    try {
      process.kill(other, 0);
      alive = other !== process.pid;
    } catch {
      alive = false;
    }
    if (alive) throw new SetupError(`another setup (pid ${other}) is running on ${base}; wait for it or stop it.`);
    fs.writeFileSync(lock, String(process.pid));
  }
  // Leftovers of an interrupted run (its process is gone: we hold the lock now).
  for (const name of fs.readdirSync(base)) {
    if (name.startsWith('.stage-') || name.startsWith('.old-')) fs.rmSync(path.join(base, name), { recursive: true, force: true });
  }
}

/**
 * Runs `build(stage)` in `<base>/.stage-<pid>` under the folder's lock, then swaps the stage in as
 * `target` (the old install moved aside, then removed; put back if the swap fails). An interrupt
 * (SIGINT, SIGTERM, SIGHUP) calls `stopChild` and removes the stage: nothing is installed.
 * Returns what `build` returned.
 */
export async function installStaged({ base, target, tag, build, stopChild }) {
  const lock = path.join(base, '.setup.lock');
  takeLock(base, lock);
  const stage = path.join(base, `.stage-${process.pid}`);
  const cleanup = () => {
    fs.rmSync(stage, { recursive: true, force: true });
    try {
      if (fs.readFileSync(lock, 'utf8') === String(process.pid)) fs.rmSync(lock, { force: true });
    } catch {
      // lock already gone
    }
  };
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(sig, () => {
      stopChild();
      console.error(`${tag} interrupted; removed the partial build, nothing was installed`);
      cleanup();
      process.exit(130);
    });
  }
  try {
    fs.mkdirSync(stage, { recursive: true });
    const built = await build(stage);
    const old = path.join(base, `.old-${process.pid}`);
    if (fs.existsSync(target)) fs.renameSync(target, old);
    try {
      fs.renameSync(stage, target);
    } catch (err) {
      if (fs.existsSync(old)) fs.renameSync(old, target);
      throw err;
    }
    fs.rmSync(old, { recursive: true, force: true });
    return built;
  } finally {
    cleanup();
  }
}

/** Runs a setup's `main`, printing a SetupError as what to do and anything else with its stack; exits 1 on failure. */
export function runSetup(tag, main) {
  main().catch((err) => {
    if (err instanceof SetupError) {
      console.error(`${tag} error: ${err.message}`);
      console.error(`${tag} nothing was installed or changed.`);
    } else {
      console.error(`${tag} unexpected failure: ${err?.stack ?? err}`);
    }
    process.exit(1);
  });
}
