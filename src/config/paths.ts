/**
 * The paths a run config names (model folders, data files) and where a relative one points: a
 * path written in a config file is relative to that file's folder, a `--set` value to the working
 * directory. Both are made absolute once, when the file is loaded (see `loadRunConfig`), so the
 * run directory's config.yaml names the same folders from anywhere.
 */
import * as path from 'node:path';
import type { ModelSection, RunConfig } from './schema.js';

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
  return { ...config, model, dataset };
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
