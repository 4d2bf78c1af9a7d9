/**
 * `node dist/bench/run.js profile-torch`: where the bench model's time goes on the torch backend,
 * kernel by kernel. Wraps tfjs's engine (`runKernelFunc`, which every op and every gradient goes
 * through) to add each kernel's wall time to its name, exclusive of kernels it runs itself (a
 * customGrad's forward: its own time is then the JavaScript of the ops it calls, tidy and saves),
 * and the backend's `readSync` as `(download)`. torch's CPU kernels are synchronous, so a call's
 * wall time is its kernel's time (plus the addon call and tfjs's per-kernel bookkeeping); on CUDA
 * the wrapper synchronizes the device after each kernel. The rest of a pass's wall time (`other`)
 * is JavaScript: tfjs's op wrappers and tape, the model's own code, sampling.
 *
 * Passes (the bench model, bench/model.ts, same shapes and ids): `forward` (all logits),
 * `fwd_bwd` (full model), `adamw` (the optimizer step alone, gradients made beforehand),
 * `scoring`, `lora_fwd_bwd` and `lora_scoring` (LoRA r = 16 q,k,v,o; float32 base), the same two
 * with the base held in bfloat16 (`*_bf16`), and `decode_step`: one KV-cache decoding step of 4
 * rows, as (generation of 32 new tokens − generation of 1) / 31. Each pass runs once unprofiled,
 * then COMLRL_PROFILE_REPS (3) times profiled; figures are per pass. COMLRL_PROFILE_PASSES picks
 * passes (comma-separated), COMLRL_PROFILE_TOP the rows per table (12). COMLRL_BACKEND picks
 * another backend (default torch).
 *
 * Beside each pass, PyTorch's (bench/pytorch.ts's Python, torch_bench.py's model under
 * torch.profiler, ops by self time) for the pass it is compared with in the model table: the full
 * model's forward for scoring, float32 or bfloat16 for the LoRA passes; with COMLRL_TORCH_THREADS
 * set, PyTorch runs that many threads too. COMLRL_PROFILE_PYTORCH=0 skips it. Figures only.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { describeTorch, initBackend, torchBackend } from '../src/backend/index.js';
import { loadCausalLM, type TfCausalLM } from '../src/model/index.js';
import { AdamW } from '../src/optim/index.js';
import { BENCH_SHAPE, benchFwdBwd, benchIds, benchLoss, loadBenchLora, syncOn, writeBenchModel } from './model.js';
import { torchBenchScript, torchPython, type TorchDtype } from './pytorch.js';

/** Wall time and calls of one kernel name (or one name and input shapes). */
export interface KernelTotal {
  ms: number;
  calls: number;
}

export type KernelTotals = Map<string, KernelTotal>;

/** A profile of one pass: its wall time and the kernels' exclusive times in it. */
export interface PassProfile {
  wallMs: number;
  byName: KernelTotals;
  /** Keyed `Name [shape]·[shape]` (the inputs' shapes). */
  byShape: KernelTotals;
}

/** What this file needs of tfjs's engine beyond its public API. */
interface KernelInvocation {
  kernelName?: string;
  inputs: Record<string, tf.TensorInfo | null | undefined>;
}
interface EngineInternals {
  runKernelFunc(params: KernelInvocation): unknown;
  state: { activeScope: { name: string } | null };
}
interface ReadableBackend {
  readSync(dataId: tf.DataId): tf.backend_util.BackendValues;
}

function add(totals: KernelTotals, key: string, ms: number, calls = 1): void {
  const t = totals.get(key);
  if (t === undefined) totals.set(key, { ms, calls });
  else {
    t.ms += ms;
    t.calls += calls;
  }
}

/**
 * Times every kernel tfjs runs while installed. Nested kernels (a customGrad's forward runs ops)
 * are charged to themselves: the outer entry gets its own time only.
 */
export class KernelTimer {
  byName: KernelTotals = new Map();
  byShape: KernelTotals = new Map();
  // Time of the kernels running inside each kernel in flight (innermost last).
  private readonly nested: number[] = [];
  private uninstall: (() => void) | null = null;

