/**
 * The README and docs/ stay true to the code:
 * - docs/configs.md is what scripts/gen-config-docs.mjs writes from this build's schemas;
 * - a code block marked `<!-- runnable: FILE -->` is FILE verbatim (a .ts example with its relative
 *   imports written as the package's entry points), and a test under test/ runs FILE;
 * - every list of trainers (the README's table, docs/cli.md, `comlrl --help`, the demo's
 *   `--trainer` choices) is the trainer registry's;
 * - relative links and their #anchors resolve;
 * - no page carries the project's history or the statements the code no longer supports.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, test } from 'vitest';
import { DEMO_TRAINER_NAMES, DEMO_USAGE } from '../cli/commands/demo.js';
import { main } from '../cli/main.js';
import { registeredTrainerSections } from '../src/config/trainers.js';
import '../trainers/builtin.js';
import { trainerNames } from '../trainers/registry.js';

const ROOT = resolve(import.meta.dirname, '..');

/** README.md and every page under docs/, as paths relative to the repository root. */
function pages(): string[] {
  const out = ['README.md'];
  const walk = (dir: string): void => {
    for (const e of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(dir, e.name));
      else if (e.name.endsWith('.md')) out.push(join(dir, e.name));
    }
  };
  walk('docs');
  return out.sort();
}

const read = (rel: string): string => readFileSync(join(ROOT, rel), 'utf8');

/** The lines of `text` from the heading `heading` to the next heading of its level or above. */
function section(text: string, heading: string): string {
  const lines = text.split('\n');
  const at = lines.findIndex((l) => l === heading);
  expect(at, `heading '${heading}'`).toBeGreaterThanOrEqual(0);
  const level = /^#+/.exec(heading)![0].length;
  const end = lines.findIndex((l, i) => i > at && /^#+ /.test(l) && /^#+/.exec(l)![0].length <= level);
  return lines.slice(at, end < 0 ? undefined : end).join('\n');
}

/** GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces as `-`. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

function anchorsOf(text: string): Set<string> {
  const out = new Set<string>();
  let fenced = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const m = fenced ? null : /^#{1,6} (.*)$/.exec(line);
    if (m) out.add(slug(m[1]));
  }
  return out;
}

describe('docs/configs.md', () => {
  test('is what scripts/gen-config-docs.mjs generates from the schemas (run it after changing a schema)', async () => {
    expect(existsSync(join(ROOT, 'dist/cli/schemas.js')), 'dist/: run `npm run build` (npm test does it first)').toBe(true);
    const script = pathToFileURL(join(ROOT, 'scripts', 'gen-config-docs.mjs')).href;
    const { renderConfigDocs } = (await import(script)) as { renderConfigDocs(): Promise<string> };
    const fresh = await renderConfigDocs();
    expect(read('docs/configs.md') === fresh, 'docs/configs.md is stale: npm run build && node scripts/gen-config-docs.mjs').toBe(true);
  }, 180_000);

  test('has a section for every registered trainer', () => {
    const text = read('docs/configs.md');
    for (const t of registeredTrainerSections()) expect(text, t.name).toContain(`\n### \`${t.section}\`\n`);
  });
});

describe('runnable code blocks', () => {
  const MARK = /<!-- runnable: (\S+) -->\n```\w*\n([\s\S]*?)```/g;
  /** A .ts example as a user's script would import it: the package's entry points for its relative imports. */
  const asPublished = (file: string, text: string): string =>
    file.endsWith('.ts')
      ? text.replace("'../src/index.js'", "'comlrl'").replace("'../trainers/index.js'", "'comlrl/trainers'").replace("'../envs/index.js'", "'comlrl/envs'")
      : text;
  const blocks = pages().flatMap((page) => [...read(page).matchAll(MARK)].map((m) => ({ page, file: m[1], body: m[2] })));

  test('the README has its library example among them', () => {
    expect(blocks.filter((b) => b.page === 'README.md').map((b) => b.file)).toContain('examples/readme.ts');
    expect(blocks.length).toBeGreaterThanOrEqual(3);
  });

  for (const { page, file, body } of blocks) {
    test(`${page}: the block marked ${file} is that file, and a test runs it`, () => {
      expect(existsSync(join(ROOT, file)), file).toBe(true);
      expect(body).toBe(asPublished(file, read(file)));
      const runners = readdirSync(join(ROOT, 'test')).filter((f) => f.endsWith('.test.ts') && f !== 'docs.test.ts' && read(join('test', f)).includes(file.replace(/^examples\//, '')));
      expect(runners, `no test under test/ names ${file}`).not.toEqual([]);
    });
  }
});

describe('trainer lists equal the registry', () => {
  const names = trainerNames();

  test('the registry holds the nine built-in trainers', () => {
    expect(names).toEqual(['magrpo', 'collm-dc', 'collm-cc', 'mareinforce', 'maremax', 'marloo', 'centralized-magrpo', 'madpo', 'marlhf']);
  });

  test("the README's trainer table: one row per registered trainer, its section, a docs page that names it", () => {
    const table = section(read('README.md'), '## Trainers')
      .split('\n')
      .filter((l) => /^\| `/.test(l));
    expect(table.map((l) => /^\| `([^`]+)`/.exec(l)![1])).toEqual(names);
    for (const [i, spec] of registeredTrainerSections().entries()) {
      const row = table[i];
      expect(row, spec.name).toContain(`\`${spec.section}:\``);
      const link = /\]\((docs\/trainers\/[^)]+\.md)\)/.exec(row)?.[1];
      expect(link, `${spec.name}: a link to docs/trainers/`).toBeDefined();
      expect(read(link!), `${link} names ${spec.label}`).toContain(spec.label);
    }
  });

  test("docs/cli.md: the demo's --trainer choices and the trainer sections", () => {
    const cli = read('docs/cli.md');
    const demo = /`comlrl demo \[--trainer ([^\]]+)\]/.exec(cli)?.[1];
    expect(demo?.split('\\|')).toEqual(names);
    const sectionsLine = cli.split('\n').find((l) => l.includes('# exactly one trainer section:'));
    expect(sectionsLine).toBeDefined();
    for (const spec of registeredTrainerSections()) {
      expect(sectionsLine, spec.section).toMatch(new RegExp(`\\b${spec.section}\\b`));
      expect(section(cli, '## Config files'), spec.section).toContain(`\`${spec.section}\``);
    }
  });

  test('`comlrl --help` lists every registered trainer', async () => {
    const out: string[] = [];
    expect(await main(['--help'], { out: (l) => out.push(l), err: () => undefined })).toBe(0);
    const line = out.join('\n').split('\n').find((l) => l.startsWith('trainers: '));
    expect(line?.slice('trainers: '.length).split(', ')).toEqual(names);
  });

  test("the demo's --trainer choices", () => {
    expect([...DEMO_TRAINER_NAMES]).toEqual(names);
    expect(DEMO_USAGE).toContain(`--trainer ${names.join('|')}]`);
  });
});

