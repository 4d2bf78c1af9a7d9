/**
 * MARLHF's config (CoMLRL 1.4's `MARLHFConfig`, which extends `MADPOConfig`, which extends
 * `MAGRPOConfig`): MAGRPO's fields under the same names for phase 2; MADPO's preference fields for
 * how phase 1 builds its preference pairs from the task's reward; the `reward_*` fields for the
 * joint reward model and its fit. Every CoMLRL field is accepted under its name, so a CoMLRL YAML
 * section maps over 1:1; those MARLHF does not use (MADPO's `dpo_beta`, `use_environment_step`,
 * `environment_steps_per_pair`) are validated as CoMLRL validates them and otherwise ignored.
 *
 * As CoMLRL: one turn, aligned joint actions, and `rl_algorithm` from CoMLRL's newest list: the
 * MAGRPO family (magrpo, mareinforce, maremax, marloo) trains phase 2 with MAGRPO's update;
 * `maac` and `iac` with CoLLM-CC's and CoLLM-DC's actor-critic update and the critic fields
 * ({@link marlhfActorCriticConfig}).
 */
import { z } from 'zod';
import type { AdvantageMode } from '../magrpo/advantage.js';
import { magrpoConfigSchema } from '../magrpo/config.js';
import {
  COLLM_CC_CONFIG_FIELDS,
  COLLM_DC_CONFIG_FIELDS,
  collmCCConfigSchema,
  collmDCConfigSchema,
  type CoLLMCCConfig,
  type CoLLMCCConfigInput,
  type CoLLMDCConfig,
} from '../collm/config.js';
import { boolField, enumField, finiteNumber, intAtLeast, parseConfig, TrainerConfigError } from '../core/config.js';
import { pairSelectionIssue, PAIR_SELECTIONS } from '../madpo/config.js';

/**
 * How a joint text longer than `reward_max_length` is cut: 'prompts' cuts the agents' prompts from
 * the left and keeps the joint action whole, so joint responses to one prompt stay told apart (the
 * score is read at the last token); 'right' keeps the first tokens (CoMLRL's cut, transformers'
 * default), which drops the completions first and can leave a winner and its loser the same tokens.
 */
export const REWARD_TRUNCATIONS = ['prompts', 'right'] as const;
/** See {@link REWARD_TRUNCATIONS}. */
export type RewardTruncation = (typeof REWARD_TRUNCATIONS)[number];

/**
 * Phase 2's algorithm (CoMLRL's newest `rl_algorithm`): the MAGRPO family trains with MAGRPO's
 * update and the algorithm's `advantage_mode`; `maac` with CoLLM-CC's update (one centralized
 * critic), `iac` with CoLLM-DC's (a critic per agent, or a value head on each actor).
 */
export const MARLHF_RL_ALGORITHMS = ['magrpo', 'mareinforce', 'maremax', 'marloo', 'maac', 'iac'] as const;
/** See {@link MARLHF_RL_ALGORITHMS}. */
export type MARLHFRLAlgorithm = (typeof MARLHF_RL_ALGORITHMS)[number];

/** The actor-critic phase-2 algorithms. */
export const MARLHF_ACTOR_CRITIC_ALGORITHMS = ['maac', 'iac'] as const;
/** See {@link MARLHF_ACTOR_CRITIC_ALGORITHMS}. */
export type MARLHFActorCriticAlgorithm = (typeof MARLHF_ACTOR_CRITIC_ALGORITHMS)[number];

/** Whether `rl_algorithm` trains phase 2 with an actor-critic update (maac, iac). */
export function isActorCriticAlgorithm(algorithm: MARLHFRLAlgorithm): algorithm is MARLHFActorCriticAlgorithm {
  return (MARLHF_ACTOR_CRITIC_ALGORITHMS as readonly string[]).includes(algorithm);
}

/** The advantage mode each MAGRPO-family algorithm trains phase 2 with (CoMLRL sets it from `rl_algorithm`). */
export const MARLHF_ADVANTAGE_MODES: Readonly<Partial<Record<MARLHFRLAlgorithm, AdvantageMode>>> = { magrpo: 'mean', mareinforce: 'raw', maremax: 'max', marloo: 'rloo' };

