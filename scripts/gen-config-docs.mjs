#!/usr/bin/env node
/**
 * Writes docs/configs.md, the reference of every run-config key, from the config schemas themselves:
 * the keys, what each accepts, its default and whether it may be left out come from the zod schemas
 * (the compiled ones under dist/, so run `npm run build` first); each key's description is the doc
 * comment written on it in the TypeScript source, read with the TypeScript compiler. The sections
 * are the run config's own (src/config/schema.ts), one per registered trainer (the trainer
 * registry) and one `task:` section per registered task with options (the task registry).
 *
 *   npm run build && node scripts/gen-config-docs.mjs          # writes docs/configs.md
 *   node scripts/gen-config-docs.mjs --stdout                  # prints it instead
 *
 * test/docs.test.ts runs `renderConfigDocs()` and fails while the committed page differs from it.
 */
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DIST = join(ROOT, 'dist');
/** The page this script writes, relative to the repository root. */
export const CONFIG_DOCS_PAGE = 'docs/configs.md';

/** The compiled modules whose exported zod schemas may carry doc comments, as paths under dist/. */
function schemaModules() {
  const found = ['src/config/schema.js'];
  for (const [dir, file] of [['trainers', 'config.js'], ['envs', 'spec.js']]) {
    for (const sub of readdirSync(join(DIST, dir), { withFileTypes: true })) {
      if (sub.isDirectory() && existsSync(join(DIST, dir, sub.name, file))) found.push(`${dir}/${sub.name}/${file}`);
    }
  }
  return found.sort();
}

const isZod = (v) => v !== null && typeof v === 'object' && '_zod' in v;
const defOf = (s) => s._zod.def;

/** Strips optional / nullable / default / pipe wrappers: the inner schema and what they said. */
function unwrap(schema) {
  let s = schema;
  let optional = false;
  let nullable = false;
  let hasDefault = false;
  let defaultValue;
  for (;;) {
    const d = defOf(s);
    if (d.type === 'optional') {
      optional = true;
      s = d.innerType;
    } else if (d.type === 'nullable') {
      nullable = true;
      s = d.innerType;
    } else if (d.type === 'default' || d.type === 'prefault') {
      if (!hasDefault) defaultValue = typeof d.defaultValue === 'function' ? d.defaultValue() : d.defaultValue;
      hasDefault = true;
      s = d.innerType;
    } else if (d.type === 'pipe') {
      // A preprocess (a transform into a schema) accepts what its output schema accepts.
      s = defOf(d.in).type === 'transform' ? d.out : d.in;
    } else return { inner: s, optional, nullable, hasDefault, defaultValue };
  }
}

/** What a schema accepts, in words, from its definition (used where its own message says less). */
function describeDef(schema) {
  const { inner, nullable } = unwrap(schema);
  const d = defOf(inner);
  let text;
  switch (d.type) {
    case 'number':
      text = 'a number';
      break;
    case 'string':
      text = 'a string';
      break;
    case 'boolean':
      text = 'true or false';
      break;
    case 'enum':
      text = Object.values(d.entries).map((v) => `'${v}'`).join(', ');
      break;
    case 'literal':
      text = d.values.map((v) => JSON.stringify(v)).join(', ');
      break;
    case 'array':
      text = `a list of (${describeDef(d.element)})`;
      break;
    case 'tuple':
      text = `[${d.items.map(describeDef).join(', ')}]`;
      break;
    case 'union':
      text = d.options.map(describeDef).join(' or ');
      break;
    case 'record':
      text = 'a mapping';
      break;
    case 'object':
      text = 'a mapping (keys below)';
      break;
    case 'unknown':
    case 'any':
      text = 'anything';
      break;
    default:
      text = d.type;
  }
  return nullable ? `${text}, or null` : text;
}

/**
 * What a key accepts: the schema's own message for a value of the wrong type, which names the
 * bounds and choices (`num_generations must be an integer >= 2`), else a description of its type.
 */
function accepts(key, schema) {
  const { inner, nullable } = unwrap(schema);
  if (defOf(inner).type === 'object') return 'a mapping (keys below)';
  const r = inner.safeParse(Symbol('probe'));
  const message = r.success ? '' : (r.error.issues[0]?.message ?? '');
  const at = message.indexOf(' must be ');
  let text = at >= 0 ? message.slice(at + ' must be '.length) : describeDef(inner);
  if (at < 0 && message.includes(' must ')) text = message.slice(message.indexOf(' must ') + ' must '.length);
  if (nullable && !/\bnull\b/.test(text)) text += ', or null';
  return text;
}

