/**
 * The paper bench's plumbing on its QUICK budget (`npm run bench -- paper --quick`), one variant
 * and the arms that need every phase: critic pretraining (two inits), the gate, the λ sweep on
 * held-out seeds and the λ it chooses, a λ-returns run and a MAGRPO run, the tables; then a
 * `--resume` of the same folder, which runs nothing again. Runs the built bench (dist/), as
 * `npm run bench` does: its worker processes are dist/bench/run.js.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, expect, test } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '..');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'paper-quick-'));
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

/** Runs `f` with console.log captured. */
async function captured(f: () => Promise<unknown>): Promise<string> {
  const lines: string[] = [];
  const log = console.log;
  console.log = (...a: unknown[]) => void lines.push(a.map(String).join(' '));
  try {
    await f();
  } finally {
    console.log = log;
  }
  return lines.join('\n');
}

test('quick bench: pretraining, gate, λ sweep, runs and tables into a folder; a resume runs nothing again', async () => {
  const built = path.join(ROOT, 'dist', 'bench', 'paper.js');
  if (!fs.existsSync(built)) throw new Error('dist/bench is missing: run `npm run build` (npm test does it in pretest)');
  const { benchPaper } = (await import(built)) as typeof import('../bench/paper.js');
  const out = path.join(work, 'bench');
  const part = { arms: ['magrpo-k2', 'cc-pre-lambda'], variants: ['sparse H=4'] };
  const first = await captured(() => benchPaper({ quick: true, out, part }));
  const runs = fs.readdirSync(path.join(out, 'runs')).sort();
  // The sweep's three λ on its held-out seed, then the two arms on the claim's seed.
  expect(runs).toEqual(['cc-pre-lambda-0.5__sparse-H4__s101.json', 'cc-pre-lambda-0.8__sparse-H4__s101.json', 'cc-pre-lambda-0.95__sparse-H4__s101.json', 'cc-pre-lambda__sparse-H4__s1.json', 'magrpo-k2__sparse-H4__s1.json']);
  const chosen = JSON.parse(fs.readFileSync(path.join(out, 'choice-lambda.json'), 'utf8')) as { value: number };
  expect([0.5, 0.8, 0.95]).toContain(chosen.value);
  const lambdaRun = JSON.parse(fs.readFileSync(path.join(out, 'runs', 'cc-pre-lambda__sparse-H4__s1.json'), 'utf8')) as { lambda: number; result: { evMc: number[]; curve: number[] } };
  expect(lambdaRun.lambda).toBe(chosen.value);
  expect(lambdaRun.result.evMc.length).toBe(2); // one per flush (2 epochs), turns 2..H
  expect(lambdaRun.result.curve.length).toBe(3);
  expect(first).toMatch(/\| sparse H=4 \| CoLLM-CC, pretrained critic, λ-returns \(λ from the sweep\): λ = 0\.\d+ \| 1 \| 128 \|/);
  expect(first).toMatch(/\| sparse H=4 \| MAGRPO K=2 \| 1 \|/);
  expect(first).toMatch(/gate: (passed|FAILED)/i);
  expect(fs.existsSync(path.join(out, 'paper-bench.png'))).toBe(true);
  const before = runs.map((f) => fs.statSync(path.join(out, 'runs', f)).mtimeMs);

  // A gate file holding the text critic's rows alone, without their arm: a resume fits the other input.
  const gateFile = path.join(out, 'gate__sparse-H4__s1.json');
  const kept = JSON.parse(fs.readFileSync(gateFile, 'utf8')) as { budget: unknown; rows: { arm?: string }[] };
  expect(kept.rows.map((r) => r.arm)).toEqual(['cc-pre', 'cc-pre', 'cc-pre-mt', 'cc-pre-mt']);
  const textRows = kept.rows.filter((r) => r.arm === 'cc-pre').map(({ arm: _arm, ...r }) => r);
  fs.writeFileSync(gateFile, JSON.stringify({ budget: kept.budget, rows: textRows }) + '\n');

  const second = await captured(() => benchPaper({ quick: true, out, part, resume: true }));
  expect(second).toContain('2 of 2 are in');
  // 3 seeds × 2 critic inputs × 2 inits for this part's one variant; seed 1's numeric-m_t fits are fitted again.
  expect(second).toMatch(/gate: 10 of 12 fits are in/);
  const refitted = JSON.parse(fs.readFileSync(gateFile, 'utf8')) as { rows: { arm?: string; init: number }[] };
  expect(refitted.rows.map((r) => [r.arm, r.init])).toEqual([
    [undefined, 0],
    [undefined, 1],
    ['cc-pre-mt', 0],
    ['cc-pre-mt', 1],
  ]);
  expect(second).toMatch(/gate, text \+ numeric m_t: (PASSED|FAILED)/);
  expect(second).toContain(`λ for the λ-returns arms: ${chosen.value}`);
  expect(fs.readdirSync(path.join(out, 'runs')).sort()).toEqual(runs);
  expect(runs.map((f) => fs.statSync(path.join(out, 'runs', f)).mtimeMs)).toEqual(before);
  await expect(benchPaper({ quick: true, out, part })).rejects.toThrow(/already holds a bench's runs: pass --resume/);

  // --report: the folder's gate and tables, nothing run (no pretraining, fit or run).
  const gateBefore = fs.statSync(gateFile).mtimeMs;
  const report = await captured(() => benchPaper({ quick: true, out, part, resume: true, report: true }));
  expect(report).toMatch(/\| sparse H=4 \| MAGRPO K=2 \| 1 \|/);
  expect(report).toMatch(/\| text \+ numeric m_t \| sparse H=4 \| /);
  expect(report).toContain('5 runs in');
  expect(report).not.toContain('pretraining:');
  expect(fs.statSync(gateFile).mtimeMs).toBe(gateBefore);
  expect(runs.map((f) => fs.statSync(path.join(out, 'runs', f)).mtimeMs)).toEqual(before);
  await expect(benchPaper({ quick: true, out, part, report: true })).rejects.toThrow(/--report prints a folder a bench filled: pass --resume/);
}, 600_000);
