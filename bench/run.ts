/**
 * `npm run bench`: prints comlrl's figures and, where a Python with torch is found (see
 * torchPython in bench/pytorch.ts), the PyTorch CPU baseline (../shared/reference/torch_bench.py, or
 * $COMLRL_TORCH_BENCH) on the same checkpoint, in the same run, in float32 and in bfloat16, with
 * the ratios. Sections: model, rewards, CoopHE, MAGRPO step, CoLLM-CC item; long ones only when
 * named: `paper` (the CoLLM comparison in miniature, bench/paper.ts; `--quick` for its short
 * form), `critic-fit` (its gate: does the critic learn its run's on-policy values, bench/critic-gate.ts; $COMLRL_CRITIC_VOCAB_ORDER picks the critic vocabulary's order), `configs`, `memory` (bench/memory.ts),
 * `capacity` (bench/capacity.ts), `offload` (a frozen base's layers in host memory against on the
 * backend, bench/offload.ts), `profile-torch` (the bench model's time per kernel on the torch
 * backend, bench/profile-torch.ts), `items` (seconds per training item of MAGRPO, CoLLM-DC and
 * CoLLM-CC with 2 LoRA agents on one base, split into phases, joint against per-agent passes,
 * bench/items.ts; on torch, or the backends in $COMLRL_BENCH_BACKENDS; `--like qwen3-1.7b`: one
 * item per trainer and mode on a checkpoint of that shape instead of the bench model; `--trainers
 * magrpo,collm-cc` to pick trainers; `--new-tokens N` per completion).
 * The backend-dependent sections (model, magrpo, collm, matmul) run once per backend — wasm,
 * tensorflow when it is set up, torch when it is set up (or the list in $COMLRL_BENCH_BACKENDS) —
 * each in a fresh child process, and print one column per backend; the model section adds a
 * column for torch with its LoRA base held in bfloat16, and runs torch and the PyTorch f32
 * baseline (and the bfloat16 pair) alternately $COMLRL_BENCH_ROUNDS times (default 3), reporting
 * per-figure medians and each round's ratios.
 * Benchmarks print figures; nothing here asserts a speed.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BACKEND_NAMES, tensorflowInstalled, torchInstalled, type BackendName } from '../src/backend/index.js';
import { benchModel, writeBenchModel, BENCH_SHAPE, type BenchModelOptions } from './model.js';
import { benchTldrHouseBuild } from './rewards.js';
import { benchCoopHE } from './coophe.js';
import { benchMagrpoStep } from './magrpo.js';
import { benchExampleConfigs, printConfigTable } from './configs.js';
import { benchMemory, memoryBenchSetting, printMemoryTable } from './memory.js';
import { benchCapacity, printCapacityTable } from './capacity.js';
import { benchCollmCCItem } from './collm.js';
import { benchCriticFit, benchPaper } from './paper.js';
import { paperWorker } from './paper-jobs.js';
import { benchMatmul } from './matmul.js';
import { benchOffload, printOffloadTable } from './offload.js';
import { profileTorch } from './profile-torch.js';
import { benchItems, itemsBenchOptionsSchema, itemsBenchResultSchema, itemsTable, type ItemsBenchOptions, type ItemsBenchResult } from './items.js';
import { torchBenchScript, torchPython, type TorchDtype, type TorchPython } from './pytorch.js';

type Figures = Record<string, number>;

function torchRun(py: TorchPython, script: string, dir: string, dtype: TorchDtype, env: NodeJS.ProcessEnv): Figures | null {
  const s = BENCH_SHAPE;
  const run = spawnSync(
    py.python,
    [script, dir, '--batch', String(s.batch), '--seq', String(s.seq), '--new', String(s.newTokens), '--reps', '5', '--dtype', dtype],
    { encoding: 'utf8', maxBuffer: 1 << 24, env },
  );
  if (run.status !== 0) {
    console.error(`torch baseline (${dtype}) failed: ${run.stderr.trim().split('\n').pop()}`);
    return null;
  }
  const line = run.stdout.trim().split('\n').pop() ?? '{}';
  const parsed = JSON.parse(line) as Record<string, unknown>;
  // Only the numbers (version, device, dtype and BLAS are in torchPython()'s probe and the header).
  return Object.fromEntries(Object.entries(parsed).filter((e): e is [string, number] => typeof e[1] === 'number'));
}

const LOWER_IS_BETTER = new Set(['forward_ms', 'fwd_bwd_ms', 'adamw_step_ms']);

/**
 * PyTorch's figures in `dtype`: with OMP_NUM_THREADS set, that one run; else the best per figure
 * of torch's own thread default (one per core) and every core with a passive OpenMP wait policy
 * (spinning threads collapse on a shared VM), so the baseline is never weakened.
 */
