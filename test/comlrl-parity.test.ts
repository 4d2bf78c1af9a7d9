/**
 * comlrl's trainers against CoMLRL's own updates: scripts/comlrl-parity.mjs runs every public case
 * of ../shared/vectors/comlrl-trainers/ (one update of CoMLRL's MAGRPOTrainer, IACTrainer and
 * MAACTrainer on fixed completions, everything CoMLRL computed recorded) through the matching
 * comlrl trainer with the CoMLRL-compatible switches, and must find every quantity within the
 * vectors' measured float32 tolerances. Two checks show the comparison has teeth: a case whose
 * recorded advantage is moved by 1e-3 fails on that quantity, and comlrl's own defaults (every
 * generated token scored, CoLLM's paper-aligned update) fail the cases where they differ.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { REPO_ROOT, sharedPath, sharedSkipNote } from './shared-fixtures.js';

const VECTORS = 'vectors/comlrl-trainers';
const dir = sharedPath(VECTORS);
const files = (() => {
  try {
    return readdirSync(dir).filter((f) => f.endsWith('.json')).sort().map((f) => path.join(dir, f));
  } catch {
    return [];
  }
})();
const missing = files.length === 0 ? sharedSkipNote(VECTORS, 'every CoMLRL trainer case within tolerance') : null;
if (missing) console.warn(`[shared] skipped: ${missing}`);

const work = mkdtempSync(path.join(tmpdir(), 'comlrl-parity-test-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

// The cases' 151,669-row head makes the pure-JS cpu backend slow (6 min for the six cases here);
// torch (set up in CI) runs them in about a third of that, and is within tolerance too.
const backend = existsSync(path.join(REPO_ROOT, '.torch', 'build', 'setup.json')) ? 'torch' : 'cpu';

function parity(args: string[]): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, [path.join(REPO_ROOT, 'scripts', 'comlrl-parity.mjs'), '--backend', backend, '--work', path.join(work, 'models'), ...args], { encoding: 'utf8', cwd: REPO_ROOT });
  return { status: r.status, out: `${r.stdout}\n${r.stderr}` };
}

describe('CoMLRL parity (scripts/comlrl-parity.mjs)', () => {
  test.skipIf(missing !== null)('every public case is within tolerance with the CoMLRL-compatible switches', { timeout: 1_800_000 }, () => {
    const r = parity(files);
    console.log(r.out);
    expect(files.length).toBeGreaterThanOrEqual(6);
    expect(r.out).toContain(`${files.length}/${files.length} cases within tolerance`);
    expect(r.status).toBe(0);
  });

  test.skipIf(missing !== null)('a recorded advantage moved by 1e-3 is found, named and fails the case', { timeout: 600_000 }, () => {
    const file = files.find((f) => path.basename(f) === 'magrpo-1.json') as string;
    const v = JSON.parse(readFileSync(file, 'utf8'));
    v.magrpo.losses[0].advantages[1] += 1e-3;
    const changed = path.join(work, 'magrpo-1-moved.json');
    writeFileSync(changed, JSON.stringify(v));
    const r = parity([changed]);
    expect(r.status).toBe(1);
    expect(r.out).toMatch(/^advantages\s+6\s+1\.00e-3\s.*NO/m);
    expect(r.out).toContain('0/1 cases within tolerance');
  });

  test.skipIf(missing !== null)("comlrl's own defaults differ where the differences table says: MAGRPO's scored tokens, CoLLM-CC's update order", { timeout: 900_000 }, () => {
    const pick = (name: string) => files.find((f) => path.basename(f) === name) as string;
    const r = parity(['--defaults', pick('magrpo-1.json'), pick('maac-1.json')]);
    expect(r.status).toBe(1);
    expect(r.out).toContain('0/2 cases within tolerance');
    // MAGRPO scores every generated token (the end token, no padding): CoMLRL's rows are not scored.
    expect(r.out).toMatch(/^scored tokens\s.*NO/m);
    // CoLLM-CC steps its critic once per joint minibatch, after both actors: another step order.
    expect(r.out).toMatch(/^optimizer steps \(order\)\s.*NO/m);
  });
});
