/**
 * The GPU check (issue item 6): what the `torch` backend does on a CUDA machine, in one time-boxed
 * run that writes `results.json` and `results.md` under OUTDIR.
 *
 *   node dist/bench/gpu-check.js OUTDIR [--quick] [--budget SECONDS] [--skip bench,like,torch-ref,collm]
 *
 * Parts, in this order, each in its own child process (one process holds one device) with a time
 * limit; a part whose minimum time no longer fits the remaining budget (less the minimum kept for
 * part (c) while (c) can still run) is skipped with a note:
 *   (a) parity: per-token log-probs, loss and gradients of a small random Qwen3 checkpoint (full
 *       fine-tuning, and a LoRA adapter with non-zero B) by torch on the device against torch on
 *       the CPU; passes when every token's |Δ log-prob| ≤ 1e-3 and the gradients' relative error
 *       (‖g_dev − g_cpu‖ / ‖g_cpu‖, over all tensors) ≤ 1e-3.
 *   (b) throughput beside PyTorch: the benchmark model (bench/model.ts) and a `--like qwen3-1.7b`
 *       checkpoint with LoRA r=16 (q,k,v,o), forward, forward+backward, AdamW step, scoring and
 *       greedy generation; PyTorch's numbers from ../shared/reference/torch_bench.py (shipped in
 *       the GPU archive as reference/torch_bench.py) on the same checkpoint and device.
 *   (c) one CoopHE CoLLM-CC training item (two `--like qwen3-1.7b` LoRA agents and the critic on
 *       one shared base, through `comlrl train`): seconds and CUDA allocator peak.
 * The exit code is 0 only when parity passed.
 *
 * Environment: COMLRL_TORCH_ADDON (the compiled addon) and COMLRL_TORCH_DEVICE (default cuda) as
 * for the torch backend; COMLRL_GPU_PYTHON: the Python with torch for the reference benchmark and
 * for writing the large checkpoint (default python3); COMLRL_GPU_BUDGET_S (default 450);
 * COMLRL_GPU_QUICK=1 as --quick (small shapes, for a CPU dry run of the whole path).
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as tf from '@tensorflow/tfjs';
import { parse, stringify } from 'yaml';
import { describeTorch, initBackend, setBackendLogger, torchBackend } from '../src/backend/index.js';
import { parseDecoderConfig } from '../src/model/config.js';
import { loadCausalLM, type LoadCausalLMOptions } from '../src/model/load.js';
import { loraSectionSchema, loraSettings } from '../src/model/lora/config.js';
import { writeSafetensorsStreamed } from '../src/model/safetensors-stream.js';
import { tinyModelConfig, type TinyModelOptions } from '../src/model/tiny.js';
import type { TfCausalLM } from '../src/model/causal-lm.js';
import { expectedWeights } from '../src/model/weights.js';
import { AdamW } from '../src/optim/index.js';
import { writeQwen3Tokenizer } from '../src/tokenizer/qwen3-files.js';
import { createRng } from '../src/util/rng.js';
import { BENCH_SHAPE, writeBenchModel } from './model.js';

const THIS_FILE = fileURLToPath(import.meta.url);
const HERE = path.dirname(THIS_FILE);
/** The package root of this build (dist/bench/ → two up). */
const PKG_ROOT = path.resolve(HERE, '..', '..');

/** Parity thresholds. */
export const PARITY_MAX_LOGPROB_DIFF = 1e-3;
export const PARITY_MAX_GRAD_REL_ERR = 1e-3;

