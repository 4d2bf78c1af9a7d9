import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadRows } from './load.js';
import {
  coopHERowSchema,
  houseBuildTaskSchema,
  tldrRowSchema,
  type CoopHERow,
  type HouseBuildTask,
  type TLDRRow,
} from './schemas.js';

/** Train/eval split specs of the papers' configs, per task (tasks-reference §1.5, §2.5, §3.4). */
export const paperSplits = {
  /** MAGRPO and MAAC use 1100 rows; IAC (and the AC / GRPO baselines) use 1000. */
  tldr: {
    magrpo: { train: 'train[:1100]', eval: 'test[:1100]' },
    maac: { train: 'train[:1100]', eval: 'test[:1100]' },
    iac: { train: 'train[:1000]', eval: 'test[:1000]' },
  },
  /**
   * CoopHumanEval/16–81 train, /0–15 eval, from one local file: its only split is `train` (see
   * loadRows). A hub-layout directory holding the fork's `test` split takes `test[16:]` / `test[:16]`.
   */
  coophe: { train: 'train[16:]', eval: 'train[:16]' },
  /** The 10 packaged tasks: 0002 and 0101–0107 train, 0108–0109 eval. */
  housebuild: { train: '[:8]', eval: '[8:]' },
} as const;

/** Loads `trl-lib/tldr` rows (a local JSON/JSONL/Parquet export or hub-layout directory). */
export function loadTLDRRows(path: string, split?: string): Promise<TLDRRow[]> {
  return loadRows(path, { schema: tldrRowSchema, split });
}

/** Loads CoopHumanEval problems from a local file (the data has no licence: it is not shipped). */
export function loadCoopHERows(path: string, split?: string): Promise<CoopHERow[]> {
  return loadRows(path, { schema: coopHERowSchema, split });
}

/**
 * Loads HouseBuild tasks; without `path`, the task set shipped with the package
 * (`data/housebuild/data.json`, MIT, see its NOTICE.md).
 */
export function loadHouseBuildTasks(path?: string, split?: string): Promise<HouseBuildTask[]> {
  return loadRows(path ?? houseBuildDataPath(), { schema: houseBuildTaskSchema, split });
}

/** Absolute path of the packaged HouseBuild task set. */
export function houseBuildDataPath(): string {
  // Found by walking up because this module runs both from src/ (tests) and dist/src/ (package).
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const candidate = join(dir, 'data', 'housebuild', 'data.json');
    if (existsSync(candidate)) return candidate;
    dir = dirname(dir);
  }
  throw new Error('packaged HouseBuild data (data/housebuild/data.json) not found next to the comlrl package');
}
