/**
 * `npm run bench`: prints comlrl's figures and, where /usr/bin/python3 has torch, the PyTorch CPU
 * baseline (../shared/reference/torch_bench.py, or $COMLRL_TORCH_BENCH) on the same checkpoint,
 * in the same run, with the ratios. Sections: model, rewards, CoopHE, MAGRPO step, CoLLM-CC item;
 * long ones only when named: `paper` (the CoLLM comparison in miniature, bench/paper.ts), `critic-fit`
 * (whether its critic can fit the sparse reward, bench/critic-fit.ts), `configs`, `memory`,
 * `offload` (a frozen base's layers in host memory against on the backend, bench/offload.ts).
 * The backend-dependent sections (model, magrpo, collm) run once per backend — wasm, and
 * tensorflow when it is set up (or the list in $COMLRL_BENCH_BACKENDS) — each in a fresh child
 * process, and print one column per backend.
 * Long sections run only when named: `configs`, `memory` (bench/memory.ts), `capacity` (bench/capacity.ts).
 * Benchmarks print figures; nothing here asserts a speed.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BACKEND_NAMES, tensorflowInstalled, type BackendName } from '../src/backend/index.js';
import { benchModel, writeBenchModel, BENCH_SHAPE } from './model.js';
import { benchTldrHouseBuild } from './rewards.js';
import { benchCoopHE } from './coophe.js';
import { benchMagrpoStep } from './magrpo.js';
import { benchExampleConfigs, printConfigTable } from './configs.js';
import { benchMemory, memoryBenchSetting, printMemoryTable } from './memory.js';
import { benchCapacity, printCapacityTable } from './capacity.js';
import { benchCollmCCItem } from './collm.js';
import { benchPaper, paperWorker } from './paper.js';
import { benchMatmul } from './matmul.js';
import { benchCriticFit, printCriticFitTable } from './critic-fit.js';
import { benchOffload, printOffloadTable } from './offload.js';

type Figures = Record<string, number>;

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

function torchRun(python: string, script: string, dir: string, env: NodeJS.ProcessEnv): Figures | null {
  const s = BENCH_SHAPE;
  const run = spawnSync(
    python,
    [script, dir, '--batch', String(s.batch), '--seq', String(s.seq), '--new', String(s.newTokens), '--reps', '5'],
    { encoding: 'utf8', maxBuffer: 1 << 24, env },
  );
  if (run.status !== 0) {
    console.error(`torch baseline failed: ${run.stderr.trim().split('\n').pop()}`);
    return null;
  }
  const line = run.stdout.trim().split('\n').pop() ?? '{}';
  return JSON.parse(line) as Figures;
}

const LOWER_IS_BETTER = new Set(['forward_ms', 'fwd_bwd_ms', 'adamw_step_ms']);

/**
 * PyTorch's figures: with OMP_NUM_THREADS set, that one run; else the best per figure of torch's
 * own thread default (one per physical core: 1 on a 2-vCPU VM) and every core with a passive
 * OpenMP wait policy (spinning threads collapse on a shared VM), so the baseline is never weakened.
 */
function torchBaseline(dir: string): Figures | null {
  const script = process.env.COMLRL_TORCH_BENCH ?? path.resolve(repoRoot, '../shared/reference/torch_bench.py');
  const python = process.env.COMLRL_TORCH_PYTHON ?? '/usr/bin/python3';
  if (!fs.existsSync(script) || !fs.existsSync(python)) return null;
  const probe = spawnSync(python, ['-c', 'import torch'], { encoding: 'utf8' });
  if (probe.status !== 0) return null;
  if (process.env.OMP_NUM_THREADS) return torchRun(python, script, dir, process.env);
  const own = torchRun(python, script, dir, process.env);
  const all = torchRun(python, script, dir, { ...process.env, OMP_NUM_THREADS: String(os.cpus().length), OMP_WAIT_POLICY: process.env.OMP_WAIT_POLICY ?? 'PASSIVE' });
  if (!own || !all) return own ?? all;
  const best: Figures = { ...own };
  for (const [k, v] of Object.entries(all)) {
    if (typeof v !== 'number' || typeof own[k] !== 'number' || k === 'threads') continue;
    best[k] = LOWER_IS_BETTER.has(k) ? Math.min(v, own[k]) : Math.max(v, own[k]);
  }
  best.threads = Math.max(own.threads, all.threads);
  best.threads_own = own.threads;
  return best;
}

/**
 * Which BLAS library torch's matmul loaded (Debian's torch links the system libblas.so.3, which is
 * OpenBLAS only when libopenblas0-pthread is installed; the reference BLAS is ~6× slower and makes
 * every ratio look better than it is).
 */
