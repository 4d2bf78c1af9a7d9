/**
 * The run config file (`comlrl train --config FILE.yaml`): CoMLRL's config sections as one YAML or
 * JSON document, validated with zod. Every object is strict, so a misspelt key is an error naming
 * its dotted path instead of a silently ignored setting.
 *
 * The trainer sections (`magrpo:`, `collm_dc:`, `collm_cc:`, or a section a registered trainer
 * adds) are validated with the trainers' own schemas, which the trainer registry holds
 * (./trainers.ts; `comlrl/trainers` and the CLI register the built-in ones): src does not import trainers/.
 */
import { z } from 'zod';
import { BACKEND_CHOICES, type BackendChoice } from '../backend/init.js';
import { DEFAULT_MEMORY_SETTINGS, parseBytes, type MemorySettings } from '../memory/settings.js';
import { loraSectionSchema } from '../model/lora/config.js';
import { findTask, registeredTasks, taskNames } from '../tasks/registry.js';
import { stableStringify } from './hash.js';
import type { ConfigFileIssue } from './issues.js';
import { parallelConfigIssues } from './devices.js';
import { ignoredSettingIssues } from './ignored.js';
import { takesCriticKeys } from './roles.js';
import { findTrainerSection, LATER_TRAINER_FIELD_DEFAULTS, parseTrainerSection, registeredTrainerSections, sectionRoles, trainerSectionNames, type TrainerSectionFields } from './trainers.js';

/**
 * The built-in trainers, by their CLI names.
 * @deprecated The trainer registry (`registeredTrainerSections()`, ./trainers.ts) is the source: it
 * also holds trainers added with `registerTrainer` (comlrl/trainers).
 */
export const TRAINER_NAMES = ['magrpo', 'collm-dc', 'collm-cc'] as const;
/** See {@link TRAINER_NAMES}. */
export type TrainerName = (typeof TRAINER_NAMES)[number];

/**
 * The config section of each built-in trainer. `iac` / `maac` (CoMLRL's names for CoLLM-DC /
 * CoLLM-CC) are accepted as aliases so a CoMLRL section can be pasted unchanged.
 * @deprecated The trainer registry (`trainerSectionNames()`, ./trainers.ts) is the source.
 */
export const TRAINER_SECTIONS: Readonly<Record<string, TrainerName>> = {
  magrpo: 'magrpo',
  collm_dc: 'collm-dc',
  iac: 'collm-dc',
  collm_cc: 'collm-cc',
  maac: 'collm-cc',
};

/**
 * The built-in tasks. `toy-coord` is the embedded two-agent word task (no data needed).
 * @deprecated The task registry (`taskNames()`, src/tasks) is the source: it also holds tasks added
 * as folders or by `registerTask`. A test keeps this list equal to the built-in folders.
 */
export const TASK_NAMES = ['tldr', 'coophe', 'housebuild', 'toy-coord'] as const;
/** See {@link TASK_NAMES}. */
export type TaskName = (typeof TASK_NAMES)[number];

/**
 * Multi-turn feedback modes of the built-in tasks (tasks-reference §2.4, §3.3).
 * @deprecated Each task spec's `externalModes` is the source (a test keeps them equal).
 */
export const EXTERNAL_MODES: Readonly<Record<TaskName, readonly string[]>> = {
  tldr: [],
  coophe: ['level_feedback', 'plain', 'expert_edits'],
  housebuild: ['score_feedback', 'perfect_feedback', 'position_feedback', 'position_modification', 'rect_modification', 'resource_schedule'],
  'toy-coord': [],
};

const path = (key: string) => z.string({ error: `${key} must be a path (string)` }).min(1, { error: `${key} must be a non-empty path` });
const bool = (key: string) => z.boolean({ error: `${key} must be true or false` });
const int = (key: string, min: number) =>
  z.number({ error: `${key} must be an integer >= ${min}` }).int({ error: `${key} must be an integer >= ${min}` }).min(min, { error: `${key} must be an integer >= ${min}` });
const num = (key: string) => z.number({ error: `${key} must be a number` }).refine(Number.isFinite, { error: `${key} must be a finite number` });

