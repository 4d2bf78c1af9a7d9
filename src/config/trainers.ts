/**
 * The trainers a run config may select, as config parsing sees them: each trainer's name, its
 * section in the config file (with aliases), the zod schema of that section and its model roles
 * (./roles.ts). The trainer registry (trainers/registry.ts, `registerTrainer`) adds the rest of each
 * trainer — how it is built, saved and loaded — and registers this part here (src does not import
 * trainers/); `comlrl/trainers` and the CLI register the built-in ones as they load.
 */
import { z } from 'zod';
import { lrScheduleIssues } from '../optim/schedule.js';
import type { TrainerSectionFields } from './section-fields.js';
import { roleModelFields, type CriticModelsOff, type TrainerRoles } from './roles.js';

export type { TrainerSectionFields } from './section-fields.js';

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
  /**
   * Its model roles (agents, critics, reward model, references: see ./roles.ts). Left out only by
   * specs that give the deprecated fields below instead.
   */
  readonly roles?: TrainerRoles<TrainerSectionFields>;
  /** @deprecated Declare `roles.critics` (or `roles.rewardModel`) instead: true is read as critic keys allowed. */
  readonly usesCritics?: boolean;
  /** @deprecated Declare a role's `modelField` instead (MARLHF: `roles.rewardModel.modelField: 'reward_model_name'`). */
  readonly modelPathFields?: readonly string[];
  /** @deprecated Declare `roles.reference: 'always'` instead. */
  readonly usesReference?: boolean;
  /** @deprecated Declare `roles.critics.off` instead. */
  criticModelsOff?(section: TrainerSectionFields): CriticModelsOff | undefined;
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
  // CoMLRL's parallelism and device keys (src/config/devices.ts): written out at their defaults,
  // they say what a config without them says.
  parallel_training: 'none',
  agent_devices: null,
  critic_devices: null,
};

/** Top-level config keys a trainer section may not take. */
const RESERVED_SECTIONS = new Set(['model', 'dataset', 'external', 'reward_processor', 'task', 'output', 'memory', 'seed', 'backend']);

const byName = new Map<string, TrainerSectionSpec>();
const bySection = new Map<string, TrainerSectionSpec>();
/** Each registered spec's roles (its own, or read from the deprecated fields). */
const rolesBySpec = new WeakMap<TrainerSectionSpec, TrainerRoles<TrainerSectionFields>>();

/** The roles a spec written with the deprecated fields declares (config parsing reads no counts). */
function rolesFromDeprecatedFields(spec: TrainerSectionSpec): TrainerRoles<TrainerSectionFields> {
  const { criticModelsOff } = spec;
  return {
    reference: spec.usesReference === true ? 'always' : 'kl',
    ...(spec.usesCritics === true ? { critics: { count: () => 0, hint: 'critic models', ...(criticModelsOff ? { off: (c: TrainerSectionFields) => criticModelsOff.call(spec, c) } : {}) } } : {}),
  };
}

/**
 * The model roles of a registered trainer section (see ./roles.ts).
 * @throws Error when the spec is not registered.
 */
export function sectionRoles(spec: TrainerSectionSpec): TrainerRoles<TrainerSectionFields> {
  const roles = rolesBySpec.get(spec);
  if (roles === undefined) throw new Error(`sectionRoles: trainer '${spec.name}' is not registered`);
  return roles;
}

/** The fields of a trainer's section holding a local model folder: its roles' `modelField`s and any deprecated `modelPathFields`. */
export function sectionModelFields(spec: TrainerSectionSpec): string[] {
  return [...new Set([...roleModelFields(sectionRoles(spec)), ...(spec.modelPathFields ?? [])])];
}

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
  rolesBySpec.set(spec, spec.roles ?? rolesFromDeprecatedFields(spec));
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