/** A default value as a config file would write it. */
function formatDefault(u) {
  if (!u.hasDefault) return u.optional ? '(unset)' : '(required)';
  return `\`${JSON.stringify(u.defaultValue)}\``;
}

const cell = (text) => text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ').trim();

/**
 * The TypeScript doc comments of a schema's keys and of its nested objects' keys, by dotted path,
 * for each root `{ module, name }` (an export of a compiled module under dist/).
 */
async function docComments(roots) {
  const ts = (await import('typescript')).default;
  const probe = join(ROOT, '__config_docs_probe__.ts');
  const lines = ["import type { z } from 'zod';"];
  roots.forEach((r, i) => {
    lines.push(`import * as m${i} from './${r.module}';`);
    lines.push(`export type T${i} = z.input<typeof m${i}.${r.name}>;`);
  });
  const source = lines.join('\n');
  const options = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  host.getSourceFile = (f, lang, ...rest) => (f === probe ? ts.createSourceFile(f, source, lang) : getSourceFile(f, lang, ...rest));
  host.fileExists = (f) => f === probe || fileExists(f);
  const program = ts.createProgram([probe], options, host);
  const checker = program.getTypeChecker();
  const aliases = program.getSourceFile(probe).statements.filter(ts.isTypeAliasDeclaration);
  const objectPart = (type) => {
    const t = checker.getNonNullableType(type);
    const parts = (t.isUnion() ? t.types : [t]).filter((x) => x.flags & ts.TypeFlags.Object && !checker.isArrayType(x) && !checker.isTupleType(x));
    return parts.length === 1 ? parts[0] : undefined;
  };
  const collect = (type, prefix, out) => {
    for (const p of checker.getPropertiesOfType(type)) {
      const path = prefix ? `${prefix}.${p.name}` : p.name;
      const doc = ts.displayPartsToString(p.getDocumentationComment(checker)).replace(/\s+/g, ' ').trim();
      if (doc) out.set(path, doc);
      const inner = objectPart(checker.getTypeOfSymbol(p));
      if (inner && prefix.split('.').length < 3) collect(inner, path, out);
    }
    return out;
  };
  return aliases.map((a) => collect(checker.getTypeAtLocation(a.name), '', new Map()));
}

/** The table of one object schema's keys, then a subsection per nested object key. */
function renderObject(title, anchorKey, schema, docs, prefix, level, intro, seen) {
  const inner = unwrap(schema).inner;
  const shape = defOf(inner).shape;
  const out = [`${'#'.repeat(level)} ${title}`, ''];
  if (intro) out.push(intro, '');
  // A schema met again (model.critic_lora takes model.lora's keys) points at its first table.
  const first = seen.get(inner);
  if (first !== undefined) return [...out, `The keys of [${first}](#${first.replace(/[^a-z0-9_-]/g, '')}).`, ''];
  seen.set(inner, title);
  out.push('| key | accepts | default | what it does |', '|---|---|---|---|');
  const nested = [];
  for (const [key, field] of Object.entries(shape)) {
    const u = unwrap(field);
    const path = prefix ? `${prefix}.${key}` : key;
    if (defOf(u.inner).type === 'object') nested.push([key, field, path]);
    const objectBranch = defOf(u.inner).type === 'union' && defOf(u.inner).options.some((o) => defOf(unwrap(o).inner).type === 'object');
    if (objectBranch) nested.push([key, defOf(u.inner).options.find((o) => defOf(unwrap(o).inner).type === 'object'), path]);
    out.push(`| \`${key}\` | ${cell(accepts(path, field))} | ${cell(formatDefault(u))} | ${cell(docs.get(path) ?? '')} |`);
  }
  out.push('');
  for (const [key, field, path] of nested) {
    out.push(...renderObject(`\`${anchorKey}.${key}\``, `${anchorKey}.${key}`, field, docs, path, Math.min(level + 1, 4), '', seen));
  }
  return out;
}