const modelSchema = z.strictObject({
  /** One local Hugging Face directory; every agent gets its own copy (homogeneous agents). */
  agent_model: path('model.agent_model').optional(),
  /** One local Hugging Face directory per agent (heterogeneous agents). */
  agents: z.array(path('model.agents[i]'), { error: 'model.agents must be a list of model directories' }).min(1).optional(),
  /** The critic LM (actor-critic trainers); CoLLM-DC copies it per agent. Default: the agent model. */
  critic_model: path('model.critic_model').optional(),
  /** One critic directory per critic (CoLLM-DC: one per agent; CoLLM-CC: exactly one). */
  critics: z.array(path('model.critics[i]'), { error: 'model.critics must be a list of model directories' }).min(1).optional(),
  /**
   * The frozen reference of the reference KL (`reference_kl_enabled`), for every agent. Default:
   * under LoRA the agent's base with the adapter off; under full fine-tuning the agent's starting
   * model directory, loaded once more (frozen).
   */
  reference_model: path('model.reference_model').optional(),
  /** Sampling defaults; a value set in the trainer section wins. */
  temperature: num('model.temperature').refine((v) => v > 0, { error: 'model.temperature must be > 0' }).optional(),
  top_p: num('model.top_p').refine((v) => v > 0 && v <= 1, { error: 'model.top_p must be in (0, 1]' }).optional(),
  /** 0 = off; null = each agent checkpoint's generation_config.json top_k, else 50 (CoMLRL's None). */
  top_k: int('model.top_k', 0).nullable().optional(),
  /** Render prompts through each tokenizer's chat template (HouseBuild's configs: true). */
  use_chat_template: bool('model.use_chat_template').default(false),
  /** System message placed before each prompt when the chat template is used. */
  system_prompt: z.string({ error: 'model.system_prompt must be a string' }).optional(),
  /** Qwen3's `enable_thinking` template switch. */
  enable_thinking: bool('model.enable_thinking').optional(),
  /**
   * Train LoRA adapters (PEFT's LoraConfig fields) instead of every weight: agents built from the
   * same directory share one frozen base in memory, each with its own adapter.
   */
  lora: loraSectionSchema.optional(),
  /**
   * The critics' LoRA settings (actor-critic trainers). Default: `lora`'s, so a critic on the agents'
   * checkpoint shares their frozen base (adapter + value head); `false` fully fine-tunes the critic.
   */
  critic_lora: z.union([loraSectionSchema, z.literal(false)], { error: 'model.critic_lora must be a LoRA section or false' }).optional(),
});

const datasetSchema = z.strictObject({
  /** A registered task's name (checked against the task registry in parseRunConfig). */
  task: z.string({ error: () => `dataset.task must be one of ${quoteList(taskNames())}` }),
  /** Local data (JSON, JSONL, Parquet file or hub-layout directory). HouseBuild defaults to the packaged tasks; toy needs none. */
  path: path('dataset.path').optional(),
  /** Data for the eval split when it lives elsewhere. Default: `path`. */
  eval_path: path('dataset.eval_path').optional(),
  /** HF slice syntax, e.g. `train[:1100]`, `test[16:]`, `[:8]`. Default: the paper's split of the task. */
  train_split: z.string({ error: 'dataset.train_split must be a split spec string such as "train[:1000]"' }).optional(),
  eval_split: z.string({ error: 'dataset.eval_split must be a split spec string such as "test[:100]"' }).optional(),
});

const externalSchema = z.strictObject({
  /** Feedback mode between turns (CoopHE: level_feedback | plain | expert_edits; HouseBuild: score_feedback, ...). */
  mode: z.string({ error: 'external.mode must be a string' }).optional(),
  /** Repeat the original prompt in follow-ups (HouseBuild). */
  original_prompt: bool('external.original_prompt').optional(),
  /** Show the agent its previous response in follow-ups (HouseBuild). */
  previous_response: bool('external.previous_response').optional(),
  /** Cap on listed cells/rectangles in follow-ups (HouseBuild). */
  lim: int('external.lim', 1).optional(),
  /** Asserts shown in CoopHE feedback: N > 0 first N, N < 0 last |N|, 0 or 'all' every one. */
  sandbox_slice: z.union([z.number().int(), z.literal('all'), z.null()], { error: "external.sandbox_slice must be an integer, 'all' or null" }).optional(),
  /**
   * CoopHE: follow-ups used verbatim (true, the fork scripts) or wrapped in the turn-1 template
   * (false, the newest upstream configs). Default: the environment's (true).
   */
  external_prompt_passthrough: bool('external.external_prompt_passthrough').optional(),
});

