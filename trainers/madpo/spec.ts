/** MADPO's registry entry: its section, schema and model roles (a frozen reference per agent, always), registered by ../builtin.ts. */
import { magrpoEvalEarlyTermination } from '../magrpo/config.js';
import { trainerInputsOf, type TrainerSpec } from '../registry.js';
import { madpoConfigSchema, type MADPOConfig } from './config.js';
import { MADPOTrainer } from './trainer.js';

/** MADPO: multi-agent DPO on the joint reward's preferences; no critics; each agent's frozen reference (adapters off under LoRA); eval as MAGRPO. */
export const MADPO_TRAINER: TrainerSpec<MADPOConfig> = {
  name: 'madpo',
  label: 'MADPO',
  section: 'madpo',
  schema: madpoConfigSchema,
  // Its DPO loss scores every agent against its reference, reference KL or not.
  roles: { reference: 'always' },
  evalEarlyTermination: magrpoEvalEarlyTermination,
  build: (inputs) => new MADPOTrainer<unknown, unknown>({ ...trainerInputsOf(inputs), config: inputs.config }),
};