/** docs/configs.md as this build's schemas and registries give it. */
export async function renderConfigDocs() {
  const load = (rel) => import(pathToFileURL(join(DIST, rel)).href);
  // The CLI's config module registers the built-in tasks and trainers, as `comlrl train` does.
  await load('cli/schemas.js');
  const { RUN_CONFIG_BASE_SCHEMA } = await load('src/config/schema.js');
  const { registeredTrainerSections, sectionRoles } = await load('src/config/trainers.js');
  const { describeRoles } = await load('src/config/roles.js');
  const { registeredTasks } = await load('src/tasks/registry.js');

  // Each schema's export, so its doc comments can be read from the source.
  const exportsOf = new Map();
  for (const rel of schemaModules()) {
    for (const [name, value] of Object.entries(await load(rel))) {
      if (isZod(value) && !exportsOf.has(value)) exportsOf.set(value, { module: rel, name });
    }
  }
  const trainers = registeredTrainerSections();
  const tasks = registeredTasks().filter((t) => t.options !== undefined && defOf(unwrap(t.options).inner).type === 'object');
  const schemas = [RUN_CONFIG_BASE_SCHEMA, ...trainers.map((t) => t.schema), ...tasks.map((t) => t.options)];
  const roots = schemas.map((s) => exportsOf.get(s));
  const known = roots.filter((r) => r !== undefined);
  const docList = await docComments(known);
  const docsOf = (s) => {
    const r = exportsOf.get(s);
    return r === undefined ? new Map() : docList[known.indexOf(r)];
  };

  const baseShape = defOf(RUN_CONFIG_BASE_SCHEMA).shape;
  const seen = new Map();
  const baseDocs = docsOf(RUN_CONFIG_BASE_SCHEMA);
  const out = [
    '# Config reference',
    '',
    '<!-- Generated by scripts/gen-config-docs.mjs from the config schemas: do not edit by hand.',
    '     After changing a schema or its doc comments: npm run build && node scripts/gen-config-docs.mjs -->',
    '',
    'Every key a run config (`comlrl train --config FILE`, `comlrl eval`, `--set key=value`) accepts, with',
    'what it accepts, its default and what it does, generated from the schemas that parse it. A config',
    'has the sections below and exactly one trainer section; an unknown key, a bad value and a value the',
    'run would ignore are errors naming the key. "(unset)": the key may be left out (its meaning then',
    'is in the description); "(required)": it may not. How configs, runs and checkpoints work:',
    '[cli.md](cli.md).',
    '',
    '## Top-level keys',
    '',
    '| key | accepts | default | what it does |',
    '|---|---|---|---|',
  ];
  for (const [key, field] of Object.entries(baseShape)) {
    const u = unwrap(field);
    const isSection = defOf(u.inner).type === 'object';
    const what = key === 'task' ? 'The task\'s options: see [task](#task).' : (baseDocs.get(key) ?? '');
    out.push(`| \`${key}\` | ${isSection ? `a mapping: see [${key}](#${key})` : cell(accepts(key, field))} | ${cell(formatDefault(u))} | ${cell(what)} |`);
  }
  out.push('| a trainer section | a mapping: see [Trainer sections](#trainer-sections) | (required) | Exactly one: the trainer that runs. |', '');
  for (const [key, field] of Object.entries(baseShape)) {
    if (defOf(unwrap(field).inner).type !== 'object') continue;
    out.push(...renderObject(`\`${key}\``, key, field, baseDocs, key, 2, '', seen));
  }

  out.push('## Trainer sections', '', 'One per registered trainer (`comlrl --help` lists them); a config has exactly one.', '');
  for (const t of trainers) {
    const aliases = t.aliases?.length ? `; CoMLRL's \`${t.aliases.join('`, `')}:\` is accepted too` : '';
    // The models a run loads, from the trainer's roles declaration (src/config/roles.ts).
    const roles = describeRoles(sectionRoles(t), t.section).map((line) => `- ${line}`).join('\n');
    out.push(...renderObject(`\`${t.section}\``, t.section, t.schema, docsOf(t.schema), '', 3, `${t.label}: \`comlrl demo --trainer ${t.name}\`${aliases}. The models a run loads (its roles):\n\n${roles}`, seen));
  }

  out.push('## `task`', '', "Options of the task that `dataset.task` names, checked by that task's own schema; tasks without options take none.", '');
  for (const t of tasks) {
    out.push(...renderObject(`\`task\` for \`dataset.task: ${t.name}\``, 'task', t.options, docsOf(t.options), '', 3, '', seen));
  }
  return `${out.join('\n').replace(/\n{3,}/g, '\n\n').trimEnd()}\n`;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  if (!existsSync(join(DIST, 'cli', 'schemas.js'))) {
    process.stderr.write('gen-config-docs: dist/ is missing: run `npm run build` first\n');
    process.exit(1);
  }
  const text = await renderConfigDocs();
  if (process.argv.includes('--stdout')) process.stdout.write(text);
  else {
    writeFileSync(join(ROOT, CONFIG_DOCS_PAGE), text);
    process.stderr.write(`gen-config-docs: wrote ${relative(process.cwd(), join(ROOT, CONFIG_DOCS_PAGE))}\n`);
  }
}
