/**
 * MAGRPO configuration: every field of CoMLRL 1.3.6's `MAGRPOConfig`, under the same snake_case
 * names and defaults (so a CoMLRL YAML section or `MAGRPOConfig(...)` call maps over 1:1), with the
 * same constraints, plus comlrl's additions (seed, gradient clipping, AdamW settings, greedy eval,
 * scoring chunk size, early termination at evaluation) and the HF Trainer's learning-rate schedule
 * (`lr_scheduler_type`, `warmup_steps`, `warmup_ratio`).
 *
 * Deliberate differences (docs/differences.md):
 * - evaluation ends an episode early as training does (`eval_early_termination`; CoMLRL's
 *   MAGRPO evaluation plays every turn).
 * - `joint_mode` accepts only 'aligned' and 'cross'. CoMLRL also accepts 'align'/'crossed' in one
 *   place but not another, and 'crossed' mis-pairs advantages with completions.
 * - AdamW weight decay / betas / eps are configurable; the defaults are torch's (CoMLRL's implicit ones).
 */
import { z } from 'zod';
import { ADVANTAGE_MODES } from './advantage.js';
import { boolField, enumField, finiteNumber, intAtLeast, lrScheduleFields, parseConfig, runSettingsFields } from '../core/config.js';
import { parallelTrainingFields } from '../core/devices.js';
import { referenceKlFields } from '../core/reference-kl.js';

/** How the agents' K samples form joint actions at a tree node. */
export const JOINT_MODES = ['aligned', 'cross'] as const;
/** See {@link JOINT_MODES}. */
export type JointMode = (typeof JOINT_MODES)[number];