/** LoRA of the LoRA models: r=16 on the attention projections, as bench/memory.ts and bench/capacity.ts. */
const LORA = { r: 16, lora_alpha: 32, lora_dropout: 0, target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj'] };

/**
 * Two small HumanEval-style problems written for this check (prompt, tests, entry point), for the
 * CoopHE CoLLM-CC item. The GPU archive carries them as data/coophe-gpu-check.json.
 */
export const GPU_CHECK_COOPHE_PROBLEMS = [
  {
    task_id: 'GpuCheck/0',
    prompt: 'def sum_of_squares(numbers):\n    """Return the sum of the squares of the integers in the list numbers.\n    >>> sum_of_squares([1, 2, 3])\n    14\n    >>> sum_of_squares([])\n    0\n    """\n',
    test: 'def check(candidate):\n    assert candidate([1, 2, 3]) == 14\n    assert candidate([]) == 0\n    assert candidate([-2, 5]) == 29\n    assert candidate([10]) == 100\n',
    entry_point: 'sum_of_squares',
  },
  {
    task_id: 'GpuCheck/1',
    prompt: 'def count_vowels(text):\n    """Return how many characters of text are vowels (a, e, i, o, u, either case).\n    >>> count_vowels("Hello")\n    2\n    >>> count_vowels("xyz")\n    0\n    """\n',
    test: 'def check(candidate):\n    assert candidate("Hello") == 2\n    assert candidate("xyz") == 0\n    assert candidate("AEIOU aeiou") == 10\n    assert candidate("") == 0\n',
    entry_point: 'count_vowels',
  },
];

/** The small checkpoint of the parity check: Qwen3 (q/k norms, GQA), untied head. */
export function parityConfig(): Record<string, unknown> {
  return {
    architectures: ['Qwen3ForCausalLM'],
    model_type: 'qwen3',
    vocab_size: 1000,
    hidden_size: 128,
    intermediate_size: 352,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 32,
    hidden_act: 'silu',
    rms_norm_eps: 1e-6,
    rope_theta: 1000000,
    max_position_embeddings: 512,
    tie_word_embeddings: false,
    attention_bias: false,
    torch_dtype: 'float32',
    eos_token_id: 1,
  };
}

// ---- sizes ---------------------------------------------------------------------------------------

interface BenchSize {
  batch: number;
  seq: number;
  newTokens: number;
  reps: number;
}

interface Sizes {
  bench: BenchSize;
  like: BenchSize;
  /** Shape overrides of the `--like qwen3-1.7b` checkpoint (none at real size). */
  likeShape: Partial<Pick<TinyModelOptions, 'hiddenSize' | 'numLayers' | 'numHeads' | 'numKvHeads' | 'headDim' | 'intermediateSize'>>;
  collmMaxNewTokens: number;
}

function sizes(quick: boolean): Sizes {
  const real = { batch: BENCH_SHAPE.batch, seq: BENCH_SHAPE.seq, newTokens: BENCH_SHAPE.newTokens, reps: 5 };
  if (!quick) return { bench: real, like: { ...real, reps: 3 }, likeShape: {}, collmMaxNewTokens: 256 };
  const small = { batch: 2, seq: 48, newTokens: 8, reps: 2 };
  return {
    bench: small,
    like: small,
    likeShape: { numLayers: 2, hiddenSize: 256, intermediateSize: 512, numHeads: 4, numKvHeads: 2, headDim: 64 },
    collmMaxNewTokens: 16,
  };
}

// ---- helpers -------------------------------------------------------------------------------------

const GiB = 1024 ** 3;
const fmtGiB = (bytes: number | null | undefined): string => (bytes == null ? '–' : bytes === 0 ? '0 (cpu)' : `${(bytes / GiB).toFixed(2)} GiB`);
const fmt = (v: number | null | undefined, digits = 1): string => (v == null || !Number.isFinite(v) ? '–' : v.toFixed(digits));

function readJson<T>(file: string): T {
  return JSON.parse(fs.readFileSync(file, 'utf8')) as T;
}

/** The device the torch backend is asked for (the same rule as the backend: unset → cuda here). */
function wantedDevice(): string {
  const d = process.env.COMLRL_TORCH_DEVICE;
  return d === undefined || d === '' ? 'cuda' : d;
}

function cudaIndex(device: string): number {
  const m = /^cuda(?::(\d+))?$/.exec(device);
  return m?.[1] !== undefined ? Number(m[1]) : 0;
}

/** Peak bytes of the CUDA caching allocator since the last reset (0 on cpu). */
function peakBytes(): number {
  const b = torchBackend();
  if (b === null || !b.device.startsWith('cuda')) return 0;
  return Number(b.addon.runtime('peak', cudaIndex(b.device)));
}

function resetPeak(): void {
  const b = torchBackend();
  if (b !== null && b.device.startsWith('cuda')) b.addon.runtime('reset_peak', cudaIndex(b.device));
}

/** Waits for the device's queued work (timings end here, as torch_bench's `sync()`). */
function sync(): void {
  torchBackend()?.synchronize();
}

/**
 * Starts the torch backend and makes one tensor on its device: the CUDA caching allocator exists
 * only after the first CUDA tensor, and its statistics (peak, reset) fail before that ("Invalid
 * device argument 0: did you call init?").
 */
async function initTorch(): Promise<void> {
  setBackendLogger(null);
  const name = await initBackend('torch');
  if (name !== 'torch') throw new Error(`initBackend gave ${name}`);
  const t = tf.zeros([8]);
  t.dataSync();
  t.dispose();
}

/** Bytes the CUDA caching allocator holds from the driver now (0 on cpu). */
function reservedBytes(): number {
  const b = torchBackend();
  if (b === null || !b.device.startsWith('cuda')) return 0;
  return Number(b.addon.runtime('reserved', cudaIndex(b.device)));
}

function tokenRows(seed: number, vocab: number, lengths: readonly number[]): number[][] {
  const rng = createRng(seed);
  return lengths.map((n) => Array.from({ length: n }, () => 2 + rng.int(vocab - 2)));
}

// ---- child parts ---------------------------------------------------------------------------------

interface ParitySpec {
  dir: string;
  lora: boolean;
  gradFile: string;
}

interface ParityHalf {
  device: string;
  torch: string;
  logprobs: number[][];
  loss: number;
  grads: Array<{ name: string; size: number; offset: number }>;
  greedy: number[][];
  seconds: number;
  peakBytes: number;
}

function loraOptions(seed: string): LoadCausalLMOptions {
  return { lora: { settings: loraSettings(loraSectionSchema.parse(LORA)), seed } };
}

/** One half of the parity check, on the backend's device: log-probs, loss and gradients. */
async function parityHalf(spec: ParitySpec): Promise<ParityHalf> {
  const t0 = performance.now();
  await initTorch();
  resetPeak();
  const model = await loadCausalLM(spec.dir, spec.lora ? loraOptions('gpu-check') : {});
  try {
    const vars = model.trainableVariables();
    if (spec.lora) {
      // B starts at zero (no gradient reaches A): give every all-zero adapter matrix small
      // host-drawn values, the same on both devices.
      const rng = createRng('lora-b');
      for (const v of vars) {
        const zero = tf.tidy(() => tf.all(tf.equal(v, 0)).dataSync()[0] === 1);
        if (zero) v.assign(tf.tensor(Float32Array.from({ length: v.size }, () => 0.05 * rng.normal()), v.shape));
      }
    }
    const vocab = model.vocabSize;
    const prompts = tokenRows(1, vocab, [5, 9, 3]);
    const completions = tokenRows(2, vocab, [12, 7, 16]);
    const logprobs = await model.tokenLogProbs(prompts, completions);
    const loss = (): tf.Scalar =>
      tf.tidy((): tf.Scalar => {
        const { tokenLogProbs, mask } = model.scoreCompletions(prompts, completions);
        return tf.neg(tf.div(tf.sum(tokenLogProbs), tf.sum(mask))) as tf.Scalar;
      });
    const { value, grads } = tf.variableGrads(loss, vars);
    const lossValue = (await value.data())[0];
    const index: ParityHalf['grads'] = [];
    const chunks: Buffer[] = [];
    let offset = 0;
    for (const v of vars) {
      const g = grads[v.name];
      const data = g === undefined ? new Float32Array(v.size) : ((await g.data()) as Float32Array);
      index.push({ name: v.name, size: data.length, offset });
      chunks.push(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
      offset += data.length;
    }
    fs.writeFileSync(spec.gradFile, Buffer.concat(chunks));
    tf.dispose([value, ...Object.values(grads)]);
    const gen = await model.generateWith(prompts, { maxNewTokens: 8, greedy: true, eosTokenIds: [] }, 'cache');
    return {
      device: torchBackend()!.device,
      torch: describeTorch(),
      logprobs,
      loss: lossValue,
      grads: index,
      greedy: gen.sequences,
      seconds: (performance.now() - t0) / 1000,
      peakBytes: peakBytes(),
    };
  } finally {
    model.dispose();
  }
}

interface ModelBenchSpec {
  dir: string;
  lora: boolean;
  size: BenchSize;
}

/** Median of `reps` timed runs after one warm-up (ms); each run ends with a device sync. */
async function timed(fn: () => Promise<void> | void, reps: number): Promise<number> {
  await fn();
  sync();
  const ts: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t = performance.now();
    await fn();
    sync();
    ts.push(performance.now() - t);
  }
  ts.sort((a, b) => a - b);
  return ts[Math.floor(ts.length / 2)];
}

/**
 * The benchmark of bench/model.ts (`benchModel`) on any checkpoint, full or LoRA, with timings
 * that end on a device sync instead of a download (no logits copied to the host).
 */
async function modelBench(spec: ModelBenchSpec): Promise<Record<string, number | string>> {
  await initTorch();
  resetPeak();
  const t0 = performance.now();
  const model: TfCausalLM = await loadCausalLM(spec.dir, spec.lora ? loraOptions('gpu-check-bench') : {});
  sync();
  const loadS = (performance.now() - t0) / 1000;
  try {
    const s = spec.size;
    const rng = createRng(0);
    const ids = Array.from({ length: s.batch }, () => Array.from({ length: s.seq }, () => rng.int(model.vocabSize)));
    const prompts = ids.map((r) => r.slice(0, 1));
    const completions = ids.map((r) => r.slice(1));
    const loss = (): tf.Scalar =>
      tf.tidy((): tf.Scalar => {
        const { tokenLogProbs, mask } = model.scoreCompletions(prompts, completions);
        return tf.neg(tf.div(tf.sum(tokenLogProbs), tf.sum(mask))) as tf.Scalar;
      });
    const vars = model.trainableVariables();
    const forwardMs = await timed(() => {
      tf.dispose(model.logits(ids));
    }, s.reps);
    const fwdBwdMs = await timed(() => {
      const { value, grads } = tf.variableGrads(loss, vars);
      sync();
      tf.dispose([value, ...Object.values(grads)]);
    }, s.reps);
    const opt = new AdamW(vars, { lr: 1e-5 });
    const adamMs = await timed(() => {
      const { value, grads } = tf.variableGrads(loss, vars);
      opt.step(grads);
      sync();
      tf.dispose([value, ...Object.values(grads)]);
    }, s.reps);
    opt.dispose();
    const scoreMs = await timed(async () => {
      await model.tokenLogProbs(prompts, completions);
    }, s.reps);
    const genPrompts = ids.map((r) => r.slice(0, Math.max(1, s.seq - s.newTokens)));
    const genOpts = { maxNewTokens: s.newTokens, greedy: true, eosTokenIds: [] };
    const genMs = await timed(async () => {
      await model.generateWith(genPrompts, genOpts, 'cache');
    }, Math.max(1, Math.floor(s.reps / 2)));
    return {
      params: vars.reduce((a, v) => a + v.size, 0),
      load_s: loadS,
      forward_ms: forwardMs,
      fwd_bwd_ms: fwdBwdMs,
      adamw_step_ms: adamMs,
      score_tokens_per_s: (s.batch * (s.seq - 1)) / (scoreMs / 1000),
      gen_tokens_per_s: (s.batch * s.newTokens) / (genMs / 1000),
      peak_bytes: peakBytes(),
      reserved_bytes: reservedBytes(),
      torch: describeTorch(),
    };
  } finally {
    model.dispose();
  }
}

interface CollmSpec {
  config: string;
  log: string;
  /** The run's output.dir: its metrics.jsonl is copied next to `log`. */
  runDir: string;
}

/** One CoLLM-CC item through `comlrl train` in this process; seconds and the allocator peak. */
async function collmItem(spec: CollmSpec): Promise<Record<string, number | string>> {
  process.env.COMLRL_BACKEND = 'torch';
  await initTorch();
  resetPeak();
  const { main } = (await import('../cli/main.js')) as { main: (argv: readonly string[], ctx: { out: (l: string) => void; err: (l: string) => void }) => Promise<number> };
  const lines: string[] = [];
  const t0 = performance.now();
  const stamp = (l: string): void => {
    const line = `[${((performance.now() - t0) / 1000).toFixed(1)} s] ${l}`;
    lines.push(line);
    fs.appendFileSync(spec.log, `${line}\n`);
  };
  const exit = await main(['train', '--config', spec.config], { out: stamp, err: stamp });
  sync();
  const seconds = (performance.now() - t0) / 1000;
  // Training starts after the models are loaded, when the CLI names the run directory.
  const at = (re: RegExp): number | null => {
    const l = lines.find((x) => re.test(x));
    return l === undefined ? null : Number(/^\[([\d.]+) s\]/.exec(l)?.[1]);
  };
  const start = at(/run directory:/);
  const end = at(/\] \[comlrl\] done:/);
  const summary = lines
    .filter((l) => /tokens\/s|peak memory|error|comlrl train:/i.test(l))
    .slice(-4)
    .map((l) => l.replace(/^\[[\d.]+ s\] /, ''))
    .join(' · ');
  // Which losses the item logged (an actor and a critic update happened when they are there).
  let losses = '–';
  const metrics = path.join(spec.runDir, 'metrics.jsonl');
  if (fs.existsSync(metrics)) {
    fs.copyFileSync(metrics, path.join(path.dirname(spec.log), 'collm-metrics.jsonl'));
    const keys = new Set<string>();
    for (const line of fs.readFileSync(metrics, 'utf8').split('\n')) {
      if (line.trim() === '') continue;
      for (const [k, v] of Object.entries(JSON.parse(line) as Record<string, unknown>)) if (/loss/i.test(k) && typeof v === 'number') keys.add(k);
    }
    losses = [...keys].sort().join(', ') || 'none';
  }
  return { exit, seconds, losses, load_s: start ?? '–', item_s: start !== null && end !== null ? end - start : '–', peak_bytes: peakBytes(), reserved_bytes: reservedBytes(), torch: describeTorch(), summary };
}