  install(): void {
    if (this.uninstall !== null) return;
    const engine = tf.engine() as unknown as EngineInternals;
    const backend = tf.backend() as unknown as ReadableBackend;
    const runKernelFunc = engine.runKernelFunc;
    const readSync = backend.readSync;
    const torch = torchBackend();
    const sync = torch !== null && tf.getBackend() === 'torch' && torch.device !== 'cpu' ? () => torch.synchronize() : () => undefined;
    engine.runKernelFunc = (params: KernelInvocation): unknown => {
      // A customGrad has no kernel name; its own time is the JavaScript around the kernels it runs.
      const scope = engine.state.activeScope?.name;
      const name = params.kernelName ?? (scope && scope !== 'unnamed scope' ? `customGrad ${scope}` : 'customGrad');
      return this.timed(name, params.inputs, () => {
        const out = runKernelFunc.call(engine, params);
        sync();
        return out;
      });
    };
    backend.readSync = (dataId: tf.DataId) => this.timed('(download)', {}, () => readSync.call(backend, dataId));
    this.uninstall = () => {
      engine.runKernelFunc = runKernelFunc;
      backend.readSync = readSync;
    };
  }

  remove(): void {
    this.uninstall?.();
    this.uninstall = null;
  }

  reset(): void {
    this.byName = new Map();
    this.byShape = new Map();
  }

  private timed<T>(name: string, inputs: KernelInvocation['inputs'], run: () => T): T {
    this.nested.push(0);
    const t0 = performance.now();
    try {
      return run();
    } finally {
      const ms = performance.now() - t0;
      const inner = this.nested.pop() ?? 0;
      if (this.nested.length > 0) this.nested[this.nested.length - 1] += ms;
      const shapes = Object.values(inputs)
        .filter((t): t is tf.TensorInfo => t != null)
        .map((t) => `[${t.shape.join(',')}]`)
        .join('·');
      add(this.byName, name, ms - inner);
      add(this.byShape, `${name} ${shapes}`, ms - inner);
    }
  }
}

/** Runs `pass` once unprofiled, then `reps` times profiled; per-pass figures (means). */
async function profilePass(timer: KernelTimer, pass: () => Promise<unknown>, reps: number): Promise<PassProfile> {
  await pass();
  timer.reset();
  timer.install();
  const t0 = performance.now();
  try {
    for (let i = 0; i < reps; i++) await pass();
  } finally {
    timer.remove();
  }
  const wallMs = performance.now() - t0;
  return scale({ wallMs, byName: timer.byName, byShape: timer.byShape }, 1 / reps);
}

function scaleTotals(t: KernelTotals, f: number): KernelTotals {
  return new Map([...t].map(([k, v]) => [k, { ms: v.ms * f, calls: v.calls * f }]));
}

function scale(p: PassProfile, f: number): PassProfile {
  return { wallMs: p.wallMs * f, byName: scaleTotals(p.byName, f), byShape: scaleTotals(p.byShape, f) };
}

/** (a − b) · f per key: what `a` does beyond `b`. */
function difference(a: PassProfile, b: PassProfile, f: number): PassProfile {
  const diff = (x: KernelTotals, y: KernelTotals): KernelTotals => {
    const out: KernelTotals = new Map();
    for (const [k, v] of x) {
      const w = y.get(k) ?? { ms: 0, calls: 0 };
      out.set(k, { ms: (v.ms - w.ms) * f, calls: (v.calls - w.calls) * f });
    }
    return out;
  };
  return { wallMs: (a.wallMs - b.wallMs) * f, byName: diff(a.byName, b.byName), byShape: diff(a.byShape, b.byShape) };
}

const sumMs = (t: KernelTotals): number => [...t.values()].reduce((a, v) => a + v.ms, 0);
const sumCalls = (t: KernelTotals): number => [...t.values()].reduce((a, v) => a + v.calls, 0);

function topRows(t: KernelTotals, wallMs: number, top: number): string[] {
  return [...t]
    .sort((a, b) => b[1].ms - a[1].ms)
    .slice(0, top)
    .map(([k, v]) => `| ${k} | ${v.calls.toFixed(0)} | ${v.ms.toFixed(2)} | ${v.calls > 0 ? ((1000 * v.ms) / v.calls).toFixed(1) : '–'} | ${((100 * v.ms) / wallMs).toFixed(1)}% |`);
}

