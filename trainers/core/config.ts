/**
 * zod helpers shared by the trainer configs. Every field schema carries a message that names the
 * field and the allowed values, so a bad YAML value is fixed from the error alone.
 *
 * Field names are CoMLRL's snake_case names, so a CoMLRL `MAGRPOConfig(...)` / YAML section maps
 * onto a comlrl config 1:1; comlrl's own additions use snake_case too.
 */
import { z } from 'zod';
import { parallelModeIssues } from '../../src/config/devices.js';
import { parseTrainerSection, wasParsedBy, type TrainerSectionFields } from '../../src/config/trainers.js';
import { LR_SCHEDULER_TYPES, type LrSchedulerType } from '../../src/optim/schedule.js';

/** An integer field with a lower bound, e.g. `intAtLeast('num_generations', 2)`. */
export function intAtLeast(field: string, min: number) {
  const message = `${field} must be an integer >= ${min}`;
  return z.number({ error: message }).int({ error: message }).min(min, { error: message });
}

/** A finite number field, optionally bounded (inclusive unless `exclusiveMin`). */
export function finiteNumber(
  field: string,
  bounds: { min?: number; max?: number; exclusiveMin?: boolean } = {},
) {
  const { min, max, exclusiveMin = false } = bounds;
  const range =
    min !== undefined && max !== undefined
      ? ` in ${exclusiveMin ? '(' : '['}${min}, ${max}]`
      : min !== undefined
        ? ` ${exclusiveMin ? '>' : '>='} ${min}`
        : max !== undefined
          ? ` <= ${max}`
          : '';
  const message = `${field} must be a finite number${range}`;
  return z.number({ error: message }).refine(
    (v) =>
      Number.isFinite(v) &&
      (min === undefined || (exclusiveMin ? v > min : v >= min)) &&
      (max === undefined || v <= max),
    { error: message },
  );
}

/** An Adam β: a number in [0, 1). */
export function betaField(field: string) {
  const message = `${field} must be a number in [0, 1)`;
  return z.number({ error: message }).refine((v) => v >= 0 && v < 1, { error: message });
}

/** A boolean field. */
export function boolField(field: string) {
  return z.boolean({ error: `${field} must be true or false` });
}

/** A field that takes one of a fixed set of strings. `hint` is appended (e.g. why an alias is refused). */
export function enumField<const V extends readonly [string, ...string[]]>(field: string, values: V, hint = '') {
  const message = `${field} must be one of ${values.map((v) => `'${v}'`).join(', ')}${hint ? ` (${hint})` : ''}`;
  return z.enum(values, { error: message });
}

/**
 * comlrl's run settings, the same in every trainer config (CoMLRL has none of them): seed, gradient
 * clipping, AdamW settings with torch's defaults, greedy eval, scoring chunk size. Spread into a
 * schema's fields.
 */
export function runSettingsFields() {
  return {
    /** Seed of every random stream (sampling, minibatch order, eval sampling; actor-critic: head init). */
    seed: intAtLeast('seed', 0).default(0),
    /** Clip each model's global gradient norm to this before its AdamW step; null: no clipping (CoMLRL). */
    max_grad_norm: finiteNumber('max_grad_norm', { min: 0, exclusiveMin: true }).nullable().default(null),
    /** AdamW decoupled weight decay (torch default), for every model trained. */
    weight_decay: finiteNumber('weight_decay', { min: 0 }).default(0.01),
    /** AdamW β1, β2 (torch defaults). */
    adam_betas: z
      .tuple([betaField('adam_betas[0]'), betaField('adam_betas[1]')], {
        error: 'adam_betas must be a pair [beta1, beta2] of numbers in [0, 1)',
      })
      .default([0.9, 0.999]),
    /** AdamW ε (torch default). */
    adam_eps: finiteNumber('adam_eps', { min: 0, exclusiveMin: true }).default(1e-8),
    /** Argmax decoding at evaluation (CoMLRL samples with the training settings). */
    eval_greedy: boolField('eval_greedy').default(false),
    /**
     * Completions per scoring forward/backward pass; gradients of the chunks are summed before the
     * single optimizer step, so this bounds memory without changing the update. null: the whole minibatch.
     */
    scoring_batch_size: intAtLeast('scoring_batch_size', 1).nullable().default(null),
    /**
     * LoRA agents on one shared base generate, score and train in joint passes over all their rows
     * (the base's products once per step, each row's delta from its own adapter); false: one pass
     * per agent. Absent means true; the sampled tokens and updates are the same either way (docs/joint-passes.md).
     */
    joint_passes: boolField('joint_passes').optional(),
  };
}