async function runPart(part: string, specFile: string, resultFile: string): Promise<void> {
  const spec = readJson<unknown>(specFile);
  let result: unknown;
  if (part === 'parity-half') result = await parityHalf(spec as ParitySpec);
  else if (part === 'model-bench') result = await modelBench(spec as ModelBenchSpec);
  else if (part === 'collm') result = await collmItem(spec as CollmSpec);
  else throw new Error(`unknown part '${part}'`);
  fs.writeFileSync(resultFile, JSON.stringify(result));
}

// ---- the orchestrator ----------------------------------------------------------------------------

interface ChildRun {
  exit: number | null;
  signal: string | null;
  timedOut: boolean;
  seconds: number;
  tail: string;
}

/** Process groups of the commands running now (killed with us: see `orchestrate`). */
const running = new Set<number>();

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** Runs a command in its own process group, output to `log`, killed after `timeoutS`. */
function runCommand(cmd: string, args: readonly string[], env: NodeJS.ProcessEnv, timeoutS: number, log: string, cwd?: string): Promise<ChildRun> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const fd = fs.openSync(log, 'a');
    fs.writeSync(fd, `$ ${[cmd, ...args].join(' ')}\n`);
    const child = spawn(cmd, args, { env, cwd, detached: true, stdio: ['ignore', fd, fd] });
    if (child.pid !== undefined) running.add(child.pid);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      if (child.pid !== undefined) killGroup(child.pid);
    }, Math.max(1, timeoutS) * 1000);
    const done = (exit: number | null, signal: string | null): void => {
      clearTimeout(timer);
      if (child.pid !== undefined) running.delete(child.pid);
      fs.closeSync(fd);
      const text = fs.readFileSync(log, 'utf8');
      resolve({ exit, signal, timedOut, seconds: (performance.now() - t0) / 1000, tail: text.trim().split('\n').slice(-6).join('\n') });
    };
    child.on('error', (e) => {
      fs.writeSync(fd, `could not start ${cmd}: ${e.message}\n`);
      done(null, null);
    });
    child.on('exit', (code, signal) => done(code, signal));
  });
}

