/**
 * Claiming a run directory before a run writes anything: the checks of what is there (a file, a
 * finished run, a user's config.yaml), the directory made, and its lock (./run-lock.ts) taken
 * atomically, so two runs never share a directory. The claim remembers what it created, so that a
 * fresh run that fails before its first training item is done takes all of it away again and the
 * same command can run once the cause is fixed; what was in the directory before is never
 * touched, and a resumed or restarted run removes nothing.
 */
import { existsSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { listCheckpoints } from '../../src/checkpoint/atomic.js';
import { displayPath } from '../display-path.js';
import { outputDirProblem } from '../paths.js';
import type { RunConfig } from '../schemas.js';
import type { ResumePoint } from './resume.js';
import { defaultRunDir, isNonEmptyRun, RUN_FILES, runDirConfigFile } from './run-dir.js';
import { acquireRunLock, RUN_LOCK_FILE, type RunLock } from './run-lock.js';
import type { RunOptions } from './types.js';

/** A run directory this process holds the lock of. */
export interface RunDirClaim {
  readonly runDir: string;
  /** A new run (neither a resume nor a restart): only such a run ever removes what it wrote. */
  readonly fresh: boolean;
  /**
   * Removes what this start created in the run directory (and the directory itself and any
   * parents it made, when they are empty then), then releases the lock. Does nothing but release
   * for a resume or a restart. Resolves to whether the start had written anything besides its lock.
   */
  abandon(): Promise<boolean>;
  /** Releases the lock (idempotent). */
  release(): void;
}

/**
 * The run directory of `options` checked and locked (see the module comment).
 * @throws Error naming the directory and what to change when the run must not write there
 */
export async function claimRunDir(options: RunOptions, log: (line: string) => void): Promise<RunDirClaim> {
  const { config, resume } = options;
  const restart = options.restartIn !== undefined && !resume;
  const runDir = resume ? resume.runDir : options.restartIn !== undefined ? path.resolve(options.restartIn) : defaultRunDir(config);
  const outOption = options.outOption ?? 'output.dir';
  const dirProblem = outputDirProblem(runDir, outOption);
  if (dirProblem !== undefined) throw new Error(dirProblem);
  const firstMade = await fs.mkdir(runDir, { recursive: true });
  let lock: RunLock;
  try {
    lock = acquireRunLock(runDir, log);
  } catch (err) {
    await removeMadeDirs(runDir, firstMade);
    throw err;
  }
  // Read under the lock: what is there now was not made by this start (nor is being made by another).
  const before = new Set(await fs.readdir(runDir));
  const fresh = !resume && !restart;
  const claim: RunDirClaim = {
    runDir,
    fresh,
    release: () => lock.release(),
    abandon: async () => {
      const written = fresh ? (await fs.readdir(runDir)).filter((name) => !before.has(name) && name !== RUN_LOCK_FILE) : [];
      for (const name of written) await fs.rm(path.join(runDir, name), { recursive: true, force: true });
      lock.release();
      if (fresh) await removeMadeDirs(runDir, firstMade);
      return written.length > 0;
    },
  };
  try {
    // Under the lock: what another run may have left here until a moment ago is settled now.
    await checkRunDir(runDir, config, { resume, restart, outOption, log });
  } catch (err) {
    await claim.abandon();
    throw err;
  }
  return claim;
}

/** rmdir of `runDir` and its parents up to `firstMade` (what `mkdir -p` made), each only when empty. */
async function removeMadeDirs(runDir: string, firstMade: string | undefined): Promise<void> {
  if (firstMade === undefined) return;
  for (let dir = runDir; ; dir = path.dirname(dir)) {
    try {
      await fs.rmdir(dir);
    } catch {
      return;
    }
    if (dir === path.resolve(firstMade) || path.dirname(dir) === dir) return;
  }
}

/**
 * Refuses a run directory the run must not write into (another run, a user's config.yaml, a
 * resume whose run moved on since it was resolved); warns when `output.dir` is ignored by a resume.
 */
async function checkRunDir(
  runDir: string,
  config: RunConfig,
  o: { resume: ResumePoint | undefined; restart: boolean; outOption: string; log: (line: string) => void },
): Promise<void> {
  const { outOption, resume } = o;
  const choose = outOption === 'output.dir' ? 'set output.dir to a new directory' : `choose another ${outOption} DIR`;
  const fresh = !resume && !o.restart;
  if (fresh && (await isNonEmptyRun(runDir))) {
    const none = (await listCheckpoints(path.join(runDir, RUN_FILES.checkpoints))).length === 0;
    const how = none ? `--resume ${runDir} starts it again from step 0 (it has no checkpoint yet)` : `continue it with --resume ${runDir}`;
    throw new Error(
      outOption === 'output.dir'
        ? `output directory ${runDir} already holds a run; ${how}, or set output.dir to a new directory`
        : `output directory ${runDir} already holds a run; ${choose}`,
    );
  }
  if (resume?.newestCheckpoint !== undefined) {
    // Resolved before the lock was taken: another run may have resumed it meanwhile and gone on.
    const [newest] = await listCheckpoints(path.join(runDir, RUN_FILES.checkpoints));
    if (newest !== undefined && path.resolve(newest) !== path.resolve(resume.newestCheckpoint)) {
      throw new Error(
        `the run in ${displayPath(runDir)} moved on while this resume was starting (another run continued it): its newest checkpoint is now ${displayPath(newest)}, not ${displayPath(resume.newestCheckpoint)}; run the same command again to continue from there`,
      );
    }
  }
  if (resume && config.output.dir != null && path.resolve(config.output.dir) !== runDir) {
    o.log(`[comlrl] warning: output.dir ${config.output.dir} is ignored when resuming; the run continues in ${runDir}`);
  }
  const configPath = runDirConfigFile(runDir);
  if (fresh && existsSync(configPath)) {
    // Probably the user's own config file: the resolved config would replace it (comments and all).
    throw new Error(`output directory ${runDir} already contains ${RUN_FILES.config} (${configPath}), which this run would overwrite with its resolved config; ${choose}, or move that file elsewhere`);
  }
}
