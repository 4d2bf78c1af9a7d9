/**
 * The REINFORCE family (CoMLRL 1.4's `MAREINFORCETrainer`, `MAReMaxTrainer`, `MARLOOTrainer`):
 * MAGRPO's algorithm — rollout tree, returns, buffers, the loss −A · Σ_t log π — with the
 * advantage formed from the group's returns without a baseline (raw), against the group's best
 * return (max) or against the mean of the other K − 1 returns (rloo). Each is a MAGRPOTrainer with
 * its own config defaults (./config.ts) and names; a checkpoint of one resumes only as the same one.
 */
import { MAGRPOTrainer, type MAGRPOTrainerOptions, type MAGRPOVariant } from '../magrpo/trainer.js';
import { parseMAREINFORCEConfig, parseMAReMaxConfig, parseMARLOOConfig, type MAREINFORCEConfigInput, type MAReMaxConfigInput, type MARLOOConfigInput } from './config.js';

const MAREINFORCE_VARIANT: MAGRPOVariant = { names: { className: 'MAREINFORCETrainer', label: 'MAREINFORCE', stateTag: 'mareinforce' }, parse: parseMAREINFORCEConfig };
const MAREMAX_VARIANT: MAGRPOVariant = { names: { className: 'MAReMaxTrainer', label: 'MAReMax', stateTag: 'maremax' }, parse: parseMAReMaxConfig };
const MARLOO_VARIANT: MAGRPOVariant = { names: { className: 'MARLOOTrainer', label: 'MARLOO', stateTag: 'marloo' }, parse: parseMARLOOConfig };

/** Constructor arguments of {@link MAREINFORCETrainer}. */
export interface MAREINFORCETrainerOptions<T, S> extends Omit<MAGRPOTrainerOptions<T, S>, 'config'> {
  config?: MAREINFORCEConfigInput;
}
/** Constructor arguments of {@link MAReMaxTrainer}. */
export interface MAReMaxTrainerOptions<T, S> extends Omit<MAGRPOTrainerOptions<T, S>, 'config'> {
  config?: MAReMaxConfigInput;
}
/** Constructor arguments of {@link MARLOOTrainer}. */
export interface MARLOOTrainerOptions<T, S> extends Omit<MAGRPOTrainerOptions<T, S>, 'config'> {
  config?: MARLOOConfigInput;
}

/** Multi-agent REINFORCE without a baseline: A = R (then z-scored if `advantage_normalization`). */
export class MAREINFORCETrainer<T, S> extends MAGRPOTrainer<T, S> {
  constructor(options: MAREINFORCETrainerOptions<T, S>) {
    super(options, MAREINFORCE_VARIANT);
  }
}

/** Multi-agent ReMax: A = R − max over the group (then z-scored if `advantage_normalization`). */
export class MAReMaxTrainer<T, S> extends MAGRPOTrainer<T, S> {
  constructor(options: MAReMaxTrainerOptions<T, S>) {
    super(options, MAREMAX_VARIANT);
  }
}

/** Multi-agent RLOO: A = R − mean of the other K − 1 returns (then z-scored if `advantage_normalization`). */
export class MARLOOTrainer<T, S> extends MAGRPOTrainer<T, S> {
  constructor(options: MARLOOTrainerOptions<T, S>) {
    super(options, MARLOO_VARIANT);
  }
}