interface Step {
  key: string;
  title: string;
  /** Seconds below which the step is skipped. */
  minS: number;
  /** The step's own time limit. */
  capS: number;
  /** The step this one needs (it is skipped when that one is skipped or fails). */
  needs?: string;
  /** Earlier steps leave this step's minimum time free (part (c) and the checkpoint it needs). */
  protect?: boolean;
  run: (timeoutS: number) => Promise<{ ok: boolean; note?: string }>;
}

/**
 * What `--skip` can leave out: `bench` all of (b), `like` the --like qwen3-1.7b rows of (b),
 * `torch-ref` PyTorch's rows of (b), `collm` part (c). Parity always runs.
 */
const SKIP_GROUPS = ['bench', 'like', 'torch-ref', 'collm'];
const STEP_GROUPS: Record<string, readonly string[]> = {
  'bench-comlrl': ['bench'],
  'bench-torch': ['bench', 'torch-ref'],
  'like-comlrl': ['bench', 'like'],
  'like-torch': ['bench', 'like', 'torch-ref'],
  collm: ['collm'],
};

interface Options {
  out: string;
  quick: boolean;
  budgetS: number;
  skip: Set<string>;
}

function parseOptions(argv: readonly string[]): Options {
  let out: string | undefined;
  let quick = process.env.COMLRL_GPU_QUICK === '1';
  let budgetS = Number(process.env.COMLRL_GPU_BUDGET_S ?? 450);
  const skip = new Set<string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--quick') quick = true;
    else if (a === '--budget') budgetS = Number(argv[++i]);
    else if (a === '--skip') for (const s of (argv[++i] ?? '').split(',')) skip.add(s.trim());
    else if (a === '--help' || a === '-h') {
      console.log('usage: node dist/bench/gpu-check.js OUTDIR [--quick] [--budget SECONDS] [--skip bench,like,torch-ref,collm]');
      process.exit(0);
    } else if (a.startsWith('-')) throw new Error(`unknown option ${a}`);
    else if (out === undefined) out = a;
    else throw new Error(`unexpected argument ${a}`);
  }
  if (out === undefined) throw new Error('usage: node dist/bench/gpu-check.js OUTDIR [--quick] [--budget SECONDS] [--skip bench,like,torch-ref,collm]');
  if (!Number.isFinite(budgetS) || budgetS <= 0) throw new Error(`--budget: expected seconds > 0, got ${budgetS}`);
  skip.delete('');
  for (const s of skip) if (!SKIP_GROUPS.includes(s)) throw new Error(`--skip takes a list of ${SKIP_GROUPS.join(', ')}, got '${s}'`);
  return { out: path.resolve(out), quick, budgetS, skip };
}

/** The reference benchmark script: shipped next to the package (GPU archive), else ../shared. */
function torchBenchScript(): string | null {
  const candidates = [path.join(PKG_ROOT, 'reference', 'torch_bench.py'), path.resolve(PKG_ROOT, '..', 'shared', 'reference', 'torch_bench.py')];
  return candidates.find((p) => fs.existsSync(p)) ?? null;
}

/** Python that writes a random safetensors checkpoint (N(0, 0.02) matrices, unit norms, zero biases) with torch: fast at billions of values. */
const WRITE_CHECKPOINT_PY = `
import ctypes, json, struct, sys, time
import torch
spec = json.load(open(sys.argv[1]))
dt = {'BF16': torch.bfloat16, 'F32': torch.float32}[spec['dtype']]
width = 2 if dt == torch.bfloat16 else 4
header, off = {}, 0
for t in spec['tensors']:
    n = 1
    for d in t['shape']:
        n *= d
    header[t['name']] = {'dtype': spec['dtype'], 'shape': t['shape'], 'data_offsets': [off, off + n * width]}
    off += n * width
header['__metadata__'] = {'format': 'pt'}
h = json.dumps(header, separators=(',', ':')).encode()
h += b' ' * (-len(h) % 8)
g = torch.Generator().manual_seed(int(spec['seed']))
t0 = time.time()
with open(spec['file'] + '.partial', 'wb') as f:
    f.write(struct.pack('<Q', len(h)))
    f.write(h)
    for t in spec['tensors']:
        name = t['name']
        if name.endswith('norm.weight'):
            x = torch.ones(t['shape'], dtype=dt)
        elif name.endswith('.bias'):
            x = torch.zeros(t['shape'], dtype=dt)
        else:
            x = torch.empty(t['shape'], dtype=torch.float32).normal_(0.0, 0.02, generator=g).to(dt)
        x = x.contiguous()
        f.write(ctypes.string_at(x.data_ptr(), x.numel() * width))
import os
os.replace(spec['file'] + '.partial', spec['file'])
print(json.dumps({'bytes': off, 'seconds': time.time() - t0, 'torch': torch.__version__}))
`;

interface ParityOutcome {
  model: string;
  device: string;
  cpu: string;
  tokens: number;
  maxLogprobDiff: number;
  lossDiff: number;
  gradRelErr: number;
  worstTensor: { name: string; relErr: number } | null;
  greedySame: boolean;
  pass: boolean;
  seconds: { device: number; cpu: number };
  peakBytes: number;
}

function compareParity(model: string, dev: ParityHalf, cpu: ParityHalf, devGrads: Float32Array, cpuGrads: Float32Array): ParityOutcome {
  let maxDiff = 0;
  let tokens = 0;
  for (let i = 0; i < cpu.logprobs.length; i++) {
    for (let j = 0; j < cpu.logprobs[i].length; j++) {
      const d = Math.abs(dev.logprobs[i][j] - cpu.logprobs[i][j]);
      maxDiff = Number.isNaN(d) ? Infinity : Math.max(maxDiff, d);
      tokens++;
    }
  }
  let num = 0;
  let den = 0;
  let worst: { name: string; relErr: number } | null = null;
  for (const g of cpu.grads) {
    let n = 0;
    let d = 0;
    for (let k = g.offset; k < g.offset + g.size; k++) {
      const delta = devGrads[k] - cpuGrads[k];
      n += delta * delta;
      d += cpuGrads[k] * cpuGrads[k];
    }
    num += n;
    den += d;
    if (d > 0) {
      const rel = Math.sqrt(n / d);
      if (worst === null || !(rel <= worst.relErr)) worst = { name: g.name, relErr: rel };
    }
  }
  const gradRelErr = den > 0 ? Math.sqrt(num / den) : num > 0 ? Infinity : 0;
  const lossDiff = Math.abs(dev.loss - cpu.loss);
  const pass = tokens > 0 && maxDiff <= PARITY_MAX_LOGPROB_DIFF && gradRelErr <= PARITY_MAX_GRAD_REL_ERR && Number.isFinite(lossDiff);
  return {
    model,
    device: dev.device,
    cpu: cpu.device,
    tokens,
    maxLogprobDiff: maxDiff,
    lossDiff,
    gradRelErr,
    worstTensor: worst,
    greedySame: JSON.stringify(dev.greedy) === JSON.stringify(cpu.greedy),
    pass,
    seconds: { device: dev.seconds, cpu: cpu.seconds },
    peakBytes: dev.peakBytes,
  };
}