const rewardProcessorSchema = z.strictObject({
  /** false: raw rewards. */
  enabled: bool('reward_processor.enabled').default(true),
  scale: num('reward_processor.scale').default(1),
  shift: num('reward_processor.shift').default(0),
});

/** The `task:` section: checked by the selected task's own options schema (its spec's `options`). */
const taskOptionsSchema = z.record(z.string(), z.unknown(), { error: 'task must be a mapping of task options' });

const outputSchema = z.strictObject({
  /** The run directory. Default `runs/<task>-<trainer>-<timestamp>`. */
  dir: path('output.dir').optional(),
  /** Write a checkpoint every this many training items (0: only when stopped early). */
  save_steps: int('output.save_steps', 0).default(0),
  /** Keep only the newest N checkpoints (null: all). */
  save_total_limit: int('output.save_total_limit', 1).nullable().default(null),
  /** Save the trained agents (and critics) into `<dir>/final/` at the end. */
  save_final_model: bool('output.save_final_model').default(true),
  /** dtype of the final model's weights (checkpoints are always float32, for exact resume). */
  save_dtype: z.enum(['float32', 'bfloat16', 'float16'], { error: "output.save_dtype must be 'float32', 'bfloat16' or 'float16'" }).default('float32'),
  /** Print every metrics row instead of a progress bar. */
  verbose: bool('output.verbose').default(false),
  /** Write rewards/losses plots (PNG + SVG) into the run directory. */
  plots: bool('output.plots').default(true),
  /** Evaluate before the first and after the last training item. */
  eval_before_after: bool('output.eval_before_after').default(true),
});

const loggingSchema = z.strictObject({
  /** Also write the metrics as TensorBoard event files in `<run>/tensorboard/`. */
  tensorboard: bool('logging.tensorboard').default(false),
});

const size = (key: string) =>
  z.union([z.number(), z.string()], { error: `${key} must be a size in bytes (a number, or a string such as 3.5GiB or 800MB)` }).transform((v, ctx) => {
    try {
      return parseBytes(v, key);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: (err as Error).message });
      return z.NEVER;
    }
  });
const autoOr = <T extends z.ZodType>(key: string, inner: T, what: string) =>
  z.union([z.literal('auto'), inner], { error: `${key} must be 'auto' or ${what}` });

const memorySchema = z.strictObject({
  /** Bytes tensors may take in all; default: 3.5 GiB on wasm, half the RAM on the other backends. */
  budget: size('memory.budget').nullable().default(null),
  /** Rows per forward/backward pass; 'auto': as many as fit the budget. */
  micro_batch_size: autoOr('memory.micro_batch_size', int('memory.micro_batch_size', 1), 'an integer >= 1').default('auto'),
  /** Sequences generated together; 'auto': as many as fit the budget. */
  generation_batch_size: autoOr('memory.generation_batch_size', int('memory.generation_batch_size', 1), 'an integer >= 1').default('auto'),
  /** Recompute each layer in the backward pass (gradient checkpointing); 'auto': when a pass needs it. */
  recompute: autoOr('memory.recompute', bool('memory.recompute'), 'true or false').default('auto'),
  /** Memory of one attention block (queries are processed in blocks). */
  attention_block: size('memory.attention_block').default(DEFAULT_MEMORY_SETTINGS.attentionBlockBytes),
  /** Memory of one chunk of vocabulary logits. */
  logits_chunk: size('memory.logits_chunk').default(DEFAULT_MEMORY_SETTINGS.logitsChunkBytes),
  /** A frozen LoRA base's layer weights in host memory, uploaded per use; 'auto': on wasm when they take over a quarter of the budget. */
  offload_frozen_layers: autoOr('memory.offload_frozen_layers', bool('memory.offload_frozen_layers'), 'true or false').default('auto'),
  /** A frozen LoRA base's matrix weights in float32, or bfloat16 on the torch backend. */
  frozen_base_dtype: z.enum(['float32', 'bfloat16'], { error: 'memory.frozen_base_dtype must be float32 or bfloat16' }).default('float32'),
});

