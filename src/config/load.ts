/**
 * Reading config files (YAML or JSON) and `--set key.path=value` overrides.
 */
import { readFileSync } from 'node:fs';
import { parseDocument } from 'yaml';
import { ConfigError, parseRunConfig, type RunConfig, type RunConfigSchemas } from './schema.js';

/**
 * Reads a YAML or JSON config file into a plain object (JSON is YAML, so one parser serves both).
 * @throws ConfigError naming the file and the line of a syntax error.
 */
export function readConfigFile(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError([{ key: '(file)', message: `cannot read ${file}: ${(err as Error).message}` }]);
  }
  return parseConfigText(text, file);
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
 * Parses one `key.path=value` override. The value is read as a YAML scalar or flow collection, so
 * `lr=1e-5` is a number, `top_k=null` null, `flag=true` a boolean, `agents=[a, b]` a list and
 * `name="007"` the string 007.
 * @throws ConfigError naming the override when it has no `=` or an empty key segment.
 */
export function parseOverride(text: string): { path: string[]; value: unknown } {
  const eq = text.indexOf('=');
  if (eq <= 0) throw new ConfigError([{ key: text, message: 'an override must look like key.path=value (e.g. magrpo.num_turns=2)' }], '--set');
  const key = text.slice(0, eq).trim();
  const path = key.split('.');
  if (path.some((p) => p === '')) throw new ConfigError([{ key, message: 'empty segment in the key path' }], '--set');
  const rawValue = text.slice(eq + 1);
  const doc = parseDocument(rawValue);
  // Something YAML cannot read as one value (e.g. "a: b" or stray quotes) is taken as plain text.
  const value: unknown = doc.errors.length > 0 ? rawValue : (doc.toJS() as unknown);
  return { path, value: value === undefined ? null : value };
}

/**
 * Applies `key.path=value` overrides to a config document (a copy is returned). Intermediate
 * sections are created when missing; descending into a non-mapping value is an error naming the key.
 */
export function applyOverrides(doc: Record<string, unknown>, overrides: readonly string[]): Record<string, unknown> {
  const out = structuredClone(doc);
  for (const text of overrides) {
    const { path, value } = parseOverride(text);
    let node: Record<string, unknown> = out;
    for (let i = 0; i < path.length - 1; i++) {
      const seg = path[i];
      const next = node[seg];
      if (next === undefined || next === null) {
        node[seg] = {};
      } else if (typeof next !== 'object' || Array.isArray(next)) {
        throw new ConfigError([{ key: path.slice(0, i + 1).join('.'), message: `is ${JSON.stringify(next)}, not a section; cannot set ${path.join('.')}` }], '--set');
      }
      node = node[seg] as Record<string, unknown>;
    }
    node[path[path.length - 1]] = value;
  }
  return out;
}

/** Reads, overrides and validates a config file in one call. */
export function loadRunConfig(file: string, overrides: readonly string[], schemas: RunConfigSchemas): RunConfig {
  const doc = applyOverrides(readConfigFile(file), overrides);
  return parseRunConfig(doc, schemas, file);
}
