/**
 * The CLI's run config: the trainers' config schemas injected into the run-config parser (src cannot
 * import trainers/), and the typed config they give. Config files are read and validated here once;
 * everything downstream takes {@link TypedRunConfig}.
 */
// The task registry's built-in task folders (and COMLRL_TASK_PATH's) register as this loads.
import '../envs/tasks.js';
import { loadRunConfig, type RunConfigOf, type RunConfigSchemas } from '../src/config/index.js';
import { collmCCConfigSchema, collmDCConfigSchema } from '../trainers/actor-critic-config.js';
import { magrpoConfigSchema } from '../trainers/magrpo-config.js';

/** Each trainer's own schema, by trainer name. */
export const TRAINER_CONFIG_SCHEMAS = {
  magrpo: magrpoConfigSchema,
  'collm-dc': collmDCConfigSchema,
  'collm-cc': collmCCConfigSchema,
} as const satisfies RunConfigSchemas;

/**
 * A validated run config whose `trainerConfig` is the selected trainer's typed config
 * (`MAGRPOConfig`, `CoLLMDCConfig` or `CoLLMCCConfig`, discriminated by `trainer`).
 */
export type TypedRunConfig = RunConfigOf<typeof TRAINER_CONFIG_SCHEMAS>;

/** Reads a YAML/JSON config file, applies `--set` overrides and validates it (once). */
export function loadConfig(file: string, sets: readonly string[]): TypedRunConfig {
  return loadRunConfig(file, sets, TRAINER_CONFIG_SCHEMAS);
}