function torchBaseline(dir: string, dtype: TorchDtype): Figures | null {
  const script = torchBenchScript();
  const py = torchPython();
  if (!fs.existsSync(script) || py === null) return null;
  if (py.env.OMP_NUM_THREADS) return torchRun(py, script, dir, dtype, py.env);
  const own = torchRun(py, script, dir, dtype, py.env);
  const all = torchRun(py, script, dir, dtype, { ...py.env, OMP_NUM_THREADS: String(os.cpus().length), OMP_WAIT_POLICY: py.env.OMP_WAIT_POLICY ?? 'PASSIVE' });
  if (!own || !all) return own ?? all;
  const best: Figures = { ...own };
  for (const [k, v] of Object.entries(all)) {
    if (own[k] === undefined || k === 'threads') continue;
    best[k] = LOWER_IS_BETTER.has(k) ? Math.min(v, own[k]) : Math.max(v, own[k]);
  }
  best.threads = Math.max(own.threads, all.threads);
  best.threads_own = own.threads;
  return best;
}

/** PyTorch's microseconds per tiny op, the same measurement as bench/matmul.ts's; null without torch. */
function torchOpDispatchMicros(): number | null {
  const py = torchPython();
  if (py === null) return null;
  const script = 'import torch,time\na=torch.randn(4,256);b=torch.randn(4,256)\nfor _ in range(2000): a+b\nt=time.perf_counter()\nfor _ in range(20000): a+b\nprint((time.perf_counter()-t)/20000*1e6)';
  const probe = spawnSync(py.python, ['-c', script], { encoding: 'utf8', env: { ...py.env, OMP_NUM_THREADS: '1' } });
  const us = Number(probe.stdout.trim());
  return probe.status === 0 && Number.isFinite(us) ? us : null;
}

const fmt = (x: number | undefined, digits = 1): string =>
  x === undefined || !Number.isFinite(x) ? '–' : x.toFixed(digits);

function section(title: string, figures: Figures): void {
  console.log(`\n## ${title}\n`);
  console.log('| figure | value |');
  console.log('|---|---|');
  for (const [k, v] of Object.entries(figures)) console.log(`| ${k} | ${fmt(v, 2)} |`);
}

const CHILD_TAG = 'BENCH_JSON ';
type ChildSection = 'model' | 'magrpo' | 'collm' | 'matmul';

/** Runs one backend-dependent section in this process and prints its figures as one JSON line. */
async function child(name: ChildSection, dir: string | undefined, modelOptions: string | undefined): Promise<void> {
  const figures: Figures = { load_avg_1m: os.loadavg()[0] };
  const options = modelOptions ? (JSON.parse(modelOptions) as BenchModelOptions) : {};
  Object.assign(
    figures,
    name === 'model' ? await benchModel({ ...options, dir }) : name === 'magrpo' ? await benchMagrpoStep() : name === 'matmul' ? await benchMatmul() : await benchCollmCCItem(),
  );
  console.log(CHILD_TAG + JSON.stringify(figures));
}

interface ChildRun {
  /** The bench checkpoint's directory (model). */
  dir?: string;
  /** Variables added to the child's environment. */
  env?: NodeJS.ProcessEnv;
  /** benchModel's options (model). */
  model?: BenchModelOptions;
}