/** The memory section after validation (sizes in bytes). */
export type MemorySection = z.output<typeof memorySchema>;

/** The library's memory settings of a validated `memory` section. */
export function memorySettingsOf(section: MemorySection): MemorySettings {
  return {
    budgetBytes: section.budget,
    microBatchSize: section.micro_batch_size,
    generationBatchSize: section.generation_batch_size,
    recompute: section.recompute,
    attentionBlockBytes: section.attention_block,
    logitsChunkBytes: section.logits_chunk,
    offloadFrozenLayers: section.offload_frozen_layers,
    frozenBaseDtype: section.frozen_base_dtype,
  };
}

const TRAINER_SECTION_SCHEMA = z.record(z.string(), z.unknown(), { error: 'a trainer section must be a mapping of trainer fields' });

// The trainer sections are not in here: they come from the trainer registry (see parseRunConfig).
const topSchema = z.strictObject({
  model: modelSchema.optional(),
  dataset: datasetSchema,
  external: externalSchema.optional(),
  reward_processor: rewardProcessorSchema.optional(),
  task: taskOptionsSchema.optional(),
  output: outputSchema.optional(),
  /** Where the metrics go besides metrics.jsonl (docs/logging.md). */
  logging: loggingSchema.optional(),
  /** How training and generation bound their memory (docs/memory.md). */
  memory: memorySchema.optional(),
  /** The run seed: the trainer's random streams (and HouseBuild's spider draw unless task.rpg_seed). */
  seed: int('seed', 0).optional(),
  /** Tensor backend (else COMLRL_BACKEND, else auto: torch, then tensorflow, when set up, else wasm). */
  backend: z.enum(BACKEND_CHOICES as [BackendChoice, ...BackendChoice[]], { error: `backend must be one of ${BACKEND_CHOICES.join(', ')}` }).optional(),
});

/**
 * The run config's schema without its trainer sections (those come from the trainer registry) and
 * with `task:` unchecked (each task's spec checks it): for tooling such as
 * scripts/gen-config-docs.mjs, which writes docs/configs.md from it. Parse configs with
 * {@link parseRunConfig}.
 */
export const RUN_CONFIG_BASE_SCHEMA = topSchema;

/** The model section after validation. */
export type ModelSection = z.output<typeof modelSchema>;
/** The dataset section after validation. */
export type DatasetSection = z.output<typeof datasetSchema>;
/** The external (multi-turn feedback) section. */
export type ExternalSection = z.output<typeof externalSchema>;
/** The reward processor section (r' = r·scale + shift when enabled). */
export type RewardProcessorSection = z.output<typeof rewardProcessorSchema>;
/** The `task:` section after the selected task's own options schema (`{}` for a task without options). */
export type TaskOptionsSection = Readonly<Record<string, unknown>>;
/** The output section after defaults. */
export type OutputSection = z.output<typeof outputSchema>;
/** The logging section after defaults. */
export type LoggingSection = z.output<typeof loggingSchema>;

/** What every run config holds besides its trainer section. */
export interface RunConfigSections {
  readonly model: ModelSection;
  readonly dataset: DatasetSection;
  readonly external: ExternalSection;
  readonly rewardProcessor: RewardProcessorSection;
  readonly task: TaskOptionsSection;
  readonly output: OutputSection;
  readonly logging: LoggingSection;
  readonly memory: MemorySection;
  readonly seed: number;
  readonly backend: BackendChoice | undefined;
}

/**
 * The built-in trainers' zod schemas by name, as callers of {@link parseRunConfig} passed them
 * before the trainer registry held them.
 */
export type RunConfigSchemas = { readonly [K in TrainerName]: z.ZodType };

/**
 * A validated run config with defaults filled in. `trainer` names a registered trainer and
 * `trainerConfig` is its section as that trainer's schema parsed it (defaults filled, snake_case
 * CoMLRL fields), with the sampling defaults of `model` and the run `seed` merged in. It is typed
 * here by the fields every trainer section has; the trainer registry (comlrl/trainers) hands it to
 * its trainer typed by that trainer's own schema, unchanged (it is parsed once).
 */
