/**
 * The suite stands alone without ../shared: committed copies stay equal to the shared folder's
 * files, the helper finds the folder (or its override) and skips with a note, and no test reaches
 * the folder except through test/shared-fixtures.ts.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  REPO_ROOT,
  SHARED_DIR_ENV,
  fixturePath,
  readSharedJson,
  sharedDir,
  sharedPath,
  sharedSkipNote,
} from './shared-fixtures.js';

// committed copy (from the repository root) → the shared folder's original
const COPIES: Array<[string, string]> = [
  [path.relative(REPO_ROOT, fixturePath('tldr/vectors.json')), 'vectors/tldr.json'],
  [path.relative(REPO_ROOT, fixturePath('housebuild/vectors.json')), 'vectors/housebuild.json'],
  ['data/housebuild/data.json', 'data/housebuild/data.json'],
  ['data/housebuild/NOTICE.md', 'data/housebuild/NOTICE.md'],
];

describe('committed copies of shared files', () => {
  for (const [copy, original] of COPIES) {
    it(`${copy} equals the shared folder's ${original}`, (ctx) => {
      const source = sharedPath(original);
      let expected: Buffer;
      try {
        expected = readFileSync(source);
      } catch {
        return ctx.skip(sharedSkipNote(original, `that ${copy} is still a byte-for-byte copy of it`));
      }
      expect(readFileSync(path.join(REPO_ROOT, copy)).equals(expected), `${copy} differs from ${source}: copy it again`).toBe(true);
    });
  }
});

describe('shared folder helper', () => {
  const saved = process.env[SHARED_DIR_ENV];
  afterEach(() => {
    if (saved === undefined) delete process.env[SHARED_DIR_ENV];
    else process.env[SHARED_DIR_ENV] = saved;
  });

  it('defaults to ../shared beside the repository; COMLRL_SHARED_DIR overrides it', () => {
    expect(sharedDir({})).toBe(path.resolve(REPO_ROOT, '..', 'shared'));
    expect(sharedDir({ [SHARED_DIR_ENV]: '' })).toBe(path.resolve(REPO_ROOT, '..', 'shared'));
    expect(sharedDir({ [SHARED_DIR_ENV]: 'some/where' })).toBe(path.resolve('some/where'));
  });

  it('reads a present file and gives a note naming the path and the skipped checks for a missing one', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'comlrl-shared-'));
    try {
      writeFileSync(path.join(dir, 'v.json'), '{"cases":[1,2]}');
      process.env[SHARED_DIR_ENV] = dir;
      expect(readSharedJson<{ cases: number[] }>('v.json', 'x')).toEqual({ present: true, value: { cases: [1, 2] } });
      const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
      const missing = readSharedJson('vectors/none.json', 'the none rewards');
      const note = `needs ${path.join(dir, 'vectors/none.json')} (not found; set ${SHARED_DIR_ENV} to the shared folder): would check the none rewards`;
      expect(missing).toEqual({ present: false, note });
      expect(warn).toHaveBeenCalledWith(`[shared] skipped: ${note}`);
    } finally {
      vi.restoreAllMocks();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('no test reaches ../shared except through test/shared-fixtures.ts', () => {
    // A path literal into ../shared (`'../../shared/…'`, `'..', 'shared'`) in a test would fail to
    // load on a clone; the helper's fixtures and skip notes are the way.
    const literal = /['"`][^'"`\n]*\.\.\/shared\b|['"`]\.\.['"`]\s*,\s*['"`]shared['"`]/;
    const offenders: string[] = [];
    const walk = (dir: string): void => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const file = path.join(dir, entry.name);
        if (entry.isDirectory()) {
          if (entry.name !== 'fixtures') walk(file);
        } else if (entry.name.endsWith('.ts') && entry.name !== 'shared-fixtures.ts' && entry.name !== 'shared-fixtures.test.ts') {
          readFileSync(file, 'utf8').split('\n').forEach((line, i) => {
            if (literal.test(line)) offenders.push(`${path.relative(REPO_ROOT, file)}:${i + 1}: ${line.trim()}`);
          });
        }
      }
    };
    walk(path.join(REPO_ROOT, 'test'));
    expect(offenders).toEqual([]);
  });
});