/** CoMLRL's spellings of `rl_algorithm` it maps to another (its `mareforce`), and its case-insensitive, trimmed reading. */
function normalizeAlgorithm(v: unknown): unknown {
  if (typeof v !== 'string') return v;
  const name = v.trim().toLowerCase();
  return name === 'mareforce' ? 'mareinforce' : name;
}

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
  /** Phase 2's algorithm (see {@link MARLHF_RL_ALGORITHMS}). */
  rl_algorithm: z.preprocess(normalizeAlgorithm, enumField('rl_algorithm', MARLHF_RL_ALGORITHMS)).default('magrpo'),
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
  /** Token cap of the reward model's input (cut as `reward_truncation` says); null: no cap. */
  reward_max_length: intAtLeast('reward_max_length', 1).nullable().default(null),
  /**
   * How `reward_max_length` cuts a longer joint text: 'prompts' (comlrl) cuts the agents' prompts
   * from the left and keeps the completions, 'right' (CoMLRL) keeps the first tokens. A pair the
   * cut leaves with winner and loser the same tokens is refused either way.
   */
  reward_truncation: enumField('reward_truncation', REWARD_TRUNCATIONS).default('prompts'),
  /** Train only the scalar head (the LM body stays as loaded). */
  reward_freeze_backbone: boolField('reward_freeze_backbone').default(false),

  // ---- CoMLRL's newest MARLHFConfig: the actor-critic phase 2's fields (maac / iac) ----
  /**
   * The critics' LM: a local Hugging Face directory (CLI). Null: `model.critic_model`, else each
   * agent's own model (CoMLRL's default critic).
   */
  critic_model_name: z.string({ error: 'critic_model_name must be a directory path or null' }).min(1, { error: 'critic_model_name must not be empty' }).nullable().default(null),
  /** The critics' learning rate (null: agent_learning_rate). */
  critic_learning_rate: finiteNumber('critic_learning_rate', { min: 0, exclusiveMin: true }).nullable().default(null),
  /** Separate critic LMs per agent (iac). */
  use_separate_critic: boolField('use_separate_critic').default(true),
  /** V(h) or Q(h, a). */
  critic_type: z.preprocess((v) => (typeof v === 'string' ? v.trim().toLowerCase() : v), enumField('critic_type', ['v', 'q'] as const)).default('v'),
  /** Weight of the value loss. */
  value_loss_coef: finiteNumber('value_loss_coef', { min: 0, exclusiveMin: true }).default(0.6),
  /** Value clipping range (iac); null: none. */
  value_clip_range: finiteNumber('value_clip_range', { min: 0, exclusiveMin: true }).nullable().default(0.2),
  /** Hidden width of a separate critic's value head (iac); null: a linear head. */
  critic_value_head_hidden_dim: intAtLeast('critic_value_head_hidden_dim', 1).nullable().default(null),
  /** Hidden width of a shared value head (iac without separate critics); null: a linear head. */
  value_head_hidden_dim: intAtLeast('value_head_hidden_dim', 1).nullable().default(null),

  // ---- comlrl ----
  /**
   * maac / iac only: comlrl's CoLLM options that CoMLRL's MARLHFConfig has no field for, under
   * their `collm_cc:` / `collm_dc:` names (e.g. CoMLRL's update: `update_order: agent`,
   * `use_importance_ratio: false`, `ratio_clip_range: null`, `use_global_info: false`,
   * `critic_history: current`, `recompute_targets: false`, `q_advantage: td`,
   * `value_clip_separate: false`); left out, CoLLM's defaults. Checked when the config is parsed.
   */
  actor_critic: z.record(z.string(), z.unknown(), { error: 'actor_critic must be a mapping of CoLLM option names to values' }).optional(),
}).superRefine((cfg, ctx) => {
  const pairs = pairSelectionIssue(cfg);
  if (pairs !== null) ctx.addIssue({ code: 'custom', path: ['preference_pairs_per_sample'], message: pairs });
  if (cfg.actor_critic !== undefined && !isActorCriticAlgorithm(cfg.rl_algorithm)) {
    ctx.addIssue({ code: 'custom', path: ['actor_critic'], input: cfg.actor_critic, message: `actor_critic would be ignored: rl_algorithm '${cfg.rl_algorithm}' trains phase 2 with MAGRPO's update; remove it, or set rl_algorithm: maac or iac` });
  }
  if (isActorCriticAlgorithm(cfg.rl_algorithm)) {
    // Phase 2's CoLLM config is checked now, so that a bad `actor_critic` fails before any model loads.
    try {
      marlhfActorCriticConfig(cfg);
    } catch (err) {
      const issues = err instanceof TrainerConfigError ? err.issues.map((i) => ({ path: ['actor_critic', ...i.field.split('.')], message: i.message })) : [{ path: ['actor_critic'], message: (err as Error).message }];
      for (const i of issues) ctx.addIssue({ code: 'custom', input: cfg.actor_critic, ...i });
    }
  }
  const criticLMs = cfg.rl_algorithm === 'maac' || (cfg.rl_algorithm === 'iac' && cfg.use_separate_critic);
  if (cfg.critic_model_name !== null && !criticLMs) {
    const why = cfg.rl_algorithm === 'iac' ? 'iac with use_separate_critic false puts a value head on each actor' : `rl_algorithm '${cfg.rl_algorithm}' trains phase 2 with MAGRPO's update, which has no critic`;
    ctx.addIssue({ code: 'custom', path: ['critic_model_name'], input: cfg.critic_model_name, message: `critic_model_name would be ignored: ${why}; remove it, or set rl_algorithm: maac (or iac with use_separate_critic: true)` });
  }
  const mode = MARLHF_ADVANTAGE_MODES[cfg.rl_algorithm];
  if (mode !== undefined && cfg.advantage_mode !== 'mean' && cfg.advantage_mode !== mode) {
    ctx.addIssue({
      code: 'custom',
      path: ['advantage_mode'],
      message: `advantage_mode '${cfg.advantage_mode}' contradicts rl_algorithm '${cfg.rl_algorithm}', which trains phase 2 with advantage_mode '${mode}' (as CoMLRL sets it): leave advantage_mode out, or choose the rl_algorithm of that mode`,
    });
  }
});

