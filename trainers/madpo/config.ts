/**
 * MADPO's config (CoMLRL 1.4's `MADPOConfig`): MAGRPO's fields under the same names, plus the
 * preference fields under CoMLRL's names and defaults — `preference_num_candidates`,
 * `preference_pairs_per_sample` (16), `pair_selection` ('reward_gap'), `dpo_beta` (0.1),
 * `use_environment_step` (true), `environment_steps_per_pair` (2) — and CoMLRL's constraints:
 * one turn, aligned joint candidates.
 *
 * comlrl differences (README "MADPO"):
 * - `preference_num_candidates` defaults to null: K is then `num_generations` (CoMLRL's default
 *   is 80 candidates per agent and prompt);
 * - `use_environment_step: false` counts the K joint candidates scored per item as env steps, as
 *   the other trainers do (CoMLRL then leaves env_step where it is);
 * - the reference-KL penalty is refused: the DPO loss already measures each policy against its
 *   reference, through `dpo_beta`;
 * - `score_last_token: true` scores every completion token (CoMLRL, `false`, leaves the last out).
 *
 * As CoMLRL, `pair_selection: all` with a `preference_pairs_per_sample` cap is refused.
 */
import { z } from 'zod';
import { magrpoConfigSchema } from '../magrpo/config.js';
import { boolField, enumField, finiteNumber, intAtLeast, parseConfig } from '../core/config.js';

/** How the winner/loser pairs of a prompt's joint candidates are chosen (see `selectPreferencePairs`). */
export const PAIR_SELECTIONS = ['reward_gap', 'all', 'random'] as const;
/** See {@link PAIR_SELECTIONS}. */
export type PairSelection = (typeof PAIR_SELECTIONS)[number];

/**
 * CoMLRL's rule: `pair_selection: all` keeps every non-tied pair, so a cap on them
 * (`preference_pairs_per_sample`, 16 by default) contradicts it and is refused.
 */
export function pairSelectionIssue(cfg: { readonly pair_selection: PairSelection; readonly preference_pairs_per_sample: number | null }): string | null {
  if (cfg.pair_selection !== 'all' || cfg.preference_pairs_per_sample === null) return null;
  return `preference_pairs_per_sample must be null when pair_selection is 'all' (every non-tied pair is kept, as in CoMLRL); it is ${cfg.preference_pairs_per_sample} (its default is 16): set preference_pairs_per_sample: null, or pair_selection: reward_gap or random to keep at most ${cfg.preference_pairs_per_sample}`;
}

// safeExtend: MAGRPO's schema has refinements (its learning-rate schedule check), which it keeps.
const schema = magrpoConfigSchema
  .safeExtend({
    /** Turns: 1 (CoMLRL's MADPO is single-turn). */
    num_turns: z.literal(1, { error: 'num_turns must be 1: MADPO is single-turn (as in CoMLRL)' }).default(1),
    /** Joint candidates are index-aligned: candidate k of every agent together (as CoMLRL). */
    joint_mode: enumField('joint_mode', ['aligned'] as const, 'MADPO forms index-aligned joint candidates, as CoMLRL').default('aligned'),
    /** K: candidates sampled per agent and prompt; null: `num_generations`. */
    preference_num_candidates: intAtLeast('preference_num_candidates', 2).nullable().default(null),
    /** At most this many (winner, loser) pairs per prompt; null: every pair with a reward gap. */
    preference_pairs_per_sample: intAtLeast('preference_pairs_per_sample', 1).nullable().default(16),
    /** 'reward_gap': largest reward gaps first; 'all': in candidate order; 'random': a seeded shuffle. */
    pair_selection: enumField('pair_selection', PAIR_SELECTIONS).default('reward_gap'),
    /** β of the DPO loss −log σ(β · joint log-ratio margin). */
    dpo_beta: finiteNumber('dpo_beta', { min: 0, exclusiveMin: true }).default(0.1),
    /** true: env_step advances `environment_steps_per_pair` per pair trained on (CoMLRL); false: by the joint candidates scored. */
    use_environment_step: boolField('use_environment_step').default(true),
    /** env steps one trained pair counts for (with `use_environment_step`). */
    environment_steps_per_pair: intAtLeast('environment_steps_per_pair', 1).default(2),
    /**
     * true (comlrl): every completion token enters the log-probs; false (CoMLRL): a completion is
     * cut at its first pad token and its last remaining token is not scored.
     */
    score_last_token: boolField('score_last_token').default(true),
  })
  .superRefine((cfg, ctx) => {
    const pairs = pairSelectionIssue(cfg);
    if (pairs !== null) ctx.addIssue({ code: 'custom', path: ['preference_pairs_per_sample'], message: pairs });
    if (cfg.reference_kl_enabled) {
      ctx.addIssue({
        code: 'custom',
        path: ['reference_kl_enabled'],
        message: 'reference_kl_enabled must be false for MADPO: its DPO loss already measures each agent against its frozen reference (tune dpo_beta instead)',
      });
    }
  });

/** MADPO config as written by users (snake_case, every field optional). */
export type MADPOConfigInput = z.input<typeof schema>;
/** MADPO config after validation and defaults. */
export type MADPOConfig = z.output<typeof schema>;

/** Every accepted MADPO field name. */
export const MADPO_CONFIG_FIELDS: readonly string[] = Object.keys(schema.shape);

/** The zod schema (for the trainer registry and config tooling). */
export const madpoConfigSchema = schema;

/** K of a parsed config: `preference_num_candidates`, else `num_generations`. */
export function madpoCandidates(config: Pick<MADPOConfig, 'preference_num_candidates' | 'num_generations'>): number {
  return config.preference_num_candidates ?? config.num_generations;
}

/** Validates a MADPO config and fills defaults (errors list every bad field). */
export function parseMADPOConfig(input: MADPOConfigInput | Record<string, unknown> = {}): MADPOConfig {
  return parseConfig('MADPO', schema, input, MADPO_CONFIG_FIELDS);
}
