/** The trainers' config schemas, injected into the run-config parser (src cannot import trainers/). */
import type { RunConfigSchemas } from '../src/config/schema.js';
import { collmCCConfigSchema, collmDCConfigSchema } from '../trainers/actor-critic-config.js';
import { magrpoConfigSchema } from '../trainers/magrpo-config.js';

export const TRAINER_CONFIG_SCHEMAS: RunConfigSchemas = {
  magrpo: magrpoConfigSchema,
  'collm-dc': collmDCConfigSchema,
  'collm-cc': collmCCConfigSchema,
};
