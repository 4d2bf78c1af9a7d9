// What the backend setup scripts (setup-tensorflow.mjs, setup-torch.mjs) share: one setup at a time
// per folder, the build in a stage folder swapped in whole, and nothing left half-done when a
// step fails or the user interrupts.
import fs from 'node:fs';
import path from 'node:path';

/** A failure the user can act on: printed as its message, without a stack. */
export class SetupError extends Error {}

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
