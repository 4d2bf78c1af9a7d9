/** The REINFORCE family's registry entries (MAREINFORCE, MAReMax, MARLOO): no critics, eval as MAGRPO; registered by ../builtin.ts. */
import { magrpoEvalEarlyTermination } from '../magrpo/config.js';
import { trainerInputsOf, type TrainerSpec } from '../registry.js';
import { mareinforceConfigSchema, maremaxConfigSchema, marlooConfigSchema, type MAREINFORCEConfig, type MAReMaxConfig, type MARLOOConfig } from './config.js';
import { MAREINFORCETrainer, MAReMaxTrainer, MARLOOTrainer } from './trainer.js';

/** MAREINFORCE: MAGRPO without a baseline (`advantage_mode` 'raw'); no critics, eval as MAGRPO. */
export const MAREINFORCE_TRAINER: TrainerSpec<MAREINFORCEConfig> = {
  name: 'mareinforce',
  label: 'MAREINFORCE',
  section: 'mareinforce',
  schema: mareinforceConfigSchema,
  roles: { reference: 'kl' },
  evalEarlyTermination: magrpoEvalEarlyTermination,
  build: (inputs) => new MAREINFORCETrainer<unknown, unknown>({ ...trainerInputsOf(inputs), config: inputs.config }),
};

/** MAReMax: MAGRPO with the group's best return as the baseline (`advantage_mode` 'max'). */
export const MAREMAX_TRAINER: TrainerSpec<MAReMaxConfig> = {
  name: 'maremax',
  label: 'MAReMax',
  section: 'maremax',
  schema: maremaxConfigSchema,
  roles: { reference: 'kl' },
  evalEarlyTermination: magrpoEvalEarlyTermination,
  build: (inputs) => new MAReMaxTrainer<unknown, unknown>({ ...trainerInputsOf(inputs), config: inputs.config }),
};

/** MARLOO: MAGRPO with the leave-one-out baseline (`advantage_mode` 'rloo'). */
export const MARLOO_TRAINER: TrainerSpec<MARLOOConfig> = {
  name: 'marloo',
  label: 'MARLOO',
  section: 'marloo',
  schema: marlooConfigSchema,
  roles: { reference: 'kl' },
  evalEarlyTermination: magrpoEvalEarlyTermination,
  build: (inputs) => new MARLOOTrainer<unknown, unknown>({ ...trainerInputsOf(inputs), config: inputs.config }),
};
