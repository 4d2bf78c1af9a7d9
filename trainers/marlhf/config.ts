/**
 * MARLHF's config (CoMLRL 1.4's `MARLHFConfig`, which extends `MADPOConfig`, which extends
 * `MAGRPOConfig`): MAGRPO's fields under the same names for phase 2; MADPO's preference fields for
 * how phase 1 builds its preference pairs from the task's reward; the `reward_*` fields for the
 * joint reward model and its fit. Every CoMLRL field is accepted under its name, so a CoMLRL YAML
 * section maps over 1:1; those MARLHF does not use (MADPO's `dpo_beta`, `use_environment_step`,
 * `environment_steps_per_pair`) are validated as CoMLRL validates them and otherwise ignored.
 *
 * As CoMLRL: one turn, aligned joint actions, `rl_algorithm: magrpo` (CoMLRL's config also names
 * the other algorithms but its trainer refuses them; here the config does).
 */
import { z } from 'zod';
import { magrpoConfigSchema } from '../magrpo/config.js';
import { boolField, enumField, finiteNumber, intAtLeast, parseConfig } from '../core/config.js';
import { PAIR_SELECTIONS } from '../madpo/config.js';

/** The policy algorithm of phase 2 (CoMLRL's `rl_algorithm`; its trainer runs MAGRPO only). */
export const MARLHF_RL_ALGORITHMS = ['magrpo'] as const;

const schema = magrpoConfigSchema.safeExtend({
  /** Turns: 1 (CoMLRL's MARLHF is single-turn). */
  num_turns: z.literal(1, { error: 'num_turns must be 1: MARLHF is single-turn (as in CoMLRL)' }).default(1),
  /** Aligned only: the reward model scores the k-th completions of the agents together (as in CoMLRL). */
  joint_mode: enumField('joint_mode', ['aligned'], "MARLHF's reward model scores aligned joint actions only, as in CoMLRL").default('aligned'),

  // ---- CoMLRL MADPOConfig's preference fields ----
  /** Candidates each agent samples per training task in phase 1; the k-th of each agent form joint candidate k. */
  preference_num_candidates: intAtLeast('preference_num_candidates', 2).default(80),
  /** Pairs kept per task (null: every non-tied pair). */
  preference_pairs_per_sample: intAtLeast('preference_pairs_per_sample', 1).nullable().default(16),
  /** reward_gap: largest reward gaps first; all: in candidate order; random: shuffled (seeded). */
  pair_selection: enumField('pair_selection', PAIR_SELECTIONS).default('reward_gap'),
  /** MADPO's β; accepted for CoMLRL configs, unused by MARLHF. */
  dpo_beta: finiteNumber('dpo_beta', { min: 0, exclusiveMin: true }).default(0.1),
  /** MADPO's env-step counting switch; accepted, unused by MARLHF. */
  use_environment_step: boolField('use_environment_step').default(true),
  /** MADPO's env steps per pair; accepted, unused by MARLHF. */
  environment_steps_per_pair: intAtLeast('environment_steps_per_pair', 1).default(2),

  // ---- CoMLRL MARLHFConfig ----
  /** Phase 2's algorithm: 'magrpo' (the only one CoMLRL's MARLHF trains with). */
  rl_algorithm: enumField('rl_algorithm', MARLHF_RL_ALGORITHMS, "CoMLRL's config names mareinforce, maremax, marloo, maac and iac too, but its trainer refuses them").default('magrpo'),
  /**
   * The reward model's base LM: a local Hugging Face directory (CLI; CoMLRL: a hub id). Null: the
   * CLI's critic model (`model.critic_model`, else agent 0's model, as CoMLRL's fallback to the agent model).
   */
  reward_model_name: z.string({ error: 'reward_model_name must be a directory path or null' }).min(1, { error: 'reward_model_name must not be empty' }).nullable().default(null),
  /** AdamW learning rate of the reward model's fit. */
  reward_learning_rate: finiteNumber('reward_learning_rate', { min: 0, exclusiveMin: true }).default(1e-5),
  /** Passes over the preference pairs in phase 1. */
  reward_num_train_epochs: intAtLeast('reward_num_train_epochs', 1).default(1),
  /** Pairs per reward-model optimizer step. */
  reward_train_batch_size: intAtLeast('reward_train_batch_size', 1).default(2),
  /** Token cap of the reward model's input (right-truncated); null: no cap. */
  reward_max_length: intAtLeast('reward_max_length', 1).nullable().default(null),
  /** Train only the scalar head (the LM body stays as loaded). */
  reward_freeze_backbone: boolField('reward_freeze_backbone').default(false),
});

/** MARLHF config as written by users (snake_case, every field optional). */
export type MARLHFConfigInput = z.input<typeof schema>;
/** MARLHF config after validation and defaults. */
export type MARLHFConfig = z.output<typeof schema>;

/** The zod schema (for the trainer registry and config tooling). */
export const marlhfConfigSchema = schema;

/** Validates a MARLHF config and fills defaults (errors list every bad field). */
export function parseMARLHFConfig(input: MARLHFConfigInput | Record<string, unknown> = {}): MARLHFConfig {
  return parseConfig('MARLHF', schema, input, Object.keys(schema.shape));
}