/** Runs this script with `args` on `backend` in a fresh Node process (backends are process-global); its JSON line, null on failure. */
function childJson(backend: BackendName, what: string, args: readonly string[], env: NodeJS.ProcessEnv = {}): unknown {
  const self = fileURLToPath(import.meta.url);
  const r = spawnSync(process.execPath, [self, ...args], {
    encoding: 'utf8',
    env: { ...process.env, ...env, COMLRL_BACKEND: backend },
    stdio: ['ignore', 'pipe', 'pipe'],
    maxBuffer: 1 << 24,
  });
  const line = r.stdout.split('\n').find((l) => l.startsWith(CHILD_TAG));
  if (r.status !== 0 || line === undefined) {
    console.error(`bench ${what} on ${backend} failed: ${(r.stderr || r.stdout).trim().split('\n').slice(-3).join(' / ')}`);
    return null;
  }
  return JSON.parse(line.slice(CHILD_TAG.length)) as unknown;
}

/** Runs `name` on `backend` in a fresh Node process; null on failure. */
function onBackend(backend: BackendName, name: ChildSection, run: ChildRun = {}): Figures | null {
  return childJson(backend, name, ['--child', name, run.dir ?? '', run.model ? JSON.stringify(run.model) : ''], run.env) as Figures | null;
}

/** The items section on `backend` in a fresh Node process; null on failure. */
function itemsOnBackend(backend: BackendName, options: ItemsBenchOptions): ItemsBenchResult | null {
  const out = childJson(backend, 'items', ['--items-child', JSON.stringify(options)]);
  return out === null ? null : itemsBenchResultSchema.parse(out);
}

/** $COMLRL_BENCH_BACKENDS, else torch when it is set up, else wasm: the backends the items section runs on. */
function itemsBackends(): BackendName[] {
  if (process.env.COMLRL_BENCH_BACKENDS) return benchBackends();
  return [torchInstalled() ? 'torch' : 'wasm'];
}

/** $COMLRL_BENCH_BACKENDS, else wasm, tensorflow when it is set up and torch when it is set up. */
function benchBackends(): BackendName[] {
  const env = process.env.COMLRL_BENCH_BACKENDS;
  if (env) {
    const list = env.split(',').map((x) => x.trim()).filter(Boolean);
    for (const b of list) if (!(BACKEND_NAMES as readonly string[]).includes(b)) throw new Error(`COMLRL_BENCH_BACKENDS: unknown backend '${b}'`);
    return list as BackendName[];
  }
  return ['wasm', ...(tensorflowInstalled() ? (['tensorflow'] as const) : []), ...(torchInstalled() ? (['torch'] as const) : [])];
}

/** One row per figure, one column per run. */
function sideBySide(title: string, keys: readonly string[], runs: Map<string, Figures | null>, rateKeys: ReadonlySet<string> = new Set()): void {
  console.log(`\n## ${title}\n`);
  const head = ['figure', ...runs.keys()];
  console.log(`| ${head.join(' | ')} |`);
  console.log(`|${head.map(() => '---').join('|')}|`);
  for (const k of keys) console.log(`| ${[k, ...[...runs.values()].map((f) => fmt(f?.[k], rateKeys.has(k) ? 0 : 1))].join(' | ')} |`);
}

/** A row of the model table: comlrl's figure, PyTorch's figure it is compared with, and the targets. */
interface ModelRow {
  key: string;
  label: string;
  /** tokens/s (higher is better) rather than ms. */
  rate: boolean;
  /** torch_bench.py's figure (the full model's, for the LoRA rows: the issue compares against it). */
  pytorch: string;
  /** Target of torch / PyTorch in float32. */
  target: number;
  /** Target of torch with the bfloat16 base / PyTorch in bfloat16 (the LoRA rows only). */
  bf16Target?: number;
}

const MODEL_ROWS: readonly ModelRow[] = [
  { key: 'forward_ms', label: 'forward (ms)', rate: false, pytorch: 'forward_ms', target: 1.3 },
  { key: 'fwd_bwd_ms', label: 'forward + backward (ms)', rate: false, pytorch: 'fwd_bwd_ms', target: 1.3 },
  { key: 'adamw_step_ms', label: 'AdamW step, incl. fwd+bwd (ms)', rate: false, pytorch: 'adamw_step_ms', target: 1.3 },
  { key: 'score_tokens_per_s', label: 'scoring (tok/s)', rate: true, pytorch: 'score_tokens_per_s', target: 1.3 },
  { key: 'gen_tokens_per_s', label: 'generation, KV cache (tok/s)', rate: true, pytorch: 'gen_tokens_per_s', target: 1.5 },
  { key: 'lora_fwd_bwd_ms', label: 'LoRA forward + backward (ms; PyTorch: full model)', rate: false, pytorch: 'fwd_bwd_ms', target: 1.3, bf16Target: 1.5 },
  { key: 'lora_score_tokens_per_s', label: 'LoRA scoring (tok/s; PyTorch: full model)', rate: true, pytorch: 'score_tokens_per_s', target: 1.3, bf16Target: 1.5 },
];

