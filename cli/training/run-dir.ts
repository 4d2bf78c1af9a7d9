/**
 * The run directory's layout and identity: its file names, its config file, whether a directory
 * already holds a run, the default directory of a config, and the config hash checkpoints carry.
 */
import { existsSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { configHash } from '../../src/config/hash.js';
import { runConfigIdentity } from '../../src/config/schema.js';
import { displayPath } from '../display-path.js';
import type { RunConfig } from '../schemas.js';

/** Files of a run directory. */
export const RUN_FILES = {
  config: 'config.yaml',
  run: 'run.json',
  metrics: 'metrics.jsonl',
  /** TensorBoard event files (logging.tensorboard). */
  tensorboard: 'tensorboard',
  eval: 'eval.json',
  checkpoints: 'checkpoints',
  final: 'final',
} as const;

/** The first line of the config.yaml a run writes (it tells a run's config from a user's own file). */
export const RUN_CONFIG_HEADER = '# comlrl run config (resolved';

/** Reads the YAML config a run directory stores. */
export function runDirConfigFile(runDir: string): string {
  return path.join(runDir, RUN_FILES.config);
}

/** The hash stored in checkpoints: the config minus output, backend and memory. A resumed run keeps the hash over the model paths it started with (./models.ts). */
export function runConfigHash(config: RunConfig): string {
  return configHash(runConfigIdentity(config));
}

/** Whether `dir` holds (part of) a run: its files, or a config.yaml a run wrote. */
export async function isNonEmptyRun(dir: string): Promise<boolean> {
  for (const f of [RUN_FILES.metrics, RUN_FILES.run, RUN_FILES.checkpoints, RUN_FILES.final]) if (existsSync(path.join(dir, f))) return true;
  // A run killed right after writing its config.yaml.
  const cfg = runDirConfigFile(dir);
  return existsSync(cfg) && (await fs.readFile(cfg, 'utf8').catch(() => '')).startsWith(RUN_CONFIG_HEADER);
}

function timestamp(): string {
  const d = new Date();
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}${p(d.getMonth() + 1)}${p(d.getDate())}-${p(d.getHours())}${p(d.getMinutes())}${p(d.getSeconds())}`;
}

/**
 * The command that continues a run from `checkpointDir` when it is one of a run's checkpoints
 * (`RUN/checkpoints/step-N`): `npx comlrl train --resume RUN`; undefined for any other folder (final/).
 */
export function resumeCommandFor(checkpointDir: string): string | undefined {
  const parent = path.dirname(checkpointDir);
  if (path.basename(parent) !== RUN_FILES.checkpoints) return undefined;
  return `npx comlrl train --resume ${displayPath(path.dirname(parent))}`;
}

/** The run directory of a config: `output.dir`, else `runs/<task>-<trainer>-<timestamp>`. */
export function defaultRunDir(config: RunConfig): string {
  return path.resolve(config.output.dir ?? path.join('runs', `${config.dataset.task}-${config.trainer}-${timestamp()}`));
}
