/**
 * The paths a run config names (model folders, including a trainer section's own such as
 * `marlhf.reward_model_name`, and data files) and where a relative one points: a
 * path written in a config file is relative to that file's folder, a `--set` value to the working
 * directory. Both are made absolute once, when the file is loaded (see `loadRunConfig`), so the
 * run directory's config.yaml names the same folders from anywhere.
 */
import * as path from 'node:path';
import type { ModelSection, RunConfig } from './schema.js';
import { findTrainerSection, sectionModelFields, trainerSectionNames } from './trainers.js';

/** Keys of `model` holding one model folder. */
const SINGLE_MODEL_KEYS = ['agent_model', 'critic_model', 'reference_model'] as const;
/** Keys of `model` holding a list of model folders. */
const LIST_MODEL_KEYS = ['agents', 'critics'] as const;
/** Keys of `dataset` holding a data path. */
const DATA_KEYS = ['path', 'eval_path'] as const;

/**
 * Makes the relative model and data paths of a config document (as read from a file, before
 * validation) absolute against `baseDir`; values that are not strings are left for the schema to
 * name. Returns a copy.
 */
export function resolveDocumentPaths(doc: Record<string, unknown>, baseDir: string): Record<string, unknown> {
  const out = { ...doc };
  const abs = (v: unknown): unknown => (typeof v === 'string' && v !== '' && !path.isAbsolute(v) ? path.resolve(baseDir, v) : v);
  const model = out.model;
  if (isRecord(model)) {
    const m = { ...model };
    for (const k of SINGLE_MODEL_KEYS) if (k in m) m[k] = abs(m[k]);
    for (const k of LIST_MODEL_KEYS) if (Array.isArray(m[k])) m[k] = (m[k] as unknown[]).map(abs);
    out.model = m;
  }
  // A trainer section's own model folders (MARLHF's reward_model_name), under any of its names.
  for (const [section, spec] of trainerSectionNames()) {
    const sec = out[section];
    const fields = sectionModelFields(spec);
    if (!isRecord(sec) || !fields.some((f) => f in sec)) continue;
    const t = { ...sec };
    for (const f of fields) if (f in t) t[f] = abs(t[f]);
    out[section] = t;
  }
  const dataset = out.dataset;
  if (isRecord(dataset)) {
    const d = { ...dataset };
    for (const k of DATA_KEYS) if (k in d) d[k] = abs(d[k]);
    out.dataset = d;
  }
  return out;
}

/** A validated config with its relative model and data paths made absolute against `baseDir`. */
export function resolveRunConfigPaths(config: RunConfig, baseDir: string): RunConfig {
  const abs = (v: string): string => path.resolve(baseDir, v);
  const m = config.model;
  const model: ModelSection = { ...m };
  for (const k of SINGLE_MODEL_KEYS) {
    const v = m[k];
    if (v !== undefined) model[k] = abs(v);
  }
  for (const k of LIST_MODEL_KEYS) {
    const v = m[k];
    if (v !== undefined) model[k] = v.map(abs);
  }
  const dataset = { ...config.dataset };
  for (const k of DATA_KEYS) {
    const v = dataset[k];
    if (v !== undefined) dataset[k] = abs(v);
  }
  const trainerPaths = new Map(trainerModelPathsOf(config).map(([key, dir]) => [key, abs(dir)]));
  return withTrainerModelPaths({ ...config, model, dataset }, trainerPaths);
}

/** The model folders the trainer's own section names (its roles' `modelField`s, see `sectionModelFields`), keyed `<section>.<field>`. */
function trainerModelPathsOf(config: RunConfig): [key: string, dir: string][] {
  const spec = findTrainerSection(config.trainer);
  if (spec === undefined) return [];
  const section = config.trainerConfig as Readonly<Record<string, unknown>>;
  const out: [string, string][] = [];
  for (const f of sectionModelFields(spec)) {
    const v = section[f];
    if (typeof v === 'string') out.push([`${spec.section}.${f}`, v]);
  }
  return out;
}

/** `config` with the trainer section's model folders of `paths` (keys `<section>.<field>`) in place of its own. */
function withTrainerModelPaths(config: RunConfig, paths: ReadonlyMap<string, string>): RunConfig {
  const spec = findTrainerSection(config.trainer);
  if (spec === undefined) return config;
  const section: Record<string, unknown> = { ...config.trainerConfig };
  let changed = false;
  for (const f of sectionModelFields(spec)) {
    const v = paths.get(`${spec.section}.${f}`);
    if (v !== undefined && typeof section[f] === 'string') {
      section[f] = v;
      changed = true;
    }
  }
  return changed ? { ...config, trainerConfig: section as RunConfig['trainerConfig'] } : config;
}

/**
 * Every model folder a config names, by key: {@link modelPathsOf}'s, then the trainer section's
 * own (`marlhf.reward_model_name`).
 */
export function runModelPathsOf(config: RunConfig): [key: string, dir: string][] {
  return [...modelPathsOf(config.model), ...trainerModelPathsOf(config)];
}

/** `config` with the folders of {@link runModelPathsOf}'s keys replaced by `paths` (keys not in it keep their folder). */
export function withRunModelPaths(config: RunConfig, paths: ReadonlyMap<string, string>): RunConfig {
  return withTrainerModelPaths({ ...config, model: withModelPaths(config.model, paths) }, paths);
}

/**
 * The model folders a config names, by key: `model.agent_model`, `model.agents[0]`, ...,
 * `model.critic_model`, `model.critics[i]`, `model.reference_model` (those set), in that order.
 */
export function modelPathsOf(model: ModelSection): [key: string, dir: string][] {
  const out: [string, string][] = [];
  const single = (k: (typeof SINGLE_MODEL_KEYS)[number]) => {
    const v = model[k];
    if (v !== undefined) out.push([`model.${k}`, v]);
  };
  const list = (k: (typeof LIST_MODEL_KEYS)[number]) => model[k]?.forEach((v, i) => out.push([`model.${k}[${i}]`, v]));
  single('agent_model');
  list('agents');
  single('critic_model');
  list('critics');
  single('reference_model');
  return out;
}

/**
 * `model` with the folders of {@link modelPathsOf}'s keys replaced by `paths` (keys not in it keep
 * their folder).
 */
export function withModelPaths(model: ModelSection, paths: ReadonlyMap<string, string>): ModelSection {
  const out: ModelSection = { ...model };
  for (const k of SINGLE_MODEL_KEYS) {
    const v = paths.get(`model.${k}`);
    if (v !== undefined && out[k] !== undefined) out[k] = v;
  }
  for (const k of LIST_MODEL_KEYS) {
    const list = out[k];
    if (list !== undefined) out[k] = list.map((v, i) => paths.get(`model.${k}[${i}]`) ?? v);
  }
  return out;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}