export type RunConfig = RunConfigSections & {
  /** Which registered trainer the config's trainer section selects, e.g. 'magrpo'. */
  readonly trainer: string;
  /** The trainer section after the trainer's own schema. */
  readonly trainerConfig: TrainerSectionFields;
};

export type { ConfigFileIssue } from './issues.js';

/** Raised for an invalid config; `issues` names every bad key. */
export class ConfigError extends Error {
  readonly issues: readonly ConfigFileIssue[];
  constructor(issues: readonly ConfigFileIssue[], source?: string) {
    const where = source ? ` (${source})` : '';
    super(`invalid config${where}:\n${issues.map((i) => `  - ${i.key}: ${i.message}`).join('\n')}`);
    this.name = 'ConfigError';
    this.issues = issues;
  }
}

function show(value: unknown): string {
  // JSON would print NaN and ±Infinity as null: name them as they are.
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
  try {
    const s = JSON.stringify(value) ?? String(value);
    return s.length > 60 ? `${s.slice(0, 57)}...` : s;
  } catch {
    return String(value);
  }
}

function dotted(prefix: string, p: readonly PropertyKey[]): string {
  let out = prefix;
  for (const seg of p) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else out += out === '' ? String(seg) : `.${String(seg)}`;
  }
  return out === '' ? '(top level)' : out;
}

/** Allowed keys of each strict object, by dotted path, for "unknown key" messages (the top level: {@link topLevelKeys}). */
const ALLOWED_KEYS: Record<string, readonly string[]> = {
  model: Object.keys(modelSchema.shape),
  dataset: Object.keys(datasetSchema.shape),
  external: Object.keys(externalSchema.shape),
  reward_processor: Object.keys(rewardProcessorSchema.shape),
  'model.lora': Object.keys(loraSectionSchema.shape),
  'model.critic_lora': Object.keys(loraSectionSchema.shape),
  output: Object.keys(outputSchema.shape),
  logging: Object.keys(loggingSchema.shape),
  memory: Object.keys(memorySchema.shape),
};

/** Turns zod issues into key-named issues; `prefix` is the section path ('' at top level). */
export function zodIssues(error: z.ZodError, prefix = '', allowed?: (path: string) => readonly string[] | undefined): ConfigFileIssue[] {
  const out: ConfigFileIssue[] = [];
  for (const issue of error.issues) {
    if (issue.code === 'unrecognized_keys') {
      const at = dotted(prefix, issue.path);
      const base = at === '(top level)' ? '' : at;
      const known = allowed?.(base);
      for (const key of issue.keys) {
        out.push({
          key: base ? `${base}.${key}` : key,
          message: `unknown key${known ? ` (allowed here: ${known.join(', ')})` : ''}`,
        });
      }
      continue;
    }
    const got = 'input' in issue && issue.input !== undefined ? ` (got ${show(issue.input)})` : '';
    out.push({ key: dotted(prefix, issue.path), message: `${issue.message}${got}` });
  }
  return out;
}

/** The keys a config may have at the top level: the fixed sections with the registered trainers' sections after `dataset`. */
function topLevelKeys(): string[] {
  const [model, dataset, ...rest] = Object.keys(topSchema.shape);
  return [model, dataset, ...trainerSectionNames().map(([section]) => section), ...rest];
}

/** "magrpo:, collm_dc: (alias iac:) or collm_cc: (alias maac:)": the registered trainers' sections. */
function sectionChoices(): string {
  const choices = registeredTrainerSections().map((t) => `${t.section}:${t.aliases?.length ? ` (alias ${t.aliases.map((a) => `${a}:`).join(', ')})` : ''}`);
  return choices.length <= 1 ? choices.join('') : `${choices.slice(0, -1).join(', ')} or ${choices[choices.length - 1]}`;
}

