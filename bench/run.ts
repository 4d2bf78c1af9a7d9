/**
 * `npm run bench`: prints comlrl's figures and, where /usr/bin/python3 has torch, the PyTorch CPU
 * baseline (../shared/reference/torch_bench.py, or $COMLRL_TORCH_BENCH) on the same checkpoint,
 * in the same run, with the ratios. Sections: model, rewards, CoopHE, MAGRPO step.
 * Benchmarks print figures; nothing here asserts a speed.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as tf from '@tensorflow/tfjs';
import { benchModel, writeBenchModel, BENCH_SHAPE } from './model.js';
import { benchTldrHouseBuild } from './rewards.js';
import { benchCoopHE } from './coophe.js';
import { benchMagrpoStep } from './magrpo.js';
import { benchExampleConfigs, printConfigTable } from './configs.js';
import { benchMemory, printMemoryTable } from './memory.js';

type Figures = Record<string, number>;

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

function torchBaseline(dir: string): Figures | null {
  const script = process.env.COMLRL_TORCH_BENCH ?? path.resolve(repoRoot, '../shared/reference/torch_bench.py');
  const python = process.env.COMLRL_TORCH_PYTHON ?? '/usr/bin/python3';
  if (!fs.existsSync(script) || !fs.existsSync(python)) return null;
  const probe = spawnSync(python, ['-c', 'import torch'], { encoding: 'utf8' });
  if (probe.status !== 0) return null;
  const s = BENCH_SHAPE;
  const run = spawnSync(
    python,
    [script, dir, '--batch', String(s.batch), '--seq', String(s.seq), '--new', String(s.newTokens), '--reps', '5'],
    { encoding: 'utf8', maxBuffer: 1 << 24 },
  );
  if (run.status !== 0) {
    console.error(`torch baseline failed: ${run.stderr.trim().split('\n').pop()}`);
    return null;
  }
  const line = run.stdout.trim().split('\n').pop() ?? '{}';
  return JSON.parse(line) as Figures;
}

function table(title: string, rows: [string, string, string, string][]): void {
  console.log(`\n## ${title}\n`);
  console.log('| figure | comlrl | PyTorch CPU | ratio |');
  console.log('|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
}

const fmt = (x: number | undefined, digits = 1): string =>
  x === undefined || !Number.isFinite(x) ? '–' : x.toFixed(digits);

function section(title: string, figures: Figures): void {
  console.log(`\n## ${title}\n`);
  console.log('| figure | value |');
  console.log('|---|---|');
  for (const [k, v] of Object.entries(figures)) console.log(`| ${k} | ${fmt(v, 2)} |`);
}

async function main(): Promise<void> {
  const only = new Set(process.argv.slice(2));
  const want = (name: string): boolean => only.size === 0 || only.has(name);
  // Long runs (minutes): only when named.
  if (only.has('configs')) printConfigTable(await benchExampleConfigs());
  if (only.has('memory')) {
    const like = process.env.COMLRL_BENCH_LIKE === 'qwen3-1.7b' ? 'qwen3-1.7b' : 'qwen3-0.6b';
    printMemoryTable(await benchMemory(like), like, process.env.COMLRL_BACKEND ?? 'wasm');
  }
  console.log(`# comlrl benchmark (${os.cpus().length} cores, ${os.cpus()[0]?.model ?? 'cpu'}, node ${process.version})`);

  if (want('model')) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-bench-model-'));
    try {
      writeBenchModel(dir);
      const ours = await benchModel({ dir });
      const torch = torchBaseline(dir);
      console.log(`backend: ${tf.getBackend()}; model: Qwen3 vocab ${BENCH_SHAPE.vocab}, hidden ${BENCH_SHAPE.hidden}, ` +
        `${BENCH_SHAPE.layers} layers, batch ${BENCH_SHAPE.batch} × ${BENCH_SHAPE.seq}`);
      const ms = (k: string, tk: string): [string, string, string, string] => [
        `${k} (ms)`, fmt(ours[k]), fmt(torch?.[tk]), torch?.[tk] ? `${fmt(ours[k] / torch[tk], 2)}×` : '–'];
      const rate = (k: string, tk: string): [string, string, string, string] => [
        `${k}`, fmt(ours[k], 0), fmt(torch?.[tk], 0), torch?.[tk] ? `${fmt(torch[tk] / ours[k], 2)}× slower` : '–'];
      table('Model (issue 2)', [
        ms('forward_ms', 'forward_ms'),
        ms('fwd_bwd_ms', 'fwd_bwd_ms'),
        ms('adamw_step_ms', 'adamw_step_ms'),
        rate('score_tokens_per_s', 'score_tokens_per_s'),
        rate('gen_tokens_per_s', 'gen_tokens_per_s'),
      ]);
      const extra = Object.fromEntries(
        Object.entries(ours).filter(([k]) => !['forward_ms', 'fwd_bwd_ms', 'adamw_step_ms', 'score_tokens_per_s', 'gen_tokens_per_s'].includes(k)),
      );
      if (Object.keys(extra).length) section('Model, more figures', extra);
      if (!torch) console.log('\n(PyTorch baseline skipped: /usr/bin/python3 with torch not found)');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
  if (want('rewards')) section('TLDR and HouseBuild rewards (issue 3)', await benchTldrHouseBuild());
  if (want('coophe')) section('CoopHE rewards (issue 3)', await benchCoopHE());
  if (want('magrpo')) section('One MAGRPO step (issue 4)', await benchMagrpoStep());
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
