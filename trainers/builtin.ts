/**
 * Registers the built-in trainers as this module loads, one line each; every trainer's folder
 * exports its spec (section, schema, model roles, build) from `spec.ts`. Registration order is the
 * order config messages list the sections in.
 */
import { CENTRALIZED_MAGRPO_TRAINER } from './centralized-magrpo/spec.js';
import { COLLM_CC_TRAINER, COLLM_DC_TRAINER } from './collm/spec.js';
import { MADPO_TRAINER } from './madpo/spec.js';
import { MAGRPO_TRAINER } from './magrpo/spec.js';
import { MARLHF_TRAINER } from './marlhf/spec.js';
import { registerTrainer } from './registry.js';
import { MAREINFORCE_TRAINER, MAREMAX_TRAINER, MARLOO_TRAINER } from './reinforce/spec.js';

registerTrainer(MAGRPO_TRAINER);
registerTrainer(COLLM_DC_TRAINER);
registerTrainer(COLLM_CC_TRAINER);
registerTrainer(MAREINFORCE_TRAINER);
registerTrainer(MAREMAX_TRAINER);
registerTrainer(MARLOO_TRAINER);
registerTrainer(CENTRALIZED_MAGRPO_TRAINER);
registerTrainer(MADPO_TRAINER);
registerTrainer(MARLHF_TRAINER);