interface BenchRow {
  model: string;
  engine: string;
  values: Record<string, number | string>;
}

async function orchestrate(opts: Options): Promise<number> {
  const t0 = performance.now();
  const elapsed = (): number => (performance.now() - t0) / 1000;
  const remaining = (): number => opts.budgetS - elapsed();
  const log = (line: string): void => console.log(`[gpu-check ${elapsed().toFixed(0).padStart(3)} s] ${line}`);
  const device = wantedDevice();
  const sz = sizes(opts.quick);
  fs.mkdirSync(opts.out, { recursive: true });
  const logs = path.join(opts.out, 'logs');
  fs.mkdirSync(logs, { recursive: true });
  const work = fs.mkdtempSync(path.join(process.env.COMLRL_GPU_WORK ?? os.tmpdir(), 'comlrl-gpu-check-'));
  const python = process.env.COMLRL_GPU_PYTHON || 'python3';
  log(`device ${device}, budget ${opts.budgetS} s${opts.quick ? ', --quick (small shapes: a dry run, not the real sizes)' : ''}; work in ${work}; logs in ${logs}`);

  const notes: string[] = [];
  const parity: ParityOutcome[] = [];
  const bench: BenchRow[] = [];
  let collm: Record<string, number | string> | null = null;
  const stepLog: Array<{ key: string; title: string; status: 'ok' | 'failed' | 'skipped'; seconds: number; note?: string }> = [];

  /** A part in a child node process on the device; its result JSON, or an error naming the log. */
  const child = async <T>(part: string, name: string, spec: unknown, timeoutS: number, env: NodeJS.ProcessEnv = {}): Promise<T> => {
    const specFile = path.join(work, `${name}.spec.json`);
    const resultFile = path.join(work, `${name}.result.json`);
    fs.writeFileSync(specFile, JSON.stringify(spec));
    const logFile = path.join(logs, `${name}.log`);
    const r = await runCommand(process.execPath, [THIS_FILE, '--part', part, specFile, resultFile], { ...process.env, ...env }, timeoutS, logFile);
    if (r.timedOut) throw new Error(`${name}: stopped at its time limit (${timeoutS.toFixed(0)} s); see logs/${name}.log`);
    if (r.exit !== 0 || !fs.existsSync(resultFile)) throw new Error(`${name}: exit ${r.exit ?? r.signal} (see logs/${name}.log):\n${r.tail}`);
    return readJson<T>(resultFile);
  };

  const torchBench = torchBenchScript();
  const torchBenchRow = async (model: string, dir: string, size: BenchSize, timeoutS: number, extra: string[] = []): Promise<void> => {
    if (torchBench === null) throw new Error('torch_bench.py not found (reference/torch_bench.py next to the package, or ../shared/reference)');
    const name = `torch-bench-${model.replace(/[^a-z0-9.]+/gi, '-')}${extra.length ? '-' + extra.join('').replace(/[^a-z0-9]+/gi, '') : ''}`;
    const logFile = path.join(logs, `${name}.log`);
    const args = [torchBench, dir, '--device', device, '--batch', String(size.batch), '--seq', String(size.seq), '--new', String(size.newTokens), '--reps', String(size.reps), ...extra];
    const r = await runCommand(python, args, process.env, timeoutS, logFile);
    if (r.timedOut) throw new Error(`${name}: stopped at its time limit (${timeoutS.toFixed(0)} s)`);
    const last = fs.readFileSync(logFile, 'utf8').trim().split('\n').reverse().find((l) => l.startsWith('{'));
    if (r.exit !== 0 || last === undefined) throw new Error(`${name}: exit ${r.exit ?? r.signal} (see logs/${name}.log):\n${r.tail}`);
    const v = JSON.parse(last) as Record<string, number | string>;
    bench.push({ model, engine: `PyTorch ${v.torch} ${v.dtype}${extra.includes('--tf32') ? ' tf32' : ''} (full fine-tuning: every weight trains)`, values: v });
  };

  const parityDir = path.join(work, 'parity');
  const benchDir = path.join(work, 'bench-model');
  const likeDir = path.join(work, 'qwen3-1.7b');
  const likeName = `--like qwen3-1.7b${opts.quick ? ' (quick: 2 layers, hidden 256)' : ''}`;

  const steps: Step[] = [
    {
      key: 'parity',
      title: '(a) parity: torch on the device vs torch on the CPU',
      minS: 20,
      capS: 240,
      run: async (timeoutS) => {
        writeParityModel(parityDir);
        const deadline = performance.now() + timeoutS * 1000;
        const left = (): number => Math.max(5, (deadline - performance.now()) / 1000);
        for (const lora of [false, true]) {
          const label = lora ? 'parity model + LoRA r=16 (q,k,v,o), B ≠ 0' : 'parity model, full fine-tuning';
          const halves: Record<string, { half: ParityHalf; grads: Float32Array }> = {};
          // CPU half first (it never touches the GPU), then the device half.
          for (const [which, dev] of [['cpu', 'cpu'], ['dev', device]] as const) {
            const name = `parity-${lora ? 'lora' : 'full'}-${which}`;
            const gradFile = path.join(work, `${name}.grads.f32`);
            const half = await child<ParityHalf>('parity-half', name, { dir: parityDir, lora, gradFile }, Math.min(left(), 120), { COMLRL_TORCH_DEVICE: dev });
            const buf = fs.readFileSync(gradFile);
            // A copy: the Buffer's offset in its ArrayBuffer need not be a multiple of 4.
            halves[which] = { half, grads: new Float32Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength)) };
          }
          const o = compareParity(label, halves.dev.half, halves.cpu.half, halves.dev.grads, halves.cpu.grads);
          parity.push(o);
          log(`parity ${label}: ${o.device} vs ${o.cpu}: max |Δ log-prob| ${o.maxLogprobDiff.toExponential(2)} over ${o.tokens} tokens, loss Δ ${o.lossDiff.toExponential(2)}, gradient rel. error ${o.gradRelErr.toExponential(2)} (worst tensor ${o.worstTensor ? `${o.worstTensor.name} ${o.worstTensor.relErr.toExponential(2)}` : '–'}), greedy tokens ${o.greedySame ? 'equal' : 'differ'}: ${o.pass ? 'PASS' : 'FAIL'}`);
        }
        if (!device.startsWith('cuda')) notes.push(`The device half ran on ${device}, not a GPU: parity here only checks the path (both halves on the CPU).`);
        return { ok: parity.every((p) => p.pass) };
      },
    },
    {
      key: 'bench-comlrl',
      title: '(b) benchmark model, comlrl',
      minS: 25,
      capS: 150,
      run: async (timeoutS) => {
        writeBenchModel(benchDir);
        const v = await child<Record<string, number | string>>('model-bench', 'bench-model-comlrl', { dir: benchDir, lora: false, size: sz.bench }, timeoutS);
        bench.push({ model: 'bench model (4.2 M, full fine-tuning)', engine: `comlrl (${v.torch})`, values: v });
        return { ok: true };
      },
    },
    {
      key: 'bench-torch',
      title: '(b) benchmark model, PyTorch',
      minS: 20,
      capS: 120,
      needs: 'bench-comlrl',
      run: async (timeoutS) => {
        await torchBenchRow('bench model (4.2 M, full fine-tuning)', benchDir, sz.bench, timeoutS);
        return { ok: true };
      },
    },
    {
      key: 'like-model',
      title: `writing the ${likeName} checkpoint (PyTorch, bf16)`,
      protect: true,
      minS: 20,
      capS: 150,
      run: async (timeoutS) => {
        const info = await writeLikeModel(likeDir, sz.likeShape, python, timeoutS, path.join(logs, 'like-model.log'), runCommand);
        log(`wrote ${likeName}: ${(info.parameters / 1e9).toFixed(2)} B parameters, ${(info.bytes / GiB).toFixed(2)} GiB, in ${info.seconds.toFixed(0)} s`);
        return { ok: true };
      },
    },
    {
      key: 'like-comlrl',
      title: `(b) ${likeName} LoRA, comlrl`,
      minS: 45,
      capS: 200,
      needs: 'like-model',
      run: async (timeoutS) => {
        const v = await child<Record<string, number | string>>('model-bench', 'like-comlrl', { dir: likeDir, lora: true, size: sz.like }, timeoutS);
        bench.push({ model: `${likeName}, LoRA r=16 (q,k,v,o)`, engine: `comlrl (${v.torch})`, values: v });
        return { ok: true };
      },
    },
    {
      key: 'like-torch',
      title: `(b) ${likeName}, PyTorch`,
      minS: 45,
      capS: 150,
      needs: 'like-model',
      run: async (timeoutS) => {
        await torchBenchRow(`${likeName}, LoRA r=16 (q,k,v,o)`, likeDir, sz.like, timeoutS);
        return { ok: true };
      },
    },
    {
      key: 'collm',
      title: '(c) one CoopHE CoLLM-CC item',
      protect: true,
      minS: 60,
      capS: 300,
      needs: 'like-model',
      run: async (timeoutS) => {
        const config = writeCollmConfig(work, likeDir, sz.collmMaxNewTokens);
        const logFile = path.join(logs, 'collm-cli.log');
        collm = await child<Record<string, number | string>>('collm', 'collm', { config, log: logFile, runDir: path.join(work, 'collm-run') }, timeoutS);
        log(`CoLLM-CC item: exit ${collm.exit}, ${fmt(Number(collm.seconds))} s (${fmt(Number(collm.item_s))} s after loading), peak ${fmtGiB(Number(collm.peak_bytes))}`);
        return { ok: collm.exit === 0, note: collm.exit === 0 ? undefined : `comlrl train exited ${collm.exit}: ${collm.summary}` };
      },
    },
  ];

  const status = new Map<string, 'ok' | 'failed' | 'skipped'>();
  let current: string | null = null;
  // Stopped from outside (run.sh's timeout, Ctrl-C): stop the running part, keep what ran.
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    process.on(sig, () => {
      for (const pid of running) killGroup(pid);
      notes.push(`Stopped by ${sig} after ${elapsed().toFixed(0)} s, during '${current ?? 'nothing'}'; the steps after the last one listed did not run.`);
      const code = finish();
      fs.rmSync(work, { recursive: true, force: true });
      process.exit(code === 0 ? 0 : sig === 'SIGINT' ? 130 : 143);
    });
  }
  const wanted = (key: string): boolean =>
    key === 'like-model' ? ['like-comlrl', 'like-torch', 'collm'].some(wanted) : !(STEP_GROUPS[key] ?? []).some((g) => opts.skip.has(g));
  for (let i = 0; i < steps.length; i++) {
    const s = steps[i];
    // Parity (first) takes what it needs; later steps leave the minimums of the protected steps
    // still to come (part (c)), unless those would not fit anyway.
    const viable = (x: Step): boolean => x.protect === true && wanted(x.key) && (x.needs === undefined || x.needs === s.key || !['failed', 'skipped'].includes(status.get(x.needs) ?? ''));
    let reserve = i === 0 ? 0 : steps.slice(i + 1).filter(viable).reduce((a, x) => a + x.minS, 0) + 5;
    if (remaining() < reserve) reserve = 5;
    const available = remaining() - reserve;
    const started = elapsed();
    let note: string | undefined;
    let st: 'ok' | 'failed' | 'skipped';
    if (!wanted(s.key)) {
      st = 'skipped';
      note = 'skipped: --skip';
    } else if (s.needs !== undefined && status.get(s.needs) !== 'ok') {
      st = 'skipped';
      note = `skipped: needs '${s.needs}', which ${status.get(s.needs) ?? 'did not run'}`;
    } else if (available < s.minS) {
      st = 'skipped';
      note = `skipped: ${Math.max(0, available).toFixed(0)} s of the budget left for it${reserve > 5 ? ` (${reserve - 5} s kept for part (c))` : ''}, it needs at least ${s.minS} s`;
    } else {
      const timeoutS = Math.min(s.capS, available);
      log(`${s.title} (time limit ${timeoutS.toFixed(0)} s)`);
      current = s.title;
      try {
        const r = await s.run(timeoutS);
        st = r.ok ? 'ok' : 'failed';
        note = r.note;
      } catch (err) {
        st = 'failed';
        note = (err as Error).message;
      }
      current = null;
    }
    status.set(s.key, st);
    if (st !== 'ok' && note) log(`${s.title}: ${note.startsWith('skipped') ? note : `${st}: ${note}`}`);
    stepLog.push({ key: s.key, title: s.title, status: st, seconds: elapsed() - started, note });
  }
  fs.rmSync(work, { recursive: true, force: true });
  return finish();

  /** Writes results.json and results.md from what has run so far; the exit code. */
  function finish(): number {
    const parityPassed = status.get('parity') === 'ok' && parity.length > 0 && parity.every((p) => p.pass);
    const report = {
      generatedAt: new Date().toISOString(),
      device,
      quick: opts.quick,
      budgetS: opts.budgetS,
      seconds: elapsed(),
      node: process.version,
      host: { cpus: os.cpus().length, memGiB: os.totalmem() / GiB },
      environment: environment(),
      thresholds: { maxLogprobDiff: PARITY_MAX_LOGPROB_DIFF, maxGradRelErr: PARITY_MAX_GRAD_REL_ERR },
      parityPassed,
      parity,
      bench,
      collm,
      steps: stepLog,
      notes,
    };
    fs.writeFileSync(path.join(opts.out, 'results.json'), `${JSON.stringify(report, null, 2)}\n`);
    const md = markdown(report, sz, likeName);
    fs.writeFileSync(path.join(opts.out, 'results.md'), md);
    console.log(`\n${md}`);
    log(`parity ${parityPassed ? 'PASSED' : parity.length === 0 ? 'NOT RUN' : 'FAILED'}; results in ${path.join(opts.out, 'results.md')} and results.json`);
    return parityPassed ? 0 : 1;
  }
}