/** Prints a pass's wall time, kernel time and the top kernels by name and by input shapes. */
export function printPassProfile(title: string, p: PassProfile, top: number): void {
  const kernelMs = sumMs(p.byName);
  console.log(`\n### ${title}: ${p.wallMs.toFixed(1)} ms per pass; kernels ${kernelMs.toFixed(1)} ms in ${sumCalls(p.byName).toFixed(0)} calls, other (JS, tape, bookkeeping) ${(p.wallMs - kernelMs).toFixed(1)} ms\n`);
  console.log('| kernel | calls | ms | µs per call | of the pass |');
  console.log('|---|---|---|---|---|');
  for (const row of topRows(p.byName, p.wallMs, top)) console.log(row);
  console.log('\n| kernel, input shapes | calls | ms | µs per call | of the pass |');
  console.log('|---|---|---|---|---|');
  for (const row of topRows(p.byShape, p.wallMs, top)) console.log(row);
}

export const PROFILE_PASSES = ['forward', 'fwd_bwd', 'adamw', 'scoring', 'lora_fwd_bwd', 'lora_scoring', 'lora_fwd_bwd_bf16', 'lora_scoring_bf16', 'decode_step'] as const;
export type ProfilePass = (typeof PROFILE_PASSES)[number];

function wantedPasses(): Set<ProfilePass> {
  const env = process.env.COMLRL_PROFILE_PASSES;
  if (env === undefined || env === '') return new Set(PROFILE_PASSES);
  const list = env.split(',').map((x) => x.trim()).filter(Boolean);
  for (const p of list) if (!(PROFILE_PASSES as readonly string[]).includes(p)) throw new Error(`COMLRL_PROFILE_PASSES: unknown pass '${p}'; expected some of ${PROFILE_PASSES.join(', ')}`);
  return new Set(list as ProfilePass[]);
}

/** The pass of torch_bench.py's model each of ours is compared with (its scoring figure is its forward). */
const PYTORCH_PASS: Record<ProfilePass, { pass: PyTorchPass; dtype: TorchDtype }> = {
  forward: { pass: 'forward', dtype: 'float32' },
  fwd_bwd: { pass: 'fwd_bwd', dtype: 'float32' },
  adamw: { pass: 'adamw', dtype: 'float32' },
  scoring: { pass: 'forward', dtype: 'float32' },
  lora_fwd_bwd: { pass: 'fwd_bwd', dtype: 'float32' },
  lora_scoring: { pass: 'forward', dtype: 'float32' },
  lora_fwd_bwd_bf16: { pass: 'fwd_bwd', dtype: 'bfloat16' },
  lora_scoring_bf16: { pass: 'forward', dtype: 'bfloat16' },
  decode_step: { pass: 'decode_step', dtype: 'float32' },
};

type PyTorchPass = 'forward' | 'fwd_bwd' | 'adamw' | 'decode_step';

/**
 * torch.profiler over torch_bench.py's model (imported from the baseline script), the same passes
 * and shapes; prints {pass: {wall_ms, ops: {name: [self ms, calls]}}} per pass (means). The
 * decoding step is (generation of NEW tokens − generation of 1) / (NEW − 1), as ours.
 */
const PYTORCH_PROFILE = `
import json, os, sys, time
script, model_dir, dtype, reps, passes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5].split(',')
B, T, NEW = (int(x) for x in sys.argv[6:9])
sys.argv = [script, model_dir, '--dtype', dtype]
sys.path.insert(0, os.path.dirname(script))
import torch
from torch.profiler import profile, ProfilerActivity
import torch_bench as tb
torch.manual_seed(0)
cfg, W = tb.load(model_dir); m = tb.Model(cfg, W)
ids = torch.randint(0, cfg['vocab_size'], (B, T))
opt = torch.optim.AdamW(list(W.values()), lr=1e-5)
def loss():
    lp = torch.log_softmax(m.forward(ids[:, :-1])[0].float(), -1)
    return -lp.gather(-1, ids[:, 1:, None]).mean()
def forward():
    with torch.no_grad(): m.forward(ids)
def fwd_bwd():
    opt.zero_grad(); loss().backward()
def adamw():
    opt.step()
def gen(new):
    def run():
        with torch.no_grad():
            prompt = ids[:, :T - NEW]; logits, past = m.forward(prompt)
            nxt = logits[:, -1].argmax(-1, keepdim=True); pos = prompt.shape[1]
            for _ in range(new - 1):
                logits, past = m.forward(nxt, past, pos); pos += 1
                nxt = logits[:, -1].argmax(-1, keepdim=True)
    return run
def shapes(e):
    return '·'.join('[' + ','.join(str(d) for d in s) + ']' for s in e.input_shapes if s)
def prof(f):
    f()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as p:
        t = time.perf_counter()
        for _ in range(reps): f()
        wall = (time.perf_counter() - t) * 1000 / reps
    per = lambda e: [e.self_cpu_time_total / 1000 / reps, e.count / reps]
    return {'wall_ms': wall, 'ops': {e.key: per(e) for e in p.key_averages()},
            'by_shape': {(e.key + ' ' + shapes(e)).strip(): per(e) for e in p.key_averages(group_by_input_shape=True)}}
def minus(a, b):
    return {k: [(v[0] - b.get(k, [0, 0])[0]) / (NEW - 1), (v[1] - b.get(k, [0, 0])[1]) / (NEW - 1)] for k, v in a.items()}
out = {}
if 'adamw' in passes: fwd_bwd()
for name in passes:
    if name == 'decode_step':
        a, b = prof(gen(NEW)), prof(gen(1))
        out[name] = {'wall_ms': (a['wall_ms'] - b['wall_ms']) / (NEW - 1), 'ops': minus(a['ops'], b['ops']), 'by_shape': minus(a['by_shape'], b['by_shape'])}
    else:
        out[name] = prof({'forward': forward, 'fwd_bwd': fwd_bwd, 'adamw': adamw}[name])
print(json.dumps(out))
`;

