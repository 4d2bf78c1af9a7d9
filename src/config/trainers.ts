/**
 * The trainers a run config may select, as config parsing sees them: each trainer's name, its
 * section in the config file (with aliases), the zod schema of that section and whether it has
 * critics. The trainer registry (trainers/registry.ts, `registerTrainer`) adds the rest of each
 * trainer — how it is built, saved and loaded — and registers this part here (src does not import
 * trainers/); `comlrl/trainers` and the CLI register the built-in ones as they load.
 */
import { z } from 'zod';
import { lrScheduleIssues } from '../optim/schedule.js';

/**
 * The fields every trainer section has once its schema parsed it: what the CLI, `eval` and the
 * config reader use of any trainer's section (a trainer's schema may add any others).
 */
export type TrainerSectionFields = {
  readonly num_agents?: number | undefined;
  readonly num_turns: number;
  readonly num_train_epochs: number;
  readonly max_new_tokens: number;
  readonly temperature: number;
  readonly top_p: number;
  /** 0 = off; null = the agent checkpoint's generation_config.json value, else 50 (CoMLRL's None). */
  readonly top_k: number | null;
  readonly discount: number;
  readonly eval_interval: number;
  readonly eval_num_samples: number;
  readonly eval_batch_size: number;
  readonly seed: number;
  /** Reference KL on (trainers that offer it; see `REFERENCE_KL_DEFAULTS`). */
  readonly reference_kl_enabled?: boolean;
};

/** A trainer as config parsing sees it (see the module comment). */
export interface TrainerSectionSpec {
  /** The trainer's name (`run.json`'s `trainer`, the run directory's default name), e.g. 'collm-dc'. */
  readonly name: string;
  /** Its name in messages, e.g. 'CoLLM-DC'. */
  readonly label: string;
  /** Its section in a run config, e.g. `collm_dc`; the document form of a config uses this one. */
  readonly section: string;
  /** Other section names accepted for it (CoMLRL's, e.g. `iac`). */
  readonly aliases?: readonly string[];
  /** The schema of its section (snake_case fields, defaults filled). */
  readonly schema: z.ZodType<TrainerSectionFields>;
  /** Whether it trains critics: without, the config's critic keys (`model.critics`, ...) are errors. */
  readonly usesCritics: boolean;
  /**
   * Fields of its section that hold a local model directory (MARLHF's `reward_model_name`): made
   * absolute like the `model.*` paths (against the config file's folder, `--set` values against the
   * working directory) and recorded by content in each checkpoint like them.
   */
  readonly modelPathFields?: readonly string[];
  /**
   * Whether it always scores against each agent's frozen reference (MADPO's DPO loss), reference KL
   * or not: the CLI then loads the references (`model.reference_model`, else under full fine-tuning
   * the agents' starting weights) as it does for `reference_kl_enabled`.
   */
  readonly usesReference?: boolean;
  /**
   * For a trainer that `usesCritics`: when its parsed section trains no critic model of its own
   * (CoLLM-DC's `use_separate_critic: false` puts value heads on the actors), the section field
   * that says so and what it means; the critic keys of `model` are then errors naming that field,
   * never silently ignored. Undefined: the section has critic models.
   */
  criticModelsOff?(section: TrainerSectionFields): { readonly field: string; readonly means: string } | undefined;
}

/**
 * The reference-KL settings every trainer section takes (CoMLRL 1.3.8's names and defaults, plus
 * comlrl's `kl_mode`); the trainers' schemas default to these values.
 */
export const REFERENCE_KL_DEFAULTS = {
  reference_kl_enabled: false,
  reference_kl_coef: 0.1,
  reference_devices: null,
  kl_mode: 'reward',
} as const;

/**
 * Trainer-section fields added after checkpoints were first written, with their defaults. A field
 * whose value equals its default is left out of the config identity (`runConfigIdentity`), so a
 * checkpoint written before the field existed keeps its config hash and still resumes.
 */
