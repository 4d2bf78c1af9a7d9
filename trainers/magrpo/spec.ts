/** MAGRPO's registry entry: its section, schema and model roles (no critics), registered by ../builtin.ts. */
import { trainerInputsOf, type TrainerSpec } from '../registry.js';
import { magrpoConfigSchema, magrpoEvalEarlyTermination, type MAGRPOConfig } from './config.js';
import { MAGRPOTrainer } from './trainer.js';

/** MAGRPO: no critics; its threshold prunes the rollout tree and, unless `eval_early_termination: false`, ends eval episodes (as `MAGRPOTrainer.evaluate`). */
export const MAGRPO_TRAINER: TrainerSpec<MAGRPOConfig> = {
  name: 'magrpo',
  label: 'MAGRPO',
  section: 'magrpo',
  schema: magrpoConfigSchema,
  roles: { reference: 'kl' },
  evalEarlyTermination: magrpoEvalEarlyTermination,
  build: (inputs) => new MAGRPOTrainer<unknown, unknown>({ ...trainerInputsOf(inputs), config: inputs.config }),
};