function writeParityModel(dir: string): void {
  const config = parityConfig();
  const cfg = parseDecoderConfig(config, 'parity config');
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config, null, 2));
  // Wider than the usual 0.02 init, so the log-probs are far from uniform and the check has teeth.
  const rng = createRng('gpu-check-parity');
  writeSafetensorsStreamed(path.join(dir, 'model.safetensors'), expectedWeights(cfg), 'F32', (t, chunk) => {
    if (/norm\.weight$/.test(t.name)) for (let i = 0; i < chunk.length; i++) chunk[i] = 1 + 0.1 * rng.normal();
    else for (let i = 0; i < chunk.length; i++) chunk[i] = (t.name.includes('embed') || t.name.includes('lm_head') ? 0.5 : 0.08) * rng.normal();
  });
}

/** Tokenizer and config.json in JS, weights by PyTorch (JS would take minutes for 2 B values). */
async function writeLikeModel(
  dir: string,
  shape: Sizes['likeShape'],
  python: string,
  timeoutS: number,
  log: string,
  run: typeof runCommand,
): Promise<{ parameters: number; bytes: number; seconds: number }> {
  fs.mkdirSync(dir, { recursive: true });
  const tok = writeQwen3Tokenizer(dir);
  const config = tinyModelConfig({ like: 'qwen3-1.7b', tokenizer: 'qwen3', ...shape }, tok);
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config, null, 2) + '\n');
  const cfg = parseDecoderConfig(config, path.join(dir, 'config.json'));
  const tensors = expectedWeights(cfg);
  const specFile = path.join(dir, '..', 'write-checkpoint.json');
  fs.writeFileSync(specFile, JSON.stringify({ file: path.join(dir, 'model.safetensors'), dtype: 'BF16', seed: 0, tensors }));
  const script = path.join(dir, '..', 'write_checkpoint.py');
  fs.writeFileSync(script, WRITE_CHECKPOINT_PY);
  const r = await run(python, [script, specFile], process.env, timeoutS, log);
  if (r.timedOut) throw new Error(`writing the checkpoint: stopped at its time limit (${timeoutS.toFixed(0)} s)`);
  if (r.exit !== 0) throw new Error(`writing the checkpoint: ${python} exited ${r.exit ?? r.signal}:\n${r.tail}`);
  const out = JSON.parse(r.tail.split('\n').reverse().find((l) => l.startsWith('{')) ?? '{}') as { bytes?: number; seconds?: number };
  return { parameters: tensors.reduce((a, t) => a + t.shape.reduce((x, y) => x * y, 1), 0), bytes: out.bytes ?? 0, seconds: out.seconds ?? r.seconds };
}

