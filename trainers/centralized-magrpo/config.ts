/**
 * CentralizedMAGRPO's config (CoMLRL 1.4's `CentralizedMAGRPOConfig`): MAGRPO's fields under the
 * same names, with `num_turns` 1 (the only value it accepts, as CoMLRL) and
 * `collaboration_mode: centralized` (CoMLRL's switch, accepted with that value only). `num_agents`
 * counts the task's roles, as in CoMLRL — the policy itself is one model.
 */
import { z } from 'zod';
import { magrpoConfigSchema } from '../magrpo/config.js';
import { enumField, parseConfig } from '../core/config.js';

/** The one collaboration mode this trainer has. */
export const COLLABORATION_MODES = ['centralized'] as const;

const schema = magrpoConfigSchema.safeExtend({
  /** Turns: 1 (CoMLRL's centralized MAGRPO is single-turn). */
  num_turns: z.literal(1, { error: 'num_turns must be 1: CentralizedMAGRPO is single-turn (as in CoMLRL)' }).default(1),
  /** CoMLRL's collaboration switch; this trainer is the centralized one. */
  collaboration_mode: enumField('collaboration_mode', COLLABORATION_MODES, 'CentralizedMAGRPO trains one joint policy').default('centralized'),
});

/** CentralizedMAGRPO config as written by users (snake_case, every field optional). */
export type CentralizedMAGRPOConfigInput = z.input<typeof schema>;
/** CentralizedMAGRPO config after validation and defaults. */
export type CentralizedMAGRPOConfig = z.output<typeof schema>;

/** The zod schema (for the trainer registry and config tooling). */
export const centralizedMAGRPOConfigSchema = schema;

/** Validates a CentralizedMAGRPO config and fills defaults (errors list every bad field). */
export function parseCentralizedMAGRPOConfig(input: CentralizedMAGRPOConfigInput | Record<string, unknown> = {}): CentralizedMAGRPOConfig {
  return parseConfig('CentralizedMAGRPO', schema, input, Object.keys(schema.shape));
}