export const LATER_TRAINER_FIELD_DEFAULTS: Readonly<Record<string, unknown>> = {
  ...REFERENCE_KL_DEFAULTS,
  // Learning-rate schedules (docs/lr-schedules.md): the default is no schedule.
  lr_scheduler_type: 'constant',
  warmup_steps: 0,
  warmup_ratio: 0,
  critic_lr_scheduler_type: null,
  critic_lr_warmup_steps: null,
  critic_lr_warmup_ratio: null,
};

/** Top-level config keys a trainer section may not take. */
const RESERVED_SECTIONS = new Set(['model', 'dataset', 'external', 'reward_processor', 'task', 'output', 'memory', 'seed', 'backend']);

const byName = new Map<string, TrainerSectionSpec>();
const bySection = new Map<string, TrainerSectionSpec>();

/**
 * Registers a trainer's config side. The same spec again is a no-op; another spec under a taken
 * name or section is an error naming it.
 * @throws Error when a name or section is taken or malformed.
 */
export function registerTrainerSection(spec: TrainerSectionSpec): void {
  if (byName.get(spec.name) === spec) return;
  if (!/^[a-z0-9][a-z0-9_-]*$/.test(spec.name)) throw new Error(`trainer name '${spec.name}' must be lowercase letters, digits, '-' or '_'`);
  if (byName.has(spec.name)) throw new Error(`trainer '${spec.name}' is already registered (by another spec)`);
  const sections = [spec.section, ...(spec.aliases ?? [])];
  for (const s of sections) {
    if (!/^[a-z][a-z0-9_]*$/.test(s)) throw new Error(`trainer section '${s}' must be lowercase letters, digits or '_'`);
    if (RESERVED_SECTIONS.has(s)) throw new Error(`trainer section '${s}' is a run config section of its own`);
    const owner = bySection.get(s);
    if (owner !== undefined) throw new Error(`trainer section '${s}' is taken by trainer '${owner.name}'`);
  }
  byName.set(spec.name, spec);
  for (const s of sections) bySection.set(s, spec);
}

/** The registered trainer of a name, or undefined. */
export function findTrainerSection(name: string): TrainerSectionSpec | undefined {
  return byName.get(name);
}

/** Every registered trainer, in registration order. */
export function registeredTrainerSections(): TrainerSectionSpec[] {
  return [...byName.values()];
}

/** Every accepted section name with its trainer, in registration order (a trainer's section, then its aliases). */
export function trainerSectionNames(): [string, TrainerSectionSpec][] {
  return [...bySection.entries()];
}

/** Which schema produced a parsed section: so a section is parsed once, however often it is handed on. */
const parsedBy = new WeakMap<object, z.ZodType>();

/**
 * Parses a trainer section with `schema` (zod's `safeParse`, reporting inputs), refuses a warmup
 * that a `constant` learning-rate schedule would ignore (`lrScheduleIssues`), and remembers the
 * result as that schema's output (see {@link wasParsedBy}).
 */
export function parseTrainerSection<S extends z.ZodType>(schema: S, input: unknown): z.ZodSafeParseResult<z.output<S>> {
  // Checked here rather than as a refinement in each schema: a refined object schema cannot be `.extend`ed.
  const checked = schema.superRefine((data, ctx) => {
    for (const { key, value, message } of lrScheduleIssues(data)) ctx.addIssue({ code: 'custom', path: [key], message, input: value });
  });
  const r = checked.safeParse(input, { reportInput: true });
  if (r.success && r.data !== null && typeof r.data === 'object') parsedBy.set(r.data, schema);
  return r;
}

/** Whether `value` is an output of `schema` from {@link parseTrainerSection} (so parsing it again would give it back). */
export function wasParsedBy<S extends z.ZodType>(schema: S, value: unknown): value is z.output<S> {
  return value !== null && typeof value === 'object' && parsedBy.get(value) === schema;
}
