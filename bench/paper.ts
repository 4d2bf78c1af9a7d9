/**
 * `npm run bench -- paper`: the CoLLM paper's finding in miniature. MAGRPO, CoLLM-DC and CoLLM-CC
 * on the hidden-cue task family (envs/hidden-cue) — dense H = 1 and sparse H = 4 — with
 * {@link PAPER_SEEDS} seeds each at a matched budget of completions per agent
 * (bench/paper-runs.ts), plus a frozen-critic CoLLM-CC control on both variants. Prints, per
 * variant and method, the final eval reward (mean of the last 3 evals) and the area under the
 * learning curve, each as a mean over seeds with a bootstrap 95% interval, and the critic's
 * explained variance over training; writes the curves to a PNG (docs/img/paper-bench.png, or
 * $COMLRL_PAPER_PLOT). Runs are spread over child processes ($COMLRL_PAPER_WORKERS, default: the
 * number of cores).
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import { buildPlotSpec, renderSvg, svgToPng, type PlotPoint } from '../src/logging/plots.js';
import { createRng } from '../src/util/rng.js';
import { hiddenCueRandomBaseline } from '../envs/hidden-cue/index.js';
import { curveArea, finalReward, paperRun, PAPER_METHODS, type PaperMethod, type PaperRunResult } from './paper-runs.js';
import { mean } from '../src/util/stats.js';

/** Seeds per (variant, method). */
export const PAPER_SEEDS = [1, 2, 3, 4, 5] as const;
/** Actor-critic epochs over the 16 training tasks (MAGRPO: the same completions per agent). */
export const PAPER_EPOCHS = 20;
/** The two variants. */
export const PAPER_VARIANTS = [
  { name: 'dense H=1', horizon: 1 },
  { name: 'sparse H=4', horizon: 4 },
] as const;

/** One run of the bench. */
export interface Job {
  readonly variant: string;
  readonly horizon: number;
  readonly method: PaperMethod;
  readonly frozen: boolean;
  readonly seed: number;
}

interface JobResult extends Job {
  readonly result: PaperRunResult;
}

const TAG = 'PAPER_JSON ';

function jobs(): Job[] {
  const out: Job[] = [];
  for (const v of PAPER_VARIANTS) {
    for (const seed of PAPER_SEEDS) {
      for (const method of PAPER_METHODS) out.push({ variant: v.name, horizon: v.horizon, method, frozen: false, seed });
      out.push({ variant: v.name, horizon: v.horizon, method: 'collm-cc', frozen: true, seed });
    }
  }
  // Longest first, so the workers finish together.
  return out.sort((a, b) => b.horizon - a.horizon);
}

/** Child process: runs the given jobs one by one, printing one JSON line per result. */
export async function paperWorker(list: readonly Job[]): Promise<void> {
  setBackendLogger(null);
  await initBackend('wasm');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-paper-'));
  try {
    for (const job of list) {
      const result = await paperRun({ method: job.method, horizon: job.horizon, seed: job.seed, epochs: PAPER_EPOCHS, frozenCritic: job.frozen, dir });
      console.log(TAG + JSON.stringify({ ...job, result }));
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function runWorker(list: readonly Job[], onResult: (r: JobResult) => void): Promise<void> {
  const self = path.join(path.dirname(fileURLToPath(import.meta.url)), 'run.js');
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [self, '--paper-worker', JSON.stringify(list)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let buf = '';
    child.stdout.on('data', (d: Buffer) => {
      buf += d.toString('utf8');
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.startsWith(TAG)) onResult(JSON.parse(line.slice(TAG.length)) as JobResult);
      }
    });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`paper bench worker exited with code ${code}`))));
  });
}

/** Mean and bootstrap 95% interval (2000 resamples of the seeds, seeded) of `xs`. */
export function bootstrapMean(xs: readonly number[], resamples = 2000): { mean: number; lo: number; hi: number } {
  const m = mean(xs);
  const rng = createRng('paper-bootstrap');
  const means: number[] = [];
  for (let r = 0; r < resamples; r++) {
    let s = 0;
    for (let i = 0; i < xs.length; i++) s += xs[rng.int(xs.length)];
    means.push(s / xs.length);
  }
  means.sort((a, b) => a - b);
  return { mean: m, lo: means[Math.floor(0.025 * resamples)], hi: means[Math.ceil(0.975 * resamples) - 1] };
}

const f3 = (x: number) => x.toFixed(3);
const ci = (b: { mean: number; lo: number; hi: number }) => `${f3(b.mean)} [${f3(b.lo)}, ${f3(b.hi)}]`;