/** The advantage mode phase 2 trains with: the one its `rl_algorithm` sets (CoMLRL's dispatch). */
export function marlhfAdvantageMode(config: Pick<MARLHFConfig, 'rl_algorithm' | 'advantage_mode'>): AdvantageMode {
  return MARLHF_ADVANTAGE_MODES[config.rl_algorithm] ?? config.advantage_mode;
}

/** comlrl's actor-critic options that CoMLRL's MARLHFConfig has no field for (CoLLM's defaults when left out). */
export type MARLHFActorCriticExtras = Omit<CoLLMCCConfigInput, keyof MARLHFConfigInput>;

/** Phase 2's validated actor-critic config: CoLLM-CC's for maac, CoLLM-DC's for iac. */
export type MARLHFActorCriticConfig = CoLLMCCConfig | CoLLMDCConfig;

/**
 * Phase 2's CoLLM config of a maac / iac MARLHF config: its fields that CoLLM-CC (maac) or
 * CoLLM-DC (iac) has, with its `actor_critic` and then `extras` over them (see the module comment).
 * @throws Error naming a key of `actor_critic` / `extras` that the MARLHF config has itself;
 *   TrainerConfigError naming the field when the result is not a valid CoLLM config.
 */
export function marlhfActorCriticConfig(config: MARLHFConfig, extras: MARLHFActorCriticExtras = {}): MARLHFActorCriticConfig {
  if (!isActorCriticAlgorithm(config.rl_algorithm)) throw new Error(`marlhfActorCriticConfig: rl_algorithm '${config.rl_algorithm}' trains phase 2 with MAGRPO's update, not an actor-critic one`);
  const options: Record<string, unknown> = { ...config.actor_critic, ...extras };
  const own = Object.keys(options).filter((k) => k in schema.shape);
  if (own.length > 0) throw new Error(`marlhf.actor_critic: ${own.join(', ')} ${own.length === 1 ? 'is a MARLHF key' : 'are MARLHF keys'}: set ${own.length === 1 ? 'it' : 'them'} in the marlhf section itself`);
  const fields = config.rl_algorithm === 'maac' ? COLLM_CC_CONFIG_FIELDS : COLLM_DC_CONFIG_FIELDS;
  // `parallel_training` is the MARLHF section's own: refused there by name (src/config/devices.ts), not again as phase 2's.
  const shared = Object.fromEntries(Object.entries(config).filter(([k]) => fields.includes(k) && k !== 'parallel_training'));
  const label = `marlhf (${config.rl_algorithm}) actor_critic`;
  const input = { ...shared, ...options };
  return config.rl_algorithm === 'maac' ? parseConfig(label, collmCCConfigSchema, input, COLLM_CC_CONFIG_FIELDS) : parseConfig(label, collmDCConfigSchema, input, COLLM_DC_CONFIG_FIELDS);
}

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