/**
 * Validates a parsed config document (plain object from YAML/JSON) and fills defaults.
 *
 * Rules beyond the schemas: exactly one trainer section, of a registered trainer (./trainers.ts),
 * parsed by that trainer's schema; a trainer without critics takes no critic keys in `model`;
 * `model.agent_model` xor `model.agents`;
 * `model.critic_model` xor `model.critics`; `dataset.task` must be a registered task (src/tasks:
 * the folders under envs/ once `comlrl/envs` or the CLI has loaded); `external.mode` must be one of
 * the task's modes, an `external` or `task:` key another task reads is an error naming that task,
 * and the `task:` section is parsed by the task's own options schema;
 * sampling values in `model` fill trainer fields the trainer section leaves unset; the top-level
 * `seed` sets the trainer's `seed` (setting both to different values is an error); a value the run
 * would ignore (critic models with CoLLM-DC's shared heads, `save_merged` without a final model,
 * ...: ./ignored.ts) is an error naming it.
 *
 * @param schemas optional, as callers passed the built-in trainers' schemas before the registry
 *   held them: each must be the one registered under its name (else an Error).
 * @throws ConfigError listing every problem by dotted key path.
 */
export function parseRunConfig(raw: unknown, schemas?: RunConfigSchemas, source?: string): RunConfig {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new ConfigError([{ key: '(top level)', message: `the config must be a mapping of sections (model, dataset, ${registeredTrainerSections().map((t) => t.section).join(' | ') || 'a trainer section'}, ...)` }], source);
  }
  for (const [name, schema] of Object.entries(schemas ?? {})) {
    if (findTrainerSection(name)?.schema !== schema) throw new Error(`parseRunConfig: the schema given for trainer '${name}' is not the one registered for it (the trainer registry's parses its section)`);
  }
  // The trainer sections are taken out first: which keys they are depends on the registered trainers.
  const sectionNames = new Map(trainerSectionNames());
  const rest: Record<string, unknown> = {};
  const given: [string, unknown][] = [];
  for (const [k, v] of Object.entries(raw)) {
    if (!sectionNames.has(k)) rest[k] = v;
    else if (v !== undefined) given.push([k, v]);
  }
  const top = topSchema.safeParse(rest, { reportInput: true });
  const topIssues = top.success ? [] : zodIssues(top.error, '', (p) => (p === '' ? topLevelKeys() : ALLOWED_KEYS[p]));
  const rawSections = new Map<string, Readonly<Record<string, unknown>>>();
  for (const [k, v] of given) {
    const r = TRAINER_SECTION_SCHEMA.safeParse(v, { reportInput: true });
    if (r.success) rawSections.set(k, r.data);
    else topIssues.push(...zodIssues(r.error, k));
  }
  if (!top.success || topIssues.length > 0) throw new ConfigError(topIssues, source);
  const cfg = top.data;
  const issues: ConfigFileIssue[] = [];

  const sections = [...rawSections.keys()];
  if (sections.length !== 1) {
    const none = sectionNames.size === 0 ? "no trainers are registered: import 'comlrl/trainers' (the built-in trainers) or register one with registerTrainer" : `missing trainer section: add one of ${sectionChoices()}`;
    issues.push({
      key: sections.length === 0 ? '(top level)' : sections.join(', '),
      message: sections.length === 0 ? none : `exactly one trainer section is allowed, found ${sections.join(' and ')}`,
    });
    throw new ConfigError(issues, source);
  }
  const [section, sectionValue] = [...rawSections.entries()][0];
  const spec = sectionNames.get(section);
  if (spec === undefined) throw new Error(`parseRunConfig: trainer section '${section}' lost its trainer`);
  const model = cfg.model ?? modelSchema.parse({});
  if (model.agent_model !== undefined && model.agents !== undefined) {
    issues.push({ key: 'model.agents', message: 'set either model.agent_model (one model for every agent) or model.agents (one per agent), not both' });
  }
  if (model.critic_model !== undefined && model.critics !== undefined) {
    issues.push({ key: 'model.critics', message: 'set either model.critic_model or model.critics, not both' });
  }
  if (!takesCriticKeys(sectionRoles(spec))) {
    const withCritics = registeredTrainerSections().filter((t) => takesCriticKeys(sectionRoles(t))).map((t) => t.section);
    const noCritic = `${spec.label} has no critic; remove it${withCritics.length > 0 ? ` or use ${withCritics.join(' / ')}` : ''}`;
    if (model.critic_lora !== undefined) issues.push({ key: 'model.critic_lora', message: noCritic });
    if (model.critic_model !== undefined || model.critics !== undefined) issues.push({ key: model.critics !== undefined ? 'model.critics' : 'model.critic_model', message: noCritic });
  }
  const external = cfg.external ?? {};
  const task = findTask(cfg.dataset.task);
  let taskOptions: TaskOptionsSection = {};
  if (task === undefined) {
    const known = taskNames();
    issues.push({
      key: 'dataset.task',
      message:
        known.length === 0
          ? `no tasks are registered: import 'comlrl/envs' (the built-in tasks) or register one with registerTask (got ${show(cfg.dataset.task)})`
          : `dataset.task must be one of ${quoteList(known)} (got ${show(cfg.dataset.task)})`,
    });
  } else {
    if (external.mode !== undefined) {
      const modes = task.externalModes;
      if (!modes.includes(external.mode)) {
        issues.push({
          key: 'external.mode',
          message: modes.length === 0 ? `task '${task.name}' has no external feedback modes` : `must be one of ${quoteList(modes)} for task '${task.name}' (got "${external.mode}")`,
        });
      }
    }
    // An option another task reads names its owner (a setting for the wrong task is never ignored).
    for (const k of Object.keys(external)) {
      if (k === 'mode' || (external as Record<string, unknown>)[k] === undefined || task.externalOptions.some((o) => o === k)) continue;
      const owner = registeredTasks().find((t) => t.externalOptions.some((o) => o === k));
      issues.push({ key: `external.${k}`, message: `${owner ? `a ${owner.label} option` : 'an option no task reads'}; dataset.task is '${task.name}'` });
    }
    const parsed = parseTaskOptions(task, cfg.task);
    issues.push(...parsed.issues);
    taskOptions = parsed.options;
  }

  // Trainer section: sampling defaults from `model`, the run seed, then the trainer's own schema.
  const rawSection: Record<string, unknown> = { ...sectionValue };
  for (const key of ['temperature', 'top_p', 'top_k'] as const) {
    if (!(key in rawSection) && model[key] !== undefined) rawSection[key] = model[key];
  }
  if (cfg.seed !== undefined) {
    if ('seed' in rawSection && rawSection.seed !== cfg.seed) {
      issues.push({ key: `${section}.seed`, message: `differs from the top-level seed (${show(rawSection.seed)} vs ${cfg.seed}); set one of them` });
    }
    rawSection.seed = cfg.seed;
  }
  const parsedSection = parseTrainerSection(spec.schema, rawSection);
  if (!parsedSection.success) {
    issues.push(...zodIssues(parsedSection.error, section, (p) => (p === section ? Object.keys(objectShape(spec.schema)) : undefined)));
  }
  if (parsedSection.success) {
    issues.push(...ignoredSettingIssues({ spec, section, trainerConfig: parsedSection.data, model, output: cfg.output ?? outputSchema.parse({}) }));
    issues.push(...parallelConfigIssues(section, parsedSection.data, sectionRoles(spec)));
  }
  if (issues.length > 0 || !parsedSection.success) throw new ConfigError(issues, source);
  const trainerConfig = parsedSection.data;
  return {
    trainer: spec.name,
    trainerConfig,
    model,
    dataset: cfg.dataset,
    external,
    rewardProcessor: cfg.reward_processor ?? rewardProcessorSchema.parse({}),
    task: taskOptions,
    output: cfg.output ?? outputSchema.parse({}),
    logging: cfg.logging ?? loggingSchema.parse({}),
    memory: cfg.memory ?? memorySchema.parse({}),
    seed: trainerConfig.seed,
    backend: cfg.backend,
  };
}

