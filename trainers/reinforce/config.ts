/**
 * The REINFORCE family's configs (CoMLRL 1.4's `MAREINFORCEConfig`, `MAReMaxConfig`,
 * `MARLOOConfig`): MAGRPO's config, every field under the same name, with one default changed —
 * `advantage_mode` is 'raw' (REINFORCE without a baseline), 'max' (ReMax-style: the group's best
 * return as the baseline) or 'rloo' (leave-one-out baseline). As in CoMLRL the field stays
 * settable, so a CoMLRL YAML section maps over 1:1.
 *
 * Note (as in CoMLRL): with `advantage_normalization` on (its default) every mode z-scores the
 * group's returns, so these trainers then train exactly as MAGRPO does; the example configs turn it
 * off.
 */
import type { z } from 'zod';
import { ADVANTAGE_MODES, type AdvantageMode } from '../magrpo/advantage.js';
import { magrpoConfigSchema } from '../magrpo/config.js';
import { enumField, parseConfig } from '../core/config.js';

/** MAGRPO's schema with another `advantage_mode` default. */
function withAdvantageMode<M extends AdvantageMode>(mode: M) {
  return magrpoConfigSchema.safeExtend({
    /** mean: R − mean; raw: R; max: R − max; rloo: leave-one-out baseline (this trainer's default: see the module comment). */
    advantage_mode: enumField('advantage_mode', ADVANTAGE_MODES).default(mode),
  });
}

const mareinforceSchema = withAdvantageMode('raw');
const maremaxSchema = withAdvantageMode('max');
const marlooSchema = withAdvantageMode('rloo');

/** MAREINFORCE's zod schema: MAGRPO's with `advantage_mode` 'raw'. */
export const mareinforceConfigSchema = mareinforceSchema;
/** MAReMax's zod schema: MAGRPO's with `advantage_mode` 'max'. */
export const maremaxConfigSchema = maremaxSchema;
/** MARLOO's zod schema: MAGRPO's with `advantage_mode` 'rloo'. */
export const marlooConfigSchema = marlooSchema;

/** MAREINFORCE config as written by users (snake_case, every field optional). */
export type MAREINFORCEConfigInput = z.input<typeof mareinforceSchema>;
/** MAREINFORCE config after validation and defaults. */
export type MAREINFORCEConfig = z.output<typeof mareinforceSchema>;
/** MAReMax config as written by users. */
export type MAReMaxConfigInput = z.input<typeof maremaxSchema>;
/** MAReMax config after validation and defaults. */
export type MAReMaxConfig = z.output<typeof maremaxSchema>;
/** MARLOO config as written by users. */
export type MARLOOConfigInput = z.input<typeof marlooSchema>;
/** MARLOO config after validation and defaults. */
export type MARLOOConfig = z.output<typeof marlooSchema>;

/** Validates a MAREINFORCE config and fills defaults (errors list every bad field, as MAGRPO's). */
export function parseMAREINFORCEConfig(input: MAREINFORCEConfigInput | Record<string, unknown> = {}): MAREINFORCEConfig {
  return parseConfig('MAREINFORCE', mareinforceSchema, input, Object.keys(mareinforceSchema.shape));
}

/** Validates a MAReMax config and fills defaults. */
export function parseMAReMaxConfig(input: MAReMaxConfigInput | Record<string, unknown> = {}): MAReMaxConfig {
  return parseConfig('MAReMax', maremaxSchema, input, Object.keys(maremaxSchema.shape));
}

/** Validates a MARLOO config and fills defaults. */
export function parseMARLOOConfig(input: MARLOOConfigInput | Record<string, unknown> = {}): MARLOOConfig {
  return parseConfig('MARLOO', marlooSchema, input, Object.keys(marlooSchema.shape));
}
