/**
 * Architecture rules that code review alone does not keep: the import graph of the package's
 * TypeScript (src, cli, trainers, envs, rewards) has no cycles and src never imports upward; the
 * application layer (cli, trainers) reads typed config values, never casts or re-parses them.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, test } from 'vitest';

const ROOT = resolve(import.meta.dirname, '..');
const LAYERS = ['src', 'cli', 'trainers', 'envs', 'rewards'];

function tsFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...tsFiles(p));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

/** Relative import / export-from / dynamic import specifiers of a file, resolved to repo paths. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specs = new Set<string>();
  const re = /(?:^|[\s;])(?:import|export)\s[^'"`;]*?from\s*['"]([^'"]+)['"]|(?:^|[\s;])import\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/gm;
  for (const m of text.matchAll(re)) {
    const spec = m[1] ?? m[2] ?? m[3];
    if (spec && spec.startsWith('.')) specs.add(spec);
  }
  return [...specs].map((s) => relative(ROOT, resolve(dirname(file), s.replace(/\.js$/, '.ts'))));
}

const files = LAYERS.flatMap((l) => tsFiles(join(ROOT, l)));
const graph = new Map(files.map((f) => [relative(ROOT, f), importsOf(f)]));

describe('import graph', () => {
  test('the parser sees the imports (sanity)', () => {
    expect(graph.get('cli/training/prepare.ts')).toContain('src/config/schema.ts');
    expect(graph.size).toBeGreaterThan(100);
  });

  test('src never imports from cli, trainers, envs, rewards or bench', () => {
    const upward = [...graph].flatMap(([f, deps]) =>
      f.startsWith('src/') ? deps.filter((d) => /^(cli|trainers|envs|rewards|bench)\//.test(d)).map((d) => `${f} -> ${d}`) : [],
    );
    expect(upward).toEqual([]);
  });

  test('every relative import resolves to a file', () => {
    const missing = [...graph].flatMap(([f, deps]) => deps.filter((d) => !graph.has(d) && !d.endsWith('.json')).map((d) => `${f} -> ${d}`));
    expect(missing).toEqual([]);
  });

  test('no import cycles', () => {
    const state = new Map<string, 'open' | 'done'>();
    const cycles: string[] = [];
    const stack: string[] = [];
    const visit = (f: string): void => {
      state.set(f, 'open');
      stack.push(f);
      for (const d of graph.get(f) ?? []) {
        if (!graph.has(d)) continue;
        const s = state.get(d);
        if (s === 'open') cycles.push([...stack.slice(stack.indexOf(d)), d].join(' -> '));
        else if (s === undefined) visit(d);
      }
      stack.pop();
      state.set(f, 'done');
    };
    for (const f of [...graph.keys()].sort()) if (!state.has(f)) visit(f);
    expect(cycles).toEqual([]);
  });
});

describe('typed config in the application layer', () => {
  const app = files.filter((f) => /^(cli|trainers)\//.test(relative(ROOT, f)));
  const grep = (re: RegExp) => app.flatMap((f) => readFileSync(f, 'utf8').split('\n').flatMap((line, i) => (re.test(line) ? [`${relative(ROOT, f)}:${i + 1}: ${line.trim()}`] : [])));

  test('no `as unknown as` casts in cli/, trainers/, envs/ and the task registry', () => {
    expect(grep(/as unknown as/)).toEqual([]);
    const more = files.filter((f) => /^(envs\/|src\/tasks\/|src\/config\/)/.test(relative(ROOT, f)));
    const hits = more.filter((f) => /as unknown as/.test(readFileSync(f, 'utf8'))).map((f) => relative(ROOT, f));
    expect(hits).toEqual([]);
  });
  test('no Number(...) of config values in cli/ and trainers/', () => {
    expect(grep(/Number\((config|tc|cfg|this\.config)\b/)).toEqual([]);
  });
  test('no Record<string, unknown> config sections in cli/ and trainers/', () => {
    expect(grep(/(config|Config|trainerConfig)\s*[:?]?\s*:?\s*(Readonly<)?Record<string, unknown>/)).toEqual([]);
  });
});