/** How many times slower than PyTorch (1.00 = parity), whichever way the figure reads. */
function slowdown(row: ModelRow, ours: number | undefined, theirs: number | undefined): number | undefined {
  if (ours === undefined || theirs === undefined) return undefined;
  return row.rate ? theirs / ours : ours / theirs;
}

const BF16_COLUMN = 'torch, bf16 base';

/**
 * The model table: a column per backend (and torch with its LoRA base in bfloat16), PyTorch in
 * float32 and bfloat16, and the ratios torch / PyTorch f32 and torch bf16 base / PyTorch bf16
 * (the last backend's when torch is not benched); then the figures over their targets.
 */
function printModelTable(runs: Map<string, Figures | null>, f32: Figures | null, bf16: Figures | null): void {
  const columns = [...runs.keys()];
  const ours = runs.has('torch') ? 'torch' : columns.filter((c) => c !== BF16_COLUMN).pop() ?? '';
  const hasBf16 = runs.has(BF16_COLUMN);
  const head = ['figure', ...columns, 'PyTorch f32', 'PyTorch bf16', `${ours} / PyTorch f32 (target)`, ...(hasBf16 ? [`${BF16_COLUMN} / PyTorch bf16 (target)`] : [])];
  console.log('\n## Model (ms; tokens/s)\n');
  console.log(`| ${head.join(' | ')} |`);
  console.log(`|${head.map(() => '---').join('|')}|`);
  const misses: string[] = [];
  const ratioCell = (row: ModelRow, column: string, dtype: 'f32' | 'bf16', target: number): string => {
    const r = slowdown(row, runs.get(column)?.[row.key], (dtype === 'f32' ? f32 : bf16)?.[row.pytorch]);
    if (r === undefined) return '–';
    if (r > target) misses.push(`${row.label.replace(/ \(.*\)$/, '')}: ${column} ${r.toFixed(2)}× PyTorch ${dtype} (target ≤ ${target}×)`);
    return `${r.toFixed(2)}× (≤ ${target})`;
  };
  for (const row of MODEL_ROWS) {
    const digits = row.rate ? 0 : 1;
    const cells = [row.label, ...columns.map((c) => fmt(runs.get(c)?.[row.key], digits)), fmt(f32?.[row.pytorch], digits), fmt(bf16?.[row.pytorch], digits)];
    cells.push(ratioCell(row, ours, 'f32', row.target));
    if (hasBf16) cells.push(row.bf16Target === undefined ? '–' : ratioCell(row, BF16_COLUMN, 'bf16', row.bf16Target));
    console.log(`| ${cells.join(' | ')} |`);
  }
  if (f32 || bf16) console.log(misses.length === 0 ? '\nEvery ratio is within its target.' : `\nOver target:\n${misses.map((m) => `- ${m}`).join('\n')}`);
}

/** $COMLRL_BENCH_ROUNDS: how many alternating torch / PyTorch f32 rounds the model section runs (default 3). */
function benchRounds(): number {
  const raw = process.env.COMLRL_BENCH_ROUNDS ?? '3';
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`COMLRL_BENCH_ROUNDS must be a positive integer, got '${raw}'`);
  return n;
}

/** Each figure's median over rounds (over the rounds that have it). */
function medianFigures(rounds: readonly Figures[]): Figures {
  const out: Figures = {};
  for (const k of new Set(rounds.flatMap((r) => Object.keys(r)))) {
    const xs = rounds.map((r) => r[k]).filter((x): x is number => x !== undefined).sort((a, b) => a - b);
    const mid = xs.length >> 1;
    out[k] = xs.length % 2 === 1 ? xs[mid] : (xs[mid - 1] + xs[mid]) / 2;
  }
  return out;
}