function quoteList(names: readonly string[]): string {
  return names.map((t) => `'${t}'`).join(', ');
}

/**
 * The `task:` section of a config parsed by its task's options schema. Keys that are another
 * task's options are named as such ("a HouseBuild option; dataset.task is 'tldr'").
 */
function parseTaskOptions(
  spec: NonNullable<ReturnType<typeof findTask>>,
  section: Readonly<Record<string, unknown>> | undefined,
): { options: TaskOptionsSection; issues: ConfigFileIssue[] } {
  const issues: ConfigFileIssue[] = [];
  const raw = { ...(section ?? {}) };
  const own = spec.options ? Object.keys(objectShape(spec.options)) : [];
  for (const k of Object.keys(raw)) {
    if (own.includes(k)) continue;
    const owner = registeredTasks().find((t) => t !== spec && t.options !== undefined && k in objectShape(t.options));
    if (owner?.options === undefined) continue;
    delete raw[k];
    // A malformed value is named as such first (as if the key were in place), then its owner.
    const ownerOptions = owner.options;
    const field = objectShape(ownerOptions)[k] as z.ZodType;
    const r = field.safeParse(section?.[k], { reportInput: true });
    if (!r.success) issues.push(...zodIssues(r.error, `task.${k}`, (p) => keysAt(ownerOptions, p.split('.').slice(1))));
    else issues.push({ key: `task.${k}`, message: `a ${owner.label} option; dataset.task is '${spec.name}'` });
  }
  if (spec.options === undefined) {
    for (const k of Object.keys(raw)) issues.push({ key: `task.${k}`, message: `unknown key (task '${spec.name}' takes no options)` });
    return { options: {}, issues };
  }
  const r = spec.options.safeParse(raw, { reportInput: true });
  if (!r.success) {
    const options = spec.options;
    issues.push(...zodIssues(r.error, 'task', (p) => keysAt(options, p.split('.').slice(1))));
    return { options: {}, issues };
  }
  const options = r.data;
  return { options: options !== null && typeof options === 'object' ? (options as TaskOptionsSection) : {}, issues };
}