describe('links', () => {
  for (const page of pages()) {
    test(`${page}: relative links and anchors resolve`, () => {
      const text = read(page).replace(/```[\s\S]*?```/g, '');
      const broken: string[] = [];
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target)) continue;
        const [file, anchor] = target.split('#');
        const path = file === '' ? page : relative(ROOT, resolve(ROOT, dirname(page), file));
        if (!existsSync(join(ROOT, path))) {
          broken.push(`${target} (no file ${path})`);
          continue;
        }
        if (anchor !== undefined && path.endsWith('.md') && !anchorsOf(read(path)).has(anchor)) broken.push(`${target} (no heading #${anchor} in ${path})`);
      }
      expect(broken).toEqual([]);
    });
  }
});

describe('no history, no statements the code no longer supports', () => {
  const STALE: readonly [RegExp, string][] = [
    [/\bsession \d+/i, "the project's sessions"],
    [/\b(?:earlier|older) (?:run|figure|version|form)s?\b/i, 'earlier figures'],
    [/ports \[?CoMLRL\]?(?:\([^)]*\))? 1\.3\.6/, 'comlrl targets CoMLRL 1.4.x'],
    [/PyTorch 1\.13/, 'a table measured against PyTorch 1.13'],
    [/~\s?400 lines/, "the torch addon's size"],
    [/use the `tensorflow` backend[^.]*speed|for speed, use/i, 'torch is the faster native backend'],
    [/auto: tensorflow (?:once|when)/, '`auto` picks torch first'],
  ];
  for (const page of pages()) {
    test(page, () => {
      const text = read(page);
      const found = STALE.filter(([re]) => re.test(text)).map(([re, why]) => `${re.source}: ${why}`);
      expect(found).toEqual([]);
    });
  }

  test('README.md is at most 300 lines', () => {
    expect(read('README.md').split('\n').length).toBeLessThanOrEqual(300);
  });
});