interface PyTorchProfile {
  wall_ms: number;
  /** op name → [self ms, calls] */
  ops: Record<string, [number, number]>;
  /** `op [shape]·[shape]` → [self ms, calls] */
  by_shape: Record<string, [number, number]>;
}

/** PyTorch's profiles of `passes` in `dtype` (keyed by pass), or null without a Python with torch. */
function profilePyTorch(dir: string, dtype: TorchDtype, passes: readonly PyTorchPass[], reps: number): Map<PyTorchPass, PyTorchProfile> | null {
  const py = torchPython();
  const script = torchBenchScript();
  if (py === null || !fs.existsSync(script) || passes.length === 0) return null;
  const file = path.join(dir, 'pytorch_profile.py');
  fs.writeFileSync(file, PYTORCH_PROFILE);
  const s = BENCH_SHAPE;
  const threads = process.env.COMLRL_TORCH_THREADS;
  const r = spawnSync(py.python, [file, script, dir, dtype, String(reps), passes.join(','), String(s.batch), String(s.seq), String(s.newTokens)], {
    encoding: 'utf8',
    maxBuffer: 1 << 26,
    // The same thread count as ours when COMLRL_TORCH_THREADS pins it.
    env: threads ? { ...py.env, OMP_NUM_THREADS: threads } : py.env,
  });
  if (r.status !== 0) {
    console.error(`PyTorch profile (${dtype}) failed: ${r.stderr.trim().split('\n').slice(-2).join(' / ')}`);
    return null;
  }
  const parsed = JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as Record<string, PyTorchProfile>;
  return new Map(Object.entries(parsed) as [PyTorchPass, PyTorchProfile][]);
}

/** Prints PyTorch's pass: wall time, op time and the top ops by self time, by name and by input shapes. */
function printPyTorchProfile(title: string, p: PyTorchProfile, top: number): void {
  const totals = (r: Record<string, [number, number]>): KernelTotals => new Map(Object.entries(r).map(([k, [ms, calls]]) => [k, { ms, calls }]));
  const ops = totals(p.ops);
  console.log(`\nPyTorch, ${title}: ${p.wall_ms.toFixed(1)} ms per pass (under torch.profiler); ops ${sumMs(ops).toFixed(1)} ms self time in ${sumCalls(ops).toFixed(0)} calls\n`);
  console.log('| PyTorch op | calls | self ms | µs per call | of the pass |');
  console.log('|---|---|---|---|---|');
  for (const row of topRows(ops, p.wall_ms, top)) console.log(row);
  console.log('\n| PyTorch op, input shapes | calls | self ms | µs per call | of the pass |');
  console.log('|---|---|---|---|---|');
  for (const row of topRows(totals(p.by_shape), p.wall_ms, top)) console.log(row);
}

/**
 * Profiles the wanted passes on COMLRL_BACKEND (default torch), then PyTorch's matching passes
 * (unless COMLRL_PROFILE_PYTORCH=0), and prints both per pass.
 */