/** The keys of the object schema at `path` inside `schema` (for "allowed here" lists). */
function keysAt(schema: z.ZodType, path: readonly string[]): readonly string[] | undefined {
  let shape = objectShape(schema);
  for (const seg of path) {
    const next = shape[seg];
    if (next === undefined || next === null || typeof next !== 'object') return undefined;
    shape = objectShape(next as z.ZodType);
  }
  const keys = Object.keys(shape);
  return keys.length > 0 ? keys : undefined;
}

/** The keys of a (possibly refined or wrapped) zod object schema; empty when it is not an object. */
function objectShape(schema: z.ZodType): Record<string, unknown> {
  let s: unknown = schema;
  for (let i = 0; i < 8 && s && typeof s === 'object'; i++) {
    const obj = s as { shape?: Record<string, unknown>; _zod?: { def?: { innerType?: unknown; in?: unknown; schema?: unknown } } };
    if (obj.shape && typeof obj.shape === 'object') return obj.shape;
    const def = obj._zod?.def;
    s = def?.innerType ?? def?.in ?? def?.schema;
  }
  return {};
}

/**
 * The document a {@link RunConfig} came from, in file form (sections as in the YAML, trainer
 * section under its canonical name with defaults filled): what the run directory stores and
 * `--resume` reads back.
 */
export function runConfigToDocument(config: RunConfig): Record<string, unknown> {
  const trainer = findTrainerSection(config.trainer);
  if (trainer === undefined) throw new Error(`runConfigToDocument: trainer '${config.trainer}' is not registered`);
  const section = trainer.section;
  const doc: Record<string, unknown> = {
    model: config.model,
    dataset: config.dataset,
    [section]: config.trainerConfig,
    external: config.external,
    reward_processor: config.rewardProcessor,
    task: config.task,
    output: config.output,
    logging: config.logging,
    memory: config.memory,
    seed: config.seed,
  };
  if (config.backend !== undefined) doc.backend = config.backend;
  return JSON.parse(JSON.stringify(doc)) as Record<string, unknown>;
}

/**
 * The part of a config that decides what a run computes: everything but `output` and `logging`
 * (where and how often it writes), `backend` and `memory` (how passes are split; a change may move results by
 * float rounding, and lowering memory after an out-of-memory stop must stay possible). Its hash is stored in checkpoints; resuming with a config whose
 * identity differs is refused.
 */
export function runConfigIdentity(config: RunConfig): Record<string, unknown> {
  const doc = runConfigToDocument(config);
  delete doc.output;
  delete doc.logging;
  delete doc.backend;
  delete doc.memory;
  // Fields added later, at their defaults, are left out: older checkpoints keep their hash.
  const section = doc[findTrainerSection(config.trainer)?.section ?? ''];
  if (section !== null && typeof section === 'object') {
    const fields = section as Record<string, unknown>;
    for (const [key, value] of Object.entries(LATER_TRAINER_FIELD_DEFAULTS)) {
      if (key in fields && stableStringify(fields[key]) === stableStringify(value)) delete fields[key];
    }
  }
  return doc;
}