/** The CoLLM-CC config: the CoopHE example config on the like checkpoint, LoRA, one item. */
function writeCollmConfig(work: string, modelDir: string, maxNewTokens: number): string {
  const shipped = path.join(PKG_ROOT, 'data', 'coophe-gpu-check.json');
  const data = path.join(work, 'coophe-gpu-check.json');
  if (fs.existsSync(shipped)) fs.copyFileSync(shipped, data);
  else fs.writeFileSync(data, JSON.stringify(GPU_CHECK_COOPHE_PROBLEMS, null, 2));
  const doc = parse(fs.readFileSync(path.join(PKG_ROOT, 'examples', 'configs', 'coophe-collm-cc.yaml'), 'utf8')) as Record<string, Record<string, unknown>>;
  doc.model = { ...doc.model, agent_model: modelDir, critic_model: modelDir, lora: LORA };
  doc.dataset = { ...doc.dataset, path: data, train_split: 'train[:1]', eval_split: 'train[1:]' };
  // One item, one 2-turn episode, and an actor and critic update within it.
  doc.collm_cc = { ...doc.collm_cc, max_new_tokens: maxNewTokens, eval_interval: 0, num_train_epochs: 1, rollout_buffer_size: 2, train_batch_size: 2, logging_steps: 1 };
  doc.output = { ...doc.output, dir: path.join(work, 'collm-run'), plots: false, eval_before_after: false, save_final_model: false, save_steps: 1000000 };
  const file = path.join(work, 'coophe-collm-cc.yaml');
  fs.writeFileSync(file, stringify(doc));
  return file;
}