function torchBlas(python = process.env.COMLRL_TORCH_PYTHON ?? '/usr/bin/python3'): string {
  const probe = spawnSync(python, ['-c', "import torch; torch.ones(64, 64) @ torch.ones(64, 64); print('\\n'.join(sorted({l.split()[-1] for l in open('/proc/self/maps') if 'blas' in l.lower() or 'mkl' in l.lower()})))"], { encoding: 'utf8' });
  if (probe.status !== 0) return 'unknown';
  const libs = probe.stdout.split('\n').filter(Boolean);
  const name = libs.some((l) => /openblas/i.test(l)) ? 'OpenBLAS' : libs.some((l) => /mkl/i.test(l)) ? 'MKL' : libs.length > 0 ? 'reference BLAS (slow: install libopenblas0-pthread)' : 'none found';
  // libblas.so.3 is the alternatives link that loads the real one: name the library doing the work.
  const lib = libs.find((l) => /openblas/i.test(l)) ?? libs.find((l) => /mkl/i.test(l)) ?? libs.find((l) => /libblas/.test(l));
  return lib ? `${name}, ${lib}` : name;
}

/** PyTorch's microseconds per tiny op, the same measurement as bench/matmul.ts's; null without torch. */
function torchOpDispatchMicros(python = process.env.COMLRL_TORCH_PYTHON ?? '/usr/bin/python3'): number | null {
  const script = 'import torch,time\na=torch.randn(4,256);b=torch.randn(4,256)\nfor _ in range(2000): a+b\nt=time.perf_counter()\nfor _ in range(20000): a+b\nprint((time.perf_counter()-t)/20000*1e6)';
  const probe = spawnSync(python, ['-c', script], { encoding: 'utf8', env: { ...process.env, OMP_NUM_THREADS: '1' } });
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
async function child(name: ChildSection, dir: string | undefined): Promise<void> {
  const figures =
    name === 'model' ? await benchModel({ dir }) : name === 'magrpo' ? await benchMagrpoStep() : name === 'matmul' ? await benchMatmul() : await benchCollmCCItem();
  console.log(CHILD_TAG + JSON.stringify(figures));
}

/** Runs `name` on `backend` in a fresh Node process (backends are process-global); null on failure. */
function onBackend(backend: BackendName, name: ChildSection, dir?: string, env: NodeJS.ProcessEnv = {}): Figures | null {
  const self = fileURLToPath(import.meta.url);
  const r = spawnSync(process.execPath, [self, '--child', name, ...(dir ? [dir] : [])], {
    encoding: 'utf8',
    env: { ...process.env, ...env, COMLRL_BACKEND: backend },
    stdio: ['ignore', 'pipe', 'pipe'],
    maxBuffer: 1 << 24,
  });
  const line = r.stdout.split('\n').find((l) => l.startsWith(CHILD_TAG));
  if (r.status !== 0 || line === undefined) {
    console.error(`bench ${name} on ${backend} failed: ${(r.stderr || r.stdout).trim().split('\n').slice(-3).join(' / ')}`);
    return null;
  }
  return JSON.parse(line.slice(CHILD_TAG.length)) as Figures;
}

function benchBackends(): BackendName[] {
  const env = process.env.COMLRL_BENCH_BACKENDS;
  if (env) {
    const list = env.split(',').map((x) => x.trim()).filter(Boolean);
    for (const b of list) if (!(BACKEND_NAMES as readonly string[]).includes(b)) throw new Error(`COMLRL_BENCH_BACKENDS: unknown backend '${b}'`);
    return list as BackendName[];
  }
  return tensorflowInstalled() ? ['wasm', 'tensorflow'] : ['wasm'];
}

/** One row per figure, one column per backend (+ PyTorch and the last backend's ratio to it). */
function sideBySide(title: string, keys: readonly string[], runs: Map<string, Figures | null>, torch: Figures | null = null, rateKeys: ReadonlySet<string> = new Set()): void {
  const backends = [...runs.keys()];
  const last = backends[backends.length - 1];
  console.log(`\n## ${title}\n`);
  const head = ['figure', ...backends, ...(torch ? ['PyTorch CPU', `${last} vs PyTorch`] : [])];
  console.log(`| ${head.join(' | ')} |`);
  console.log(`|${head.map(() => '---').join('|')}|`);
  for (const k of keys) {
    const rate = rateKeys.has(k);
    const cells = backends.map((b) => fmt(runs.get(b)?.[k], rate ? 0 : 1));
    const row = [k, ...cells];
    if (torch) {
      const ours = runs.get(last)?.[k];
      const t = torch[k];
      row.push(fmt(t, rate ? 0 : 1));
      // Both directions read as "how many times slower than PyTorch" (1.00× = parity).
      row.push(ours !== undefined && t !== undefined ? `${fmt(rate ? t / ours : ours / t, 2)}×` : '–');
    }
    console.log(`| ${row.join(' | ')} |`);
  }
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv[0] === '--child') return child(argv[1] as ChildSection, argv[2]);
  if (argv[0] === '--paper-worker') return paperWorker(JSON.parse(argv[1]) as Parameters<typeof paperWorker>[0]);
  const only = new Set(argv);
  const want = (name: string): boolean => only.size === 0 || only.has(name);
  // Long runs (minutes): only when named.
  if (only.has('paper')) {
    await benchPaper();
    if (only.size === 1) return;
  }
  if (only.has('configs')) printConfigTable(await benchExampleConfigs());
  if (only.has('memory')) {
    const setting = memoryBenchSetting();
    const { rows, params } = await benchMemory(setting);
    printMemoryTable(rows, setting, params, process.env.COMLRL_BACKEND ?? 'wasm');
  }
  if (only.has('capacity')) printCapacityTable(await benchCapacity(), process.env.COMLRL_BACKEND ?? 'wasm');
  if (only.has('critic-fit')) printCriticFitTable(await benchCriticFit(), Number(process.env.COMLRL_CRITIC_FIT_LR ?? 1e-2));
  if (only.has('offload')) printOffloadTable(await benchOffload());
  // Only long runs named: nothing else to measure.
  if (only.size > 0 && [...only].every((n) => ['paper', 'configs', 'memory', 'capacity', 'critic-fit', 'offload'].includes(n))) return;
  const backends = benchBackends();
  console.log(`# comlrl benchmark (${os.cpus().length} cores, ${os.cpus()[0]?.model ?? 'cpu'}, node ${process.version}; backends: ${backends.join(', ')})`);

  if (want('model')) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-bench-model-'));
    try {
      writeBenchModel(dir);
      const runs = new Map(backends.map((b) => [b, onBackend(b, 'model', dir)] as const));
      const torch = torchBaseline(dir);
      console.log(`\nmodel: Qwen3 vocab ${BENCH_SHAPE.vocab}, hidden ${BENCH_SHAPE.hidden}, ${BENCH_SHAPE.layers} layers, batch ${BENCH_SHAPE.batch} × ${BENCH_SHAPE.seq}` +
        (torch ? `; PyTorch ${torch.torch} with ${torchBlas()}, ${torch.threads_own !== undefined ? `best of ${torch.threads_own} and ${torch.threads} threads per figure` : `${torch.threads} threads`} (matmul ${fmt(torch.matmul_gflops, 0)} GFLOP/s)` : ''));
      const rates = new Set(['score_tokens_per_s', 'gen_tokens_per_s', 'gen_recompute_tokens_per_s']);
      sideBySide('Model (ms; tokens/s)', ['forward_ms', 'fwd_bwd_ms', 'adamw_step_ms', 'score_tokens_per_s', 'gen_tokens_per_s'], runs, torch, rates);
      sideBySide('Model, more figures', ['gen_recompute_tokens_per_s', 'gen_cache_speedup', 'params'], runs, null, rates);
      if (!torch) console.log('\n(PyTorch baseline skipped: /usr/bin/python3 with torch not found)');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
  if (want('matmul')) {
    // TensorFlow twice: its oneDNN kernels (the default) and its Eigen ones (TF_ENABLE_ONEDNN_OPTS=0).
    const runs = new Map<string, Figures | null>();
    for (const b of backends) {
      runs.set(b, onBackend(b, 'matmul'));
      if (b === 'tensorflow') runs.set('tensorflow, TF_ENABLE_ONEDNN_OPTS=0', onBackend(b, 'matmul', undefined, { TF_ENABLE_ONEDNN_OPTS: '0' }));
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
    sideBySide('One MAGRPO step: 2 agents, K = 4, 32 new tokens (ms)', ['step_ms', 'trainer_step_ms', 'generation_ms', 'scoring_ms', 'backward_ms', 'optimizer_ms', 'reward_ms', 'generation_tokens_per_s'], runs, null, new Set(['generation_tokens_per_s']));
  }
  if (want('collm')) {
    const runs = new Map(backends.map((b) => [b, onBackend(b, 'collm')] as const));
    sideBySide('One CoLLM-CC item: 2 agents + critic, 2 turns × 32 new tokens, one update (ms)', ['collm_cc_item_ms'], runs);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
