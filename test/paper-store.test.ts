/**
 * The paper bench's folder (bench/paper-store.ts): finished runs kept whole, a resume that runs only
 * what is missing, and refusals that name the folder and the setting before anything is touched.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PaperStore, runFileName, type StoredRun } from '../bench/paper-store.js';
import { runJobs, FULL, QUICK, seedsOf } from '../bench/paper.js';

const budget = { epochs: 24, segments: 4, pretrain: { steps: 10, batch: 2, lr: 1e-2 }, vocab: 'bench' };
let dirs: string[] = [];
const fresh = () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'paper-store-'));
  dirs.push(d);
  return path.join(d, 'bench');
};
afterEach(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  dirs = [];
});

const run = (arm: string, seed: number, final: number): StoredRun => ({
  kind: 'run',
  arm,
  variant: 'sparse H=4',
  seed,
  epochs: 24,
  segments: 4,
  pretrainedDir: '/x',
  result: { curve: [0.1, final], completionsPerAgent: 1536, explainedVariance: [], seconds: 1, cpuSeconds: 1, evalCpuSeconds: 0.1 },
  cpuSeconds: 1,
});

describe('paper bench store', () => {
  it('keeps finished runs and pretraining across a resume', () => {
    const dir = fresh();
    const a = PaperStore.open(dir, budget, { resume: false });
    expect(a.has(run('cc-pre', 1, 0.5))).toBe(false);
    a.save(run('cc-pre', 1, 0.5));
    fs.mkdirSync(a.pretrainedDir(0));
    for (const name of ['config.json', 'model.safetensors', 'tokenizer.json']) fs.writeFileSync(path.join(a.pretrainedDir(0), name), '{}');
    a.markPretrained(0, { firstLoss: 3, lastLoss: 1, seconds: 9 });
    a.setChoice('lambda', 0.8, 'best mean AUC on held-out seeds');
    const b = PaperStore.open(dir, budget, { resume: true });
    expect(b.has(run('cc-pre', 1, 0))).toBe(true);
    expect(b.has(run('cc-pre', 2, 0))).toBe(false);
    expect(b.runs().map((r) => r.result.curve[1])).toEqual([0.5]);
    expect(b.pretrained(0)).toEqual({ firstLoss: 3, lastLoss: 1, seconds: 9 });
    expect(b.pretrained(1)).toBeNull();
    expect(b.choice('lambda')).toBe(0.8);
    expect(b.choice('other')).toBeNull();
    // Written whole: no temporary file is left beside the run.
    expect(fs.readdirSync(path.join(dir, 'runs'))).toEqual([runFileName(run('cc-pre', 1, 0))]);
  });

  it('holds a pretrained critic only with its checkpoint: a folder carried without it pretrains again', () => {
    const s = PaperStore.open(fresh(), budget, { resume: false });
    const losses = { firstLoss: 3.9, lastLoss: 0.3, seconds: 60 };
    s.markPretrained(0, losses);
    expect(s.pretrained(0)).toBeNull(); // the marker alone
    fs.mkdirSync(s.pretrainedDir(0));
    for (const name of ['config.json', 'model.safetensors']) fs.writeFileSync(path.join(s.pretrainedDir(0), name), '{}');
    expect(s.pretrained(0)).toBeNull(); // no tokenizer yet
    fs.writeFileSync(path.join(s.pretrainedDir(0), 'tokenizer.json'), '{}');
    expect(s.pretrained(0)).toEqual(losses);
    expect(s.pretrained(1)).toBeNull();
  });

  it('keeps the gate fits per variant and seed, reused only under the same gate budget', () => {
    const s = PaperStore.open(fresh(), budget, { resume: false });
    const gate = { seeds: [1], inits: [0, 1], heldOutEpisodes: 8 };
    expect(s.gateRows('sparse H=4', 1, gate)).toBeNull();
    s.saveGateRows('sparse H=4', 1, gate, [{ variant: 'sparse H=4', init: 0, seed: 1 }]);
    expect(s.gateRows('sparse H=4', 1, gate)).toEqual([{ variant: 'sparse H=4', init: 0, seed: 1 }]);
    expect(s.gateRows('sparse H=4', 2, gate)).toBeNull();
    expect(s.gateRows('sparse H=4', 1, { ...gate, heldOutEpisodes: 64 })).toBeNull();
  });

  it('refuses a used folder without --resume, another budget, and a foreign folder, naming them', () => {
    const dir = fresh();
    PaperStore.open(dir, budget, { resume: false }).save(run('cc-pre', 1, 0.5));
    expect(() => PaperStore.open(dir, budget, { resume: false })).toThrow(/already holds a bench's runs: pass --resume/);
    expect(() => PaperStore.open(dir, { ...budget, epochs: 8 }, { resume: true })).toThrow(/was run with epochs 24, this bench uses 8/);
    expect(() => PaperStore.open(dir, { ...budget, vocab: 'pre-5b1078f' }, { resume: true })).toThrow(/was run with vocab bench, this bench uses pre-5b1078f/);
    expect(() => PaperStore.open(dir, { ...budget, pretrain: { steps: 11, batch: 2, lr: 1e-2 } }, { resume: true })).toThrow(/pretrained its critic with/);
    const other = fresh();
    fs.mkdirSync(other);
    fs.writeFileSync(path.join(other, 'notes.txt'), 'mine');
    expect(() => PaperStore.open(other, budget, { resume: true })).toThrow(/not a paper bench folder/);
    expect(fs.readFileSync(path.join(other, 'notes.txt'), 'utf8')).toBe('mine');
  });

  it('names a run file that does not parse, and deletes nothing', () => {
    const dir = fresh();
    const s = PaperStore.open(dir, budget, { resume: false });
    const f = path.join(dir, 'runs', runFileName(run('cc-pre', 3, 0)));
    fs.writeFileSync(f, '{"kind": "run", ');
    expect(() => s.runs()).toThrow(new RegExp(`${runFileName(run('cc-pre', 3, 0))} does not parse`));
    expect(fs.existsSync(f)).toBe(true);
  });
});

describe('paper bench jobs', () => {
  it('10 paired seeds for the claim on sparse, 5 elsewhere; parts select arms and variants', () => {
    expect(seedsOf(FULL, 'cc-pre', 'sparse')).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(seedsOf(FULL, 'cc-pre', 'dense')).toEqual([1, 2, 3, 4, 5]);
    expect(seedsOf(FULL, 'dc-pre', 'sparse')).toEqual([1, 2, 3, 4, 5]);
    expect(FULL.epochs).toBeGreaterThanOrEqual(24);
    const part = runJobs(FULL, '/p', { arms: ['cc-pre', 'magrpo-k2'], variants: ['sparse H=4'] });
    expect(new Set(part.map((j) => j.arm))).toEqual(new Set(['cc-pre', 'magrpo-k2']));
    expect(part.every((j) => j.variant === 'sparse H=4')).toBe(true);
    expect(part.length).toBe(20);
    expect(() => runJobs(QUICK, '/p', { arms: ['cc-typo'] })).toThrow(/--arms names 'cc-typo', not an arm/);
    expect(() => runJobs(QUICK, '/p', { variants: ['sparse H=5'] })).toThrow(/--variants names 'sparse H=5'/);
  });
});