/** What run.sh found out about the Python and torch (COMLRL_GPU_ENV_JSON), if it ran us. */
function environment(): Record<string, unknown> | null {
  try {
    return process.env.COMLRL_GPU_ENV_JSON ? (JSON.parse(process.env.COMLRL_GPU_ENV_JSON) as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

type Report = {
  environment: Record<string, unknown> | null;
  device: string;
  quick: boolean;
  budgetS: number;
  seconds: number;
  node: string;
  parityPassed: boolean;
  parity: ParityOutcome[];
  bench: BenchRow[];
  collm: Record<string, number | string> | null;
  steps: Array<{ key: string; title: string; status: string; seconds: number; note?: string }>;
  notes: string[];
};

function markdown(r: Report, sz: Sizes, likeName: string): string {
  const L: string[] = [];
  L.push(`# comlrl GPU check: torch backend on ${r.device}${r.quick ? ' (--quick: small shapes)' : ''}`);
  L.push('');
  const e = r.environment;
  const env = e ? `PyTorch ${String(e.version)}${e.cuda ? ` (CUDA ${String(e.cuda)})` : ' (CPU build)'}${e.gpu ? ` on ${String(e.gpu)}` : ''}; ` : '';
  L.push(`${env}Node ${r.node}; ${r.parity[0] ? `device half: ${r.parity[0].device}` : 'no parity run'}; ${r.seconds.toFixed(0)} s of a ${r.budgetS} s budget.`);
  L.push('');
  L.push(`## (a) Parity: ${r.parityPassed ? 'PASSED' : r.parity.length === 0 ? 'NOT RUN (see Steps)' : 'FAILED'}`);
  L.push('');
  L.push(`Per-token log-probs, loss and gradients of the same random Qwen3 checkpoint (vocab 1000, hidden 128, 2 layers, untied) and token rows; pass: max |Δ log-prob| ≤ ${PARITY_MAX_LOGPROB_DIFF} and gradient relative error ‖Δg‖/‖g‖ ≤ ${PARITY_MAX_GRAD_REL_ERR}.`);
  L.push('');
  L.push('| model | device vs | tokens | max abs Δ log-prob | loss Δ | gradient rel. error | worst tensor (rel. error) | greedy tokens | result |');
  L.push('|---|---|---|---|---|---|---|---|---|');
  for (const p of r.parity) {
    L.push(`| ${p.model} | ${p.device} vs ${p.cpu} | ${p.tokens} | ${p.maxLogprobDiff.toExponential(2)} | ${p.lossDiff.toExponential(2)} | ${p.gradRelErr.toExponential(2)} | ${p.worstTensor ? `${p.worstTensor.name} (${p.worstTensor.relErr.toExponential(2)})` : '–'} | ${p.greedySame ? 'equal' : 'differ'} | ${p.pass ? 'pass' : 'FAIL'} |`);
  }
  L.push('');
  L.push('## (b) Throughput beside PyTorch (same checkpoint, same device)');
  L.push('');
  L.push(`Benchmark model: batch ${sz.bench.batch} × ${sz.bench.seq} tokens, ${sz.bench.newTokens} new tokens, median of ${sz.bench.reps}. ${likeName}: batch ${sz.like.batch} × ${sz.like.seq}, ${sz.like.newTokens} new tokens, median of ${sz.like.reps}. comlrl timings end on a device sync; PyTorch's (torch_bench.py) too. PyTorch trains every weight (torch_bench has no LoRA), so its fwd+bwd and AdamW columns of the LoRA model are full fine-tuning; PyTorch's scoring figure is batch·seq / forward time.`);
  L.push('');
  L.push('| model | engine | load s | forward ms | fwd+bwd ms | AdamW step ms | scoring tok/s | generation tok/s | peak GPU memory |');
  L.push('|---|---|---|---|---|---|---|---|---|');
  const num = (b: BenchRow | undefined, k: string): number | undefined => (b !== undefined && typeof b.values[k] === 'number' ? (b.values[k] as number) : undefined);
  for (const b of r.bench) {
    const n = (k: string): number | undefined => num(b, k);
    L.push(`| ${b.model} | ${b.engine} | ${fmt(n('load_s'))} | ${fmt(n('forward_ms'))} | ${fmt(n('fwd_bwd_ms'))} | ${fmt(n('adamw_step_ms'))} | ${fmt(n('score_tokens_per_s'), 0)} | ${fmt(n('gen_tokens_per_s'), 0)} | ${b.engine.startsWith('comlrl') ? fmtGiB(n('peak_bytes')) : '–'} |`);
  }
  // comlrl's time over PyTorch's, per model with both rows (throughputs inverted: > 1 is slower).
  for (const model of [...new Set(r.bench.map((b) => b.model))]) {
    const c = r.bench.find((b) => b.model === model && b.engine.startsWith('comlrl'));
    const t = r.bench.find((b) => b.model === model && b.engine.startsWith('PyTorch'));
    if (c === undefined || t === undefined) continue;
    const ratio = (k: string, inverse = false): string => {
      const [x, y] = [num(c, k), num(t, k)];
      return x === undefined || y === undefined || x === 0 || y === 0 ? '–' : `${(inverse ? y / x : x / y).toFixed(2)}×`;
    };
    L.push(`| ${model} | comlrl time ÷ PyTorch time | | ${ratio('forward_ms')} | ${ratio('fwd_bwd_ms')} | ${ratio('adamw_step_ms')} | ${ratio('score_tokens_per_s', true)} | ${ratio('gen_tokens_per_s', true)} | |`);
  }
  if (r.bench.length === 0) L.push('| – | not run | | | | | | | |');
  L.push('');
  L.push('## (c) One CoopHE CoLLM-CC item');
  L.push('');
  L.push(`Two ${likeName} agents with LoRA r=16 (q,k,v,o) and the critic (an adapter + value head) on one shared base, the CoopHE example config (2 turns, level feedback), max_new_tokens ${sz.collmMaxNewTokens}, rollout buffer 2 (an actor and critic update in the item), through \`comlrl train\`.`);
  L.push('');
  L.push('| exit | seconds in all | loading s | training item s | peak GPU memory (CUDA allocator) | reserved at the end | losses logged | CLI summary |');
  L.push('|---|---|---|---|---|---|---|---|');
  if (r.collm) {
    const c = r.collm;
    L.push(`| ${c.exit} | ${fmt(Number(c.seconds))} | ${fmt(Number(c.load_s))} | ${fmt(Number(c.item_s))} | ${fmtGiB(Number(c.peak_bytes))} | ${fmtGiB(Number(c.reserved_bytes))} | ${String(c.losses ?? '–')} | ${String(c.summary ?? '').replace(/\|/g, '/')} |`);
  } else L.push('| not run | | | | | | | |');
  L.push('');
  L.push('## Steps');
  L.push('');
  L.push('| step | status | seconds | note |');
  L.push('|---|---|---|---|');
  for (const s of r.steps) L.push(`| ${s.title} | ${s.status} | ${s.seconds.toFixed(0)} | ${(s.note ?? '').replace(/\n/g, ' ').replace(/\|/g, '/').slice(0, 400)} |`);
  if (r.notes.length > 0) {
    L.push('');
    for (const n of r.notes) L.push(`Note: ${n}`);
  }
  L.push('');
  return L.join('\n');
}

async function mainCli(argv: readonly string[]): Promise<number> {
  if (argv[0] === '--part') {
    await runPart(argv[1], argv[2], argv[3]);
    return 0;
  }
  return orchestrate(parseOptions(argv));
}

const invoked = process.argv[1] !== undefined && fs.existsSync(process.argv[1]) && fs.realpathSync(process.argv[1]) === fs.realpathSync(THIS_FILE);
if (invoked) {
  mainCli(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(`[gpu-check] ${err instanceof Error ? (process.env.COMLRL_DEBUG ? err.stack : err.message) : String(err)}`);
      process.exit(2);
    },
  );
}