/** torch / PyTorch f32 (or, with `bf16`, torch with a bfloat16 base / PyTorch bf16, the rows with a bf16 target) in each round, per row: the spread behind the medians. */
function printRoundRatios(ours: readonly Figures[], theirs: readonly Figures[], dtype: 'f32' | 'bf16' = 'f32'): void {
  console.log(`
${dtype === 'f32' ? 'torch / PyTorch f32' : `${BF16_COLUMN} / PyTorch bf16`} in each of the ${ours.length} rounds (the table's figures are per-figure medians):
`);
  for (const row of MODEL_ROWS.filter((r) => dtype === 'f32' || r.bf16Target !== undefined)) {
    const rs = ours.map((o, i) => slowdown(row, o[row.key], theirs[i][row.pytorch]));
    console.log(`- ${row.label.replace(/ \(.*\)$/, '')}: ${rs.map((r) => (r === undefined ? '–' : `${r.toFixed(2)}×`)).join(', ')}`);
  }
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv[0] === '--child') return child(argv[1] as ChildSection, argv[2] || undefined, argv[3] || undefined);
  if (argv[0] === '--paper-worker') return paperWorker();
  if (argv[0] === '--items-child') {
    console.log(CHILD_TAG + JSON.stringify(await benchItems(itemsBenchOptionsSchema.parse(JSON.parse(argv[1])))));
    return;
  }
  // `--quick` (paper, critic-fit): the short form, for checking. The paper bench's folder and part:
  // `--out DIR`, `--resume`, `--arms a,b`, `--variants 'sparse H=4,dense H=4'`, `--seeds 1,2,3`,
  // `--lambda 0.8` (the λ-returns arms' λ instead of the sweep's), `--report` (with --resume: print
  // the folder's gate and tables, run nothing). Items: `--like qwen3-1.7b`,
  // `--trainers magrpo,collm-dc,collm-cc`, `--new-tokens 64`.
  const quick = argv.includes('--quick');
  const resume = argv.includes('--resume');
  const report = argv.includes('--report');
  const valueOf = (flag: string): string | undefined => {
    const i = argv.indexOf(flag);
    if (i < 0) return undefined;
    const v = argv[i + 1];
    if (v === undefined || v.startsWith('--')) throw new Error(`bench: ${flag} needs a value`);
    return v;
  };
  const out = valueOf('--out');
  const arms = valueOf('--arms')?.split(',');
  const variants = valueOf('--variants')?.split(',');
  const seedList = valueOf('--seeds');
  const seeds = seedList?.split(',').map((x) => {
    const n = Number(x);
    if (!Number.isInteger(n)) throw new Error(`bench: --seeds takes integers separated by commas, got '${seedList}'`);
    return n;
  });
  const lambdaText = valueOf('--lambda');
  const lambda = lambdaText === undefined ? undefined : Number(lambdaText);
  if (lambda !== undefined && !Number.isFinite(lambda)) throw new Error(`bench: --lambda takes a number in [0, 1], got '${lambdaText}'`);
  const like = valueOf('--like');
  const trainers = valueOf('--trainers')?.split(',');
  const newTokensText = valueOf('--new-tokens');
  const newTokens = newTokensText === undefined ? undefined : Number(newTokensText);
  const valued = new Set(['--out', '--arms', '--variants', '--seeds', '--lambda', '--like', '--trainers', '--new-tokens']);
  const only = new Set(argv.filter((a, i) => a !== '--quick' && a !== '--resume' && a !== '--report' && !valued.has(a) && !valued.has(argv[i - 1] ?? '')));
  const want = (name: string): boolean => only.size === 0 || only.has(name);
  // Long runs (minutes): only when named.
  if (only.has('paper')) {
    await benchPaper({ quick, resume, report, lambda, out: out === undefined ? undefined : path.resolve(out), part: { arms, variants, seeds } });
    if (only.size === 1) return;
  }
  if (only.has('configs')) printConfigTable(await benchExampleConfigs());
  if (only.has('memory')) {
    const setting = memoryBenchSetting();
    const { rows, params } = await benchMemory(setting);
    printMemoryTable(rows, setting, params, process.env.COMLRL_BACKEND ?? 'wasm');
  }
  if (only.has('capacity')) printCapacityTable(await benchCapacity(), process.env.COMLRL_BACKEND ?? 'wasm');
  if (only.has('critic-fit') && !(await benchCriticFit({ quick }))) process.exitCode = 1;
  if (only.has('offload')) printOffloadTable(await benchOffload());
  if (only.has('profile-torch')) await profileTorch();
  if (only.has('items')) {
    // The bench model: rounds as $COMLRL_BENCH_ROUNDS; a real-size checkpoint: one item per trainer
    // and mode, 128 new tokens a turn (the CoopHE CoLLM-CC item of docs/benchmarks.md has 128).
    // A bad --like, --trainers or --new-tokens fails here, not in each child.
    const parsed = itemsBenchOptionsSchema.safeParse(
      like === undefined
        ? { rounds: benchRounds(), trainers, maxNewTokens: newTokens }
        : { like, rounds: 1, items: 1, warmupItems: 0, trainers, maxNewTokens: newTokens ?? 128 },
    );
    if (!parsed.success) throw new Error(`bench items: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'options'}: ${i.message}`).join('; ')}`);
    const options: ItemsBenchOptions = parsed.data;
    for (const b of itemsBackends()) {
      const r = itemsOnBackend(b, options);
      if (r === null) process.exitCode = 1;
      else console.log(itemsTable(r).join('\n'));
    }
  }
  // Only long runs named: nothing else to measure.
  if (only.size > 0 && [...only].every((n) => ['paper', 'configs', 'memory', 'capacity', 'critic-fit', 'offload', 'profile-torch', 'items'].includes(n))) return;
  const backends = benchBackends();
  const load = (): string => os.loadavg().map((l) => l.toFixed(2)).join(' ');
  console.log(`# comlrl benchmark (${os.cpus().length} cores, ${os.cpus()[0]?.model ?? 'cpu'}, node ${process.version}; backends: ${backends.join(', ')}; load average ${load()})`);

  if (want('model')) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-bench-model-'));
    try {
      writeBenchModel(dir);
      const runs = new Map<string, Figures | null>();
      // torch and PyTorch f32, then torch with a bfloat16 base and PyTorch bf16, alternate for
      // `rounds` rounds and each figure is its median: one pair of runs here moves by ±20–30 %
      // from one minute to the next.
      const rounds = benchRounds();
      const torchRounds: Figures[] = [];
      const f32Rounds: Figures[] = [];
      const torchBf16Rounds: Figures[] = [];
      const bf16Rounds: Figures[] = [];
      for (const b of backends) {
        if (b !== 'torch') runs.set(b, onBackend(b, 'model', { dir }));
        else {
          for (let r = 0; r < rounds; r++) {
            const ours = onBackend(b, 'model', { dir });
            const theirs = torchBaseline(dir, 'float32');
            if (ours) torchRounds.push(ours);
            if (theirs) f32Rounds.push(theirs);
            const oursBf16 = onBackend(b, 'model', { dir, model: { parts: 'lora', frozenBaseDtype: 'bfloat16' } });
            const theirsBf16 = torchBaseline(dir, 'bfloat16');
            if (oursBf16) torchBf16Rounds.push(oursBf16);
            if (theirsBf16) bf16Rounds.push(theirsBf16);
          }
          runs.set(b, torchRounds.length > 0 ? medianFigures(torchRounds) : null);
          runs.set(BF16_COLUMN, torchBf16Rounds.length > 0 ? medianFigures(torchBf16Rounds) : null);
        }
      }
      const f32 = f32Rounds.length > 0 ? medianFigures(f32Rounds) : torchBaseline(dir, 'float32');
      const bf16 = bf16Rounds.length > 0 ? medianFigures(bf16Rounds) : torchBaseline(dir, 'bfloat16');
      const py = torchPython();
      const threads = (t: Figures): string => (t.threads_own !== undefined ? `best of ${t.threads_own} and ${t.threads} threads per figure` : `${t.threads} thread${t.threads === 1 ? '' : 's'}`);
      console.log(`\nmodel: Qwen3 vocab ${BENCH_SHAPE.vocab}, hidden ${BENCH_SHAPE.hidden}, ${BENCH_SHAPE.layers} layers, batch ${BENCH_SHAPE.batch} × ${BENCH_SHAPE.seq}; LoRA rows: r = 16 on q, k, v, o` +
        (py && f32 ? `; PyTorch ${py.version} (${py.source}), BLAS ${py.blas}, ${threads(f32)}; matmul 1024³ ${fmt(f32.matmul_gflops, 0)} GFLOP/s in float32` + (bf16 ? `, ${fmt(bf16.matmul_gflops, 1)} in bfloat16` : '') : ''));
      const torchThreads = runs.get('torch')?.threads;
      if (torchThreads !== undefined) console.log(`comlrl's torch backend: ${torchThreads} thread${torchThreads === 1 ? '' : 's'} (COMLRL_TORCH_THREADS; default torch's own)`);
      printModelTable(runs, f32, bf16);
      if (torchRounds.length > 1 && torchRounds.length === f32Rounds.length) printRoundRatios(torchRounds, f32Rounds);
      if (torchBf16Rounds.length > 1 && torchBf16Rounds.length === bf16Rounds.length) printRoundRatios(torchBf16Rounds, bf16Rounds, 'bf16');
      const rates = new Set(['gen_recompute_tokens_per_s']);
      sideBySide('Model, more figures (load_avg_1m: the machine\'s load average when each column started)', ['gen_recompute_tokens_per_s', 'gen_cache_speedup', 'params', 'lora_params', 'load_avg_1m'], runs, rates);
      if (!f32) console.log('\n(PyTorch baseline skipped: no Python with torch: set COMLRL_TORCH_PYTHON, or run npm run setup:torch)');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
  if (want('matmul')) {
    // TensorFlow twice: its oneDNN kernels (the default) and its Eigen ones (TF_ENABLE_ONEDNN_OPTS=0).
    const runs = new Map<string, Figures | null>();
    for (const b of backends) {
      runs.set(b, onBackend(b, 'matmul'));
      if (b === 'tensorflow') runs.set('tensorflow, TF_ENABLE_ONEDNN_OPTS=0', onBackend(b, 'matmul', { env: { TF_ENABLE_ONEDNN_OPTS: '0' } }));
    }
    const keys = [4, 300].flatMap((n) => ['frozen', 'linear', 'flag', 'pretransposed'].map((k) => `${k}_${n}rows_ms`));
    sideBySide('x · Wᵀ for a [6144, 2048] Hugging Face weight (ms per call): frozen = matMulAgainstFrozen, linear = trainable layer, flag = tf.matMul(x, W, false, true), pretransposed = W transposed once beforehand', keys, runs);
    const torchOp = torchOpDispatchMicros();
    sideBySide('Cost of one tiny op ([4, 256] + [4, 256], µs): what a dispatch-bound decoding step pays per op', ['op_dispatch_us'], new Map([...runs, ...(torchOp === null ? [] : [['PyTorch CPU', { op_dispatch_us: torchOp }] as const])]));
  }
  if (want('rewards')) section('TLDR and HouseBuild rewards (issue 3)', await benchTldrHouseBuild());
  if (want('coophe')) section('CoopHE rewards (issue 3)', await benchCoopHE());
  if (want('magrpo')) {
    const runs = new Map(backends.map((b) => [b, onBackend(b, 'magrpo')] as const));
    sideBySide('One MAGRPO step: 2 agents, K = 4, 32 new tokens (ms)', ['step_ms', 'trainer_step_ms', 'generation_ms', 'scoring_ms', 'backward_ms', 'optimizer_ms', 'reward_ms', 'generation_tokens_per_s', 'load_avg_1m'], runs, new Set(['generation_tokens_per_s']));
  }
  if (want('collm')) {
    const runs = new Map(backends.map((b) => [b, onBackend(b, 'collm')] as const));
    sideBySide('One CoLLM-CC item: 2 agents + critic, 2 turns × 32 new tokens, one update (ms)', ['collm_cc_item_ms', 'load_avg_1m'], runs);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