/**
 * The agents' learning-rate schedule, under the Hugging Face Trainer's names (docs/lr-schedules.md;
 * formulas in src/optim/schedule.ts). A step of the schedule is one training item.
 * Spread into a schema's fields; a warmup a `constant` schedule would ignore is refused when the
 * section is parsed (`lrScheduleIssues`, src/optim/schedule.ts).
 */
export function lrScheduleFields() {
  return {
    /** constant (CoMLRL: no schedule), constant_with_warmup, linear or cosine decay to 0. */
    lr_scheduler_type: enumField('lr_scheduler_type', LR_SCHEDULER_TYPES).default('constant'),
    /** Training items of linear warmup from 0; > 0 wins over `warmup_ratio` (HF's rule). */
    warmup_steps: intAtLeast('warmup_steps', 0).default(0),
    /** Warmup as a fraction of the run's training items (rounded up), used when `warmup_steps` is 0. */
    warmup_ratio: finiteNumber('warmup_ratio', { min: 0, max: 1 }).default(0),
  };
}

/**
 * The critics' own learning-rate schedule (actor-critic trainers with critics that have their own
 * optimizer); null: the agents' setting. Not `critic_warmup_items`, which freezes the actors.
 */
export function criticLrScheduleFields() {
  return {
    /** The critics' `lr_scheduler_type`; null: `lr_scheduler_type`. */
    critic_lr_scheduler_type: enumField('critic_lr_scheduler_type', LR_SCHEDULER_TYPES).nullable().default(null),
    /** The critics' `warmup_steps`; null: `warmup_steps`. */
    critic_lr_warmup_steps: intAtLeast('critic_lr_warmup_steps', 0).nullable().default(null),
    /** The critics' `warmup_ratio`; null: `warmup_ratio`. */
    critic_lr_warmup_ratio: finiteNumber('critic_lr_warmup_ratio', { min: 0, max: 1 }).nullable().default(null),
  };
}

/** The schedule fields a config has once parsed (the critic ones only in actor-critic configs). */
export interface LrScheduleSettings {
  readonly lr_scheduler_type: LrSchedulerType;
  readonly warmup_steps: number;
  readonly warmup_ratio: number;
  readonly critic_lr_scheduler_type?: LrSchedulerType | null;
  readonly critic_lr_warmup_steps?: number | null;
  readonly critic_lr_warmup_ratio?: number | null;
}

/** One problem found in a config: the field's dotted path and what is wrong. */
export interface ConfigIssue {
  readonly field: string;
  readonly message: string;
}

/** Thrown when a trainer config does not validate; the message lists every issue. */
export class TrainerConfigError extends Error {
  readonly issues: readonly ConfigIssue[];
  constructor(label: string, issues: readonly ConfigIssue[]) {
    super(`invalid ${label} config: ${issues.map((i) => i.message).join('; ')}`);
    this.name = 'TrainerConfigError';
    this.issues = issues;
  }
}

function snakeCase(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

function show(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/**
 * Parses `input` with a strict object schema; on failure throws {@link TrainerConfigError} whose
 * message names each bad field with the value given. Unknown keys are errors (a typo must not
 * silently fall back to a default); a camelCase key whose snake_case form is a field gets a hint.
 */
export function parseConfig<Schema extends z.ZodType>(
  label: string,
  schema: Schema,
  input: unknown,
  knownFields: readonly string[],
): z.output<Schema> {
  // A section the run config already parsed with this schema is taken as it is (parsed once).
  if (wasParsedBy(schema, input)) return input;
  const parsed = parseTrainerSection(schema, input ?? {});
  if (parsed.success) {
    // A run config reports these with the rest of the config (parseRunConfig); a config built in code, here.
    const mp = parallelModeIssues(parsed.data as TrainerSectionFields, false);
    if (mp.length > 0) throw new TrainerConfigError(label, mp.map((i) => ({ field: i.key, message: i.message })));
    return parsed.data;
  }
  const issues: ConfigIssue[] = [];
  for (const issue of parsed.error.issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        const snake = snakeCase(key);
        const hint = snake !== key && knownFields.includes(snake) ? `; did you mean '${snake}'? (fields are snake_case, as in CoMLRL)` : '';
        issues.push({ field: key, message: `unknown field '${key}'${hint}` });
      }
      continue;
    }
    const field = issue.path.map(String).join('.') || '(config)';
    const got = 'input' in issue && issue.input !== undefined ? ` (got ${show(issue.input)})` : '';
    issues.push({ field, message: `${issue.message}${got}` });
  }
  throw new TrainerConfigError(label, issues);
}
