/**
 * The CLI's run config. The tasks (envs/) and the trainers (trainers/builtin.ts) register as this
 * loads, so the run-config parser (src/config) knows their sections and schemas; config files are
 * read and validated here once, and everything downstream takes {@link RunConfig}.
 */
// The task registry's built-in task folders (and COMLRL_TASK_PATH's) register as this loads.
import '../envs/tasks.js';
import { loadRunConfig, type LoadRunConfigOptions, type RunConfig, type RunConfigSchemas } from '../src/config/index.js';

export type { RunConfig } from '../src/config/index.js';
// The built-in trainers register as this loads.
import '../trainers/builtin.js';
import { COLLM_CC_TRAINER, COLLM_DC_TRAINER } from '../trainers/collm/spec.js';
import { MAGRPO_TRAINER } from '../trainers/magrpo/spec.js';

/**
 * The built-in trainers' schemas, by trainer name (the registry's: `parseRunConfig` accepts this
 * for callers written before the trainer registry).
 */
export const TRAINER_CONFIG_SCHEMAS = {
  magrpo: MAGRPO_TRAINER.schema,
  'collm-dc': COLLM_DC_TRAINER.schema,
  'collm-cc': COLLM_CC_TRAINER.schema,
} as const satisfies RunConfigSchemas;

/**
 * Reads a YAML/JSON config file, applies `--set` overrides and validates it (once); relative model
 * and data paths become absolute (see `loadRunConfig`).
 */
export function loadConfig(file: string, sets: readonly string[], options: LoadRunConfigOptions = {}): RunConfig {
  return loadRunConfig(file, sets, undefined, options);
}