/** Runs the whole comparison and prints its tables; returns the PNG path. */
export async function benchPaper(): Promise<string> {
  const t0 = performance.now();
  const all = jobs();
  const workers = Math.max(1, Math.min(all.length, Number(process.env.COMLRL_PAPER_WORKERS ?? os.cpus().length)));
  const shares: Job[][] = Array.from({ length: workers }, () => []);
  all.forEach((j, i) => shares[i % workers].push(j));
  const results: JobResult[] = [];
  console.log(`\n## The paper's comparison in miniature (hidden-cue; ${PAPER_SEEDS.length} seeds; ${all.length} runs on ${workers} processes)\n`);
  await Promise.all(
    shares.map((share) =>
      runWorker(share, (r) => {
        results.push(r);
        process.stderr.write(`paper: ${results.length}/${all.length} ${r.variant} ${r.method}${r.frozen ? ' (frozen critic)' : ''} seed ${r.seed}: final ${f3(finalReward(r.result.curve))} (${r.result.seconds.toFixed(0)} s)\n`);
      }),
    ),
  );

  console.log(`uniform random words score ${f3(hiddenCueRandomBaseline)}; the untrained policies score less (they also emit special tokens).`);
  console.log('Final eval reward = mean of the last 3 evaluations (16 tasks each); AUC = mean eval reward over training; mean over seeds [bootstrap 95% interval].\n');
  console.log('| variant | method | completions / agent | final eval reward | AUC | critic EV, first → last flush |');
  console.log('|---|---|---|---|---|---|');
  const points: PlotPoint[] = [];
  for (const v of PAPER_VARIANTS) {
    const rows: { label: string; runs: JobResult[] }[] = [
      ...PAPER_METHODS.map((m) => ({ label: m === 'magrpo' ? 'MAGRPO' : m === 'collm-dc' ? 'CoLLM-DC' : 'CoLLM-CC', runs: results.filter((r) => r.variant === v.name && r.method === m && !r.frozen) })),
      { label: 'CoLLM-CC, frozen critic', runs: results.filter((r) => r.variant === v.name && r.frozen) },
    ];
    for (const row of rows) {
      if (row.runs.length === 0) continue;
      const finals = row.runs.map((r) => finalReward(r.result.curve));
      const areas = row.runs.map((r) => curveArea(r.result.curve));
      const evs = row.runs.filter((r) => r.result.explainedVariance.length > 0);
      const evFirst = evs.map((r) => r.result.explainedVariance[0]);
      const evLast = evs.map((r) => r.result.explainedVariance[r.result.explainedVariance.length - 1]);
      const ev = evs.length > 0 ? `${f3(evFirst.reduce((a, b) => a + b, 0) / evs.length)} → ${f3(evLast.reduce((a, b) => a + b, 0) / evs.length)}` : '–';
      console.log(`| ${v.name} | ${row.label} | ${row.runs[0].result.completionsPerAgent} | ${ci(bootstrapMean(finals))} | ${ci(bootstrapMean(areas))} | ${ev} |`);
      // Mean curve over seeds on a common x axis: the fraction of the budget spent.
      const n = Math.min(...row.runs.map((r) => r.result.curve.length));
      for (let i = 0; i < n; i++) {
        const value = row.runs.reduce((a, r) => a + r.result.curve[i], 0) / row.runs.length;
        points.push({ x: n === 1 ? 1 : i / (n - 1), value, series: row.label, panel: `${v.name}: eval reward (mean of ${row.runs.length} seeds)` });
      }
      const m = evs.length > 0 ? Math.min(...evs.map((r) => r.result.explainedVariance.length)) : 0;
      for (let i = 0; i < m; i++) {
        const value = evs.reduce((a, r) => a + r.result.explainedVariance[i], 0) / evs.length;
        points.push({ x: m === 1 ? 1 : i / (m - 1), value: Math.max(value, -1), series: row.label, panel: `${v.name}: critic explained variance at the last turn (clipped at −1)` });
      }
    }
  }
  const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
  const png = process.env.COMLRL_PAPER_PLOT ?? path.join(repo, 'docs', 'img', 'paper-bench.png');
  fs.mkdirSync(path.dirname(png), { recursive: true });
  const svg = await renderSvg(buildPlotSpec(points, { figureTitle: 'MAGRPO vs CoLLM-DC vs CoLLM-CC on hidden-cue (x: fraction of the budget)', xKey: 'fraction of the training budget', panelWidth: 520, panelHeight: 140 }));
  fs.writeFileSync(png, svgToPng(svg));
  console.log(`\nplot: ${png}; wall time ${((performance.now() - t0) / 60000).toFixed(1)} min`);
  return png;
}
