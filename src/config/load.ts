/**
 * Reading config files (YAML or JSON) and `--set key.path=value` overrides.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseDocument } from 'yaml';
import { decodeUtf8, describeUtf8Problem } from '../data/utf8.js';
import { resolveDocumentPaths, resolveRunConfigPaths } from './paths.js';
import { ConfigError, parseRunConfig, type RunConfig, type RunConfigSchemas } from './schema.js';

/**
 * Reads a YAML or JSON config file into a plain object (JSON is YAML, so one parser serves both).
 * @throws ConfigError naming the file and the line of a syntax error.
 */
export function readConfigFile(file: string): Record<string, unknown> {
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (err) {
    throw new ConfigError([{ key: '(file)', message: `cannot read ${file}: ${(err as Error).message}` }]);
  }
  // Decoded strictly: a Latin-1 file would otherwise read as replacement characters (a garbled key).
  const decoded = decodeUtf8(bytes);
  if ('problem' in decoded) throw new ConfigError([{ key: '(file)', message: `${file}: ${describeUtf8Problem(decoded.problem)}` }], file);
  return parseConfigText(decoded.text, file);
}

/** Parses YAML/JSON config text; `source` names it in errors. */
export function parseConfigText(text: string, source = '(config)'): Record<string, unknown> {
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(doc.errors.map((e) => ({ key: '(syntax)', message: e.message.split('\n')[0] })), source);
  }
  const value: unknown = doc.toJS();
  if (value === null || value === undefined) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new ConfigError([{ key: '(top level)', message: 'the config must be a mapping of sections' }], source);
  }
  return value as Record<string, unknown>;
}

/**
 * Keys whose schema wants a string: an override value that YAML reads as something else (a split
 * spec such as `[:5]` is a YAML list) is taken as the raw text instead.
 */
export const STRING_OVERRIDE_KEYS: ReadonlySet<string> = new Set(['dataset.train_split', 'dataset.eval_split']);

/** One parsed `--set` override. */
export interface ParsedOverride {
  readonly path: string[];
  readonly value: unknown;
  /**
   * Set for `key=null` (also `key=~` and `key=`): the key is removed, so its default (or an
   * alternative key such as `model.agents` for `model.agent_model`) applies. An explicit
   * `key=!!null` keeps a null value (e.g. `magrpo.top_k=!!null`: the checkpoint's top-k, else 50, as CoMLRL's None).
   */
  readonly unset?: true;
}

/**
 * Parses one `key.path=value` override. The value is read as a YAML scalar or flow collection, so
 * `lr=1e-5` is a number, `top_k=null` null, `flag=true` a boolean, `agents=[a, b]` a list and
 * `name="007"` the string 007. For {@link STRING_OVERRIDE_KEYS} a non-string value falls back to
 * the raw text (`dataset.train_split=[:5]` is the string `[:5]`).
 * @throws ConfigError naming the override when it has no `=` or an empty key segment.
 */
export function parseOverride(text: string): ParsedOverride {
  const eq = text.indexOf('=');
  if (eq <= 0) throw new ConfigError([{ key: text, message: 'an override must look like key.path=value (e.g. magrpo.num_turns=2)' }], '--set');
  const key = text.slice(0, eq).trim();
  const path = key.split('.');
  if (path.some((p) => p === '')) throw new ConfigError([{ key, message: 'empty segment in the key path' }], '--set');
  const rawValue = text.slice(eq + 1);
  const doc = parseDocument(rawValue);
  // Something YAML cannot read as one value (e.g. "a: b" or stray quotes) is taken as plain text.
  let value: unknown = doc.errors.length > 0 ? rawValue : (doc.toJS() as unknown);
  if (value === undefined) value = null;
  if (value === null) return /^\s*!!null\b/.test(rawValue) ? { path, value: null } : { path, value: null, unset: true };
  if (STRING_OVERRIDE_KEYS.has(path.join('.')) && typeof value !== 'string') value = rawValue.trim();
  return { path, value };
}

/**
 * Applies `key.path=value` overrides to a config document (a copy is returned). Intermediate
 * sections are created when missing; descending into a non-mapping value is an error naming the key.
 * `key=null` removes the key (see {@link ParsedOverride.unset}).
 */
export function applyOverrides(doc: Record<string, unknown>, overrides: readonly string[]): Record<string, unknown> {
  const out = structuredClone(doc);
  for (const text of overrides) {
    const { path, value, unset } = parseOverride(text);
    let node: Record<string, unknown> | undefined = out;
    for (let i = 0; i < path.length - 1 && node; i++) {
      const seg = path[i];
      const next: unknown = node[seg];
      if (next === undefined || next === null) {
        if (unset) {
          node = undefined;
          break;
        }
        node[seg] = {};
      } else if (typeof next !== 'object' || Array.isArray(next)) {
        throw new ConfigError([{ key: path.slice(0, i + 1).join('.'), message: `is ${JSON.stringify(next)}, not a section; cannot set ${path.join('.')}` }], '--set');
      }
      node = node[seg] as Record<string, unknown>;
    }
    if (!node) continue;
    if (unset) delete node[path[path.length - 1]];
    else node[path[path.length - 1]] = value;
  }
  return out;
}

/** Options of {@link loadRunConfig}. */
export interface LoadRunConfigOptions {
  /**
   * The folder the file's relative model and data paths are relative to (default: the file's
   * own folder). A run directory's config.yaml written before paths were made absolute holds
   * them relative to the directory the run was started from: its reader passes that.
   */
  readonly baseDir?: string;
}

/**
 * Reads, overrides and validates a config file in one call (`schemas`: see {@link parseRunConfig}).
 * Relative model and data paths (`model.agent_model`, `model.agents`, `model.critic_model`,
 * `model.critics`, `model.reference_model`, a trainer section's own such as
 * `marlhf.reward_model_name`, `dataset.path`, `dataset.eval_path`) are made
 * absolute: those in the file against its folder (see {@link LoadRunConfigOptions.baseDir}),
 * those of `--set` overrides against the working directory.
 */
export function loadRunConfig(file: string, overrides: readonly string[], schemas?: RunConfigSchemas, options: LoadRunConfigOptions = {}): RunConfig {
  const fromFile = resolveDocumentPaths(readConfigFile(file), options.baseDir ?? dirname(resolve(file)));
  const doc = applyOverrides(fromFile, overrides);
  return resolveRunConfigPaths(parseRunConfig(doc, schemas, file), process.cwd());
}