const schema = z.strictObject({
  // ---- CoMLRL MAGRPOConfig fields (1.3.6 defaults) ----
  /** Passes over the training tasks. */
  num_train_epochs: intAtLeast('num_train_epochs', 1).default(20),
  /** AdamW learning rate of every agent. */
  agent_learning_rate: finiteNumber('agent_learning_rate', { min: 0 }).default(5e-6),
  /** Train metrics are logged when env_step has advanced by at least this much since the last log. */
  logging_steps: intAtLeast('logging_steps', 1).default(50),
  /** Number of agents; must equal the number of agents passed (defaults to it). */
  num_agents: intAtLeast('num_agents', 1).optional(),
  /** K: completions sampled per agent at every tree node (a group needs at least 2). */
  num_generations: intAtLeast('num_generations', 2).default(4),
  /** Generation length cap per completion. */
  max_new_tokens: intAtLeast('max_new_tokens', 1).default(256),
  /** Sampling temperature (> 0). */
  temperature: finiteNumber('temperature', { min: 0, exclusiveMin: true }).default(0.6),
  /** Nucleus mass in (0, 1]; 1 turns it off. */
  top_p: finiteNumber('top_p', { min: 0, max: 1, exclusiveMin: true }).default(0.6),
  /**
   * Top-k filter (CoMLRL's default 50). 0 turns it off; null leaves it to each agent's checkpoint,
   * as CoMLRL's None does: its generation_config.json `top_k`, else transformers' 50.
   */
  top_k: intAtLeast('top_k', 0).nullable().default(50),
  /** H: depth of the rollout tree (turns). Must not exceed the environment's horizon. */
  num_turns: intAtLeast('num_turns', 1).default(2),
  /**
   * γ in return = r + γ·mean(child returns). CoMLRL's newest MAGRPO keeps the field (default 1.0)
   * but its returns are undiscounted whatever it is set to; comlrl applies it, so 1.0 (the
   * default) is CoMLRL's behaviour.
   */
  discount: finiteNumber('discount', { min: 0, max: 1 }).default(1.0),
  /** 'aligned': K joint actions (k-th samples together); 'cross': all K^n combinations. */
  joint_mode: enumField('joint_mode', JOINT_MODES, "CoMLRL's aliases 'align'/'crossed' are not accepted").default('aligned'),
  /** A node whose mean reward is strictly greater than this gets no children; null disables. */
  early_termination_threshold: finiteNumber('early_termination_threshold').nullable().default(-0.2),
  /**
   * comlrl: whether an evaluation episode ends after a turn whose reward is strictly greater than
   * `early_termination_threshold`, as training ends a branch and as the actor-critic trainers'
   * evaluation ends an episode. Absent or true: it does; false: every turn is played (CoMLRL
   * 1.3.6's MAGRPO evaluation). No default is filled in, so a config that leaves it out parses
   * (and hashes, for checkpoint identity) as one without the key.
   */
  eval_early_termination: boolField('eval_early_termination').optional(),
  /**
   * CoMLRL: use the external transition's prompts verbatim instead of re-formatting them. In comlrl
   * prompts come from `env.observe`, so this only has an effect through the CoMLRL adapter's own
   * option of the same name; it is accepted here so CoMLRL configs load unchanged.
   */
  external_prompt_passthrough: boolField('external_prompt_passthrough').default(false),
  /** Evaluate every this many training items (0 disables). */
  eval_interval: intAtLeast('eval_interval', 0).default(16),
  /** Eval tasks per evaluation (the first ones of the eval set). */
  eval_num_samples: intAtLeast('eval_num_samples', 0).default(4),
  /** Eval tasks whose prompts are generated together in one batch. */
  eval_batch_size: intAtLeast('eval_batch_size', 1).default(1),
  /** Node samples per agent buffered before an update. */
  rollout_buffer_size: intAtLeast('rollout_buffer_size', 1).default(2),
  /** Node samples per minibatch (one optimizer step each); null → rollout_buffer_size. */
  train_batch_size: intAtLeast('train_batch_size', 1).nullable().default(null),
  /** z-score the advantages within each group (population std, floor 1e-6). */
  advantage_normalization: boolField('advantage_normalization').default(true),
  /** mean: R − mean; raw: R; max: R − max; rloo: leave-one-out baseline. */
  advantage_mode: enumField('advantage_mode', ADVANTAGE_MODES).default('mean'),
  /**
   * comlrl: true (default) scores exactly each completion's generated tokens, its end token
   * included and never padding. false: CoMLRL's scoring — a node's K completions padded to the
   * longest with the pad token (as Hugging Face `generate` returns them) and every position but the
   * last scored, so a finished completion's end token and all but one of its pads count and a
   * completion cut at `max_new_tokens` loses its last token.
   */
  score_last_token: boolField('score_last_token').optional(),

  // ---- CoMLRL 1.3.8 reference KL (plus comlrl's kl_mode) ----
  ...referenceKlFields(),

  // ---- CoMLRL's parallelism and device keys (only the run's one device is accepted today) ----
  ...parallelTrainingFields(),

  // ---- the Hugging Face Trainer's learning-rate schedule ----
  ...lrScheduleFields(),

  // ---- comlrl additions ----
  ...runSettingsFields(),
});

/** The early-termination threshold of MAGRPO's evaluation episodes (null: every turn is played); see `eval_early_termination`. */
export function magrpoEvalEarlyTermination(config: Pick<MAGRPOConfig, 'early_termination_threshold' | 'eval_early_termination'>): number | null {
  return config.eval_early_termination === false ? null : config.early_termination_threshold;
}

/** MAGRPO config as written by users (every field optional; snake_case as in CoMLRL). */
export type MAGRPOConfigInput = z.input<typeof schema>;
/** MAGRPO config after validation and defaults. */
export type MAGRPOConfig = z.output<typeof schema>;

/** Every accepted field name. */
export const MAGRPO_CONFIG_FIELDS: readonly string[] = Object.keys(schema.shape);

/** The zod schema (exposed for CLI/config tooling, e.g. JSON-schema export). */
export const magrpoConfigSchema = schema;

/**
 * Validates a MAGRPO config and fills defaults. Throws a TrainerConfigError listing every bad field
 * by name with the allowed values and the value given.
 */
export function parseMAGRPOConfig(input: MAGRPOConfigInput | Record<string, unknown> = {}): MAGRPOConfig {
  return parseConfig('MAGRPO', schema, input, MAGRPO_CONFIG_FIELDS);
}