export async function profileTorch(): Promise<void> {
  const backend = await initBackend(process.env.COMLRL_BACKEND ? undefined : 'torch');
  const reps = Number(process.env.COMLRL_PROFILE_REPS ?? 3);
  const top = Number(process.env.COMLRL_PROFILE_TOP ?? 12);
  const passes = wantedPasses();
  const s = BENCH_SHAPE;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-profile-torch-'));
  const timer = new KernelTimer();
  const ours = new Map<ProfilePass, { title: string; profile: PassProfile }>();
  console.log(`# Kernel profile on ${backend === 'torch' ? describeTorch() : backend} (${os.cpus().length} cores, load ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}): bench model, batch ${s.batch} × ${s.seq}; ${reps} profiled runs per pass`);
  try {
    writeBenchModel(dir);
    const ids = benchIds();
    const prompts = ids.map((r) => r.slice(0, 1));
    const completions = ids.map((r) => r.slice(1));
    const run = async (pass: ProfilePass, title: string, f: () => Promise<unknown>): Promise<void> => {
      if (passes.has(pass)) ours.set(pass, { title, profile: await profilePass(timer, f, reps) });
    };

    if (['forward', 'fwd_bwd', 'adamw', 'scoring', 'decode_step'].some((p) => passes.has(p as ProfilePass))) {
      const model: TfCausalLM = await loadCausalLM(dir);
      try {
        const loss = benchLoss(model, ids);
        await run('forward', 'forward (all logits)', async () => {
          const l = model.logits(ids);
          await syncOn(l);
          l.dispose();
        });
        await run('fwd_bwd', 'forward + backward (full model)', () => benchFwdBwd(model, loss));
        if (passes.has('adamw')) {
          const vars = model.trainableVariables();
          const opt = new AdamW(vars, { lr: 1e-5 });
          const { value, grads } = tf.variableGrads(loss, vars);
          await run('adamw', 'AdamW step (the optimizer alone)', async () => {
            opt.step(grads);
            await vars[vars.length - 1].data();
          });
          tf.dispose([value, ...Object.values(grads)]);
          opt.dispose();
        }
        await run('scoring', `scoring (${s.batch} × ${s.seq - 1} tokens)`, () => model.tokenLogProbs(prompts, completions));
        if (passes.has('decode_step')) {
          const genPrompts = ids.map((r) => r.slice(0, s.seq - s.newTokens));
          const gen = (maxNewTokens: number) => () => model.generateWith(genPrompts, { maxNewTokens, greedy: true, eosTokenIds: [] }, 'cache');
          const all = await profilePass(timer, gen(s.newTokens), reps);
          const prefill = await profilePass(timer, gen(1), reps);
          ours.set('decode_step', {
            title: `one KV-cache decoding step (${s.batch} rows; generation of ${s.newTokens} tokens minus generation of 1, per step)`,
            profile: difference(all, prefill, 1 / (s.newTokens - 1)),
          });
        }
      } finally {
        model.dispose();
      }
    }
    for (const dtype of ['float32', 'bfloat16'] as const) {
      const suffix = dtype === 'bfloat16' ? '_bf16' : '';
      const fwdBwd = `lora_fwd_bwd${suffix}` as ProfilePass;
      const scoring = `lora_scoring${suffix}` as ProfilePass;
      if (!passes.has(fwdBwd) && !passes.has(scoring)) continue;
      const lora = await loadBenchLora(dir, { frozenBaseDtype: dtype });
      try {
        const loss = benchLoss(lora, ids);
        await run(fwdBwd, `LoRA forward + backward (${dtype} base)`, () => benchFwdBwd(lora, loss));
        await run(scoring, `LoRA scoring (${dtype} base)`, () => lora.tokenLogProbs(prompts, completions));
      } finally {
        lora.dispose();
      }
    }

    const theirs = new Map<TorchDtype, Map<PyTorchPass, PyTorchProfile> | null>();
    if (process.env.COMLRL_PROFILE_PYTORCH !== '0') {
      for (const dtype of ['float32', 'bfloat16'] as const) {
        const wanted = [...new Set([...ours.keys()].map((p) => PYTORCH_PASS[p]).filter((m) => m.dtype === dtype).map((m) => m.pass))];
        theirs.set(dtype, profilePyTorch(dir, dtype, wanted, reps));
      }
    }
    for (const [pass, { title, profile }] of ours) {
      printPassProfile(title, profile, top);
      const match = PYTORCH_PASS[pass];
      const p = theirs.get(match.dtype)?.get(match.pass);
      if (p !== undefined) printPyTorchProfile(`${match.pass.replace('_', ' ')} in ${match.dtype}`, p, top);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
