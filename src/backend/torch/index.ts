import * as fs from 'node:fs';
import * as tf from '@tensorflow/tfjs';
import { TorchBackend, deviceIndex } from './backend.js';
import { registerTorchKernels } from './kernels.js';
import { registerFusedGradients } from '../fused.js';
import { loadTorchAddon, type TorchAddon } from './native.js';
import { setupHint } from '../setup-home.js';

export { TorchBackend } from './backend.js';
export { TORCH_KERNEL_NAMES } from './kernels.js';
export { torchAddonPath, torchInstalled, torchSetupDir, torchSetupHasCuda, type TorchAddon } from './native.js';

/** How the `torch` backend runs. Unset fields come from the environment, then the defaults. */
export interface TorchOptions {
  /** `cpu`, `cuda` or `cuda:N` (env `COMLRL_TORCH_DEVICE`); default `cuda` when torch sees a GPU, else `cpu`. */
  device?: string;
  /** Intra-op threads on CPU (env `COMLRL_TORCH_THREADS`); default torch's own (one per core). */
  threads?: number;
  /** TF32 tensor cores for float32 matmuls on CUDA (env `COMLRL_TORCH_TF32=1`); default off. */
  tf32?: boolean;
  /** torch's deterministic algorithms (env `COMLRL_TORCH_DETERMINISTIC=1`); default off (CPU kernels used here are deterministic anyway). */
  deterministic?: boolean;
}

let options: TorchOptions = {};

/** Sets the torch backend's options; takes effect at the next `initBackend('torch')`. */
export function configureTorch(next: TorchOptions): void {
  options = { ...options, ...next };
}

function envFlag(name: string): boolean | undefined {
  const v = process.env[name];
  if (v === undefined || v === '') return undefined;
  if (v === '1' || v === 'true') return true;
  if (v === '0' || v === 'false') return false;
  throw new Error(`${name}: expected 1 or 0, got '${v}'`);
}

/** The device a backend would use: the option, the env, else cuda when available. */
export function resolveTorchDevice(addon: TorchAddon, wanted = options.device ?? process.env.COMLRL_TORCH_DEVICE): string {
  const cudaDevices = Number(addon.runtime('cuda_devices', 0));
  if (wanted === undefined || wanted === '' || wanted === 'auto') return cudaDevices > 0 ? 'cuda:0' : 'cpu';
  if (wanted === 'cpu') return 'cpu';
  if (!/^cuda(:\d+)?$/.test(wanted)) throw new Error(`torch device '${wanted}': expected cpu, cuda or cuda:N`);
  if (cudaDevices === 0) {
    throw new Error(`torch device '${wanted}': this torch (${String(addon.runtime('version', 0))}) sees no CUDA GPU; use device cpu, or set up a CUDA build with \`${setupHint('torch', '--python <python with CUDA torch>')}\``);
  }
  const index = deviceIndex(wanted);
  if (index >= cudaDevices) throw new Error(`torch device '${wanted}': only ${cudaDevices} CUDA device(s) are visible`);
  return `cuda:${index}`;
}

let instance: TorchBackend | null = null;

/** The registered torch backend, or null before `initBackend('torch')`. */
export function torchBackend(): TorchBackend | null {
  return instance;
}

/**
 * Registers the `torch` kernel backend with tfjs (once per process): loads the addon, picks the
 * device and applies the thread, TF32 and determinism options.
 */
export function registerTorchBackend(): void {
  if (instance !== null) return;
  const addon = loadTorchAddon();
  const device = resolveTorchDevice(addon);
  const threads = options.threads ?? (process.env.COMLRL_TORCH_THREADS ? Number(process.env.COMLRL_TORCH_THREADS) : undefined);
  if (threads !== undefined) {
    if (!Number.isInteger(threads) || threads < 1) throw new Error(`torch threads: expected a positive integer, got ${threads}`);
    addon.runtime('set_threads', threads);
  }
  addon.runtime('tf32', (options.tf32 ?? envFlag('COMLRL_TORCH_TF32') ?? false) ? 1 : 0);
  const deterministic = options.deterministic ?? envFlag('COMLRL_TORCH_DETERMINISTIC') ?? false;
  // cuBLAS refuses deterministic mode without a fixed workspace; it reads this when it starts.
  if (deterministic) process.env.CUBLAS_WORKSPACE_CONFIG ??= ':4096:8';
  addon.runtime('deterministic', deterministic ? 1 : 0);
  const backend = new TorchBackend(addon, device, device !== 'cpu' || cpuHasBf16Units());
  instance = backend;
  tf.registerBackend('torch', () => backend, 1);
  registerTorchKernels('torch');
  registerFusedGradients();
  aliasSavedTensors(backend);
}

/** What {@link aliasSavedTensors} needs of tfjs's engine beyond its public API. */
interface SavingEngine {
  state: { gradientDepth: number; tensorInfo: WeakMap<tf.DataId, { backend: tf.KernelBackend }> };
  saveTensorsForBackwardMode(tensors: tf.Tensor[]): tf.Tensor[];
  keep<T extends tf.Tensor>(t: T): T;
  makeTensorFromTensorInfo(info: tf.TensorInfo, backend: tf.KernelBackend): tf.Tensor;
}

/**
 * tfjs keeps each tensor a kernel's gradient needs as a clone: an Identity kernel and two tape
 * nodes per saved tensor, ~15–20 µs of JavaScript each (about 180 per forward + backward of the
 * bench model). On torch a clone is another reference to the same handle, so the saved tensor is
 * made as that reference directly. Only under one tape: there the clone's tape nodes lie on no path
 * to the loss (a saved tensor feeds only gradient functions); under nested tapes (a gradient of a
 * gradient) they carry the second-order path, and tfjs's clone runs as before.
 */
function aliasSavedTensors(backend: TorchBackend): void {
  const engine = tf.engine() as unknown as SavingEngine;
  const clone = engine.saveTensorsForBackwardMode.bind(engine);
  engine.saveTensorsForBackwardMode = (tensors: tf.Tensor[]): tf.Tensor[] => {
    if (engine.state.gradientDepth !== 1 || tensors.some((t) => engine.state.tensorInfo.get(t.dataId)?.backend !== backend)) return clone(tensors);
    return tensors.map((t) => {
      backend.incRef(t.dataId);
      return engine.keep(engine.makeTensorFromTensorInfo({ dataId: t.dataId, shape: t.shape, dtype: t.dtype }, backend));
    });
  };
}

/**
 * Whether this CPU has bfloat16 matrix units (AVX512-BF16 or AMX-BF16), from /proc/cpuinfo's
 * flags; false where that file is missing (non-Linux), the safe answer: bfloat16 products then run
 * only for a few rows.
 */
export function cpuHasBf16Units(): boolean {
  try {
    return /\b(avx512_bf16|amx_bf16)\b/.test(fs.readFileSync('/proc/cpuinfo', 'utf8'));
  } catch {
    return false;
  }
}

/** A line describing the torch backend in use: version, device, threads. */
export function describeTorch(): string {
  if (instance === null) return 'torch (not initialised)';
  const a = instance.addon;
  const threads = Number(a.runtime('get_threads', 0));
  const where = instance.device === 'cpu' ? `cpu, ${threads} thread${threads === 1 ? '' : 's'}` : instance.device;
  return `torch ${String(a.runtime('version', 0))} on ${where}`;
}

/**
 * Whether generation samples next tokens on the backend's device (reading back only token ids and
 * log-probs) rather than reading each step's logits to the host: torch on a GPU, or anywhere with
 * `COMLRL_SAMPLE_ON_DEVICE=1` (`0` turns it off on a GPU too).
 */
export function samplesOnDevice(): boolean {
  const env = process.env.COMLRL_SAMPLE_ON_DEVICE;
  if (env === '1') return true;
  if (env === '0') return false;
  return tf.getBackend() === 'torch' && instance !== null && instance.device.startsWith('cuda');
}

/** The torch backend's device (`cpu`, `cuda:N`), or null before `initBackend('torch')`. */
export function torchDevice(): string | null {
  return instance?.device ?? null;
}

/** CUDA devices the torch backend sees (0 before it is set up, or without a GPU). */
export function torchCudaDevices(): number {
  return instance === null ? 0 : Number(instance.addon.runtime('cuda_devices', 0));
}

/** Whether the torch backend is initialised on a CUDA device. */
export function torchOnGpu(): boolean {
  return instance !== null && instance.device.startsWith('cuda');
}

/** The CUDA caching allocator's peak of allocated bytes on the torch backend's GPU, or null on CPU. */
export function torchGpuPeakBytes(): number | null {
  if (instance === null || !instance.device.startsWith('cuda')) return null;
  return Number(instance.addon.runtime('peak', deviceIndex(instance.device)));
}

/**
 * Bytes of the CUDA device the torch backend runs on, or null on CPU (or before it is set up):
 * off CPU, tensors live in the GPU's memory, not the machine's RAM.
 */
export function torchDeviceMemoryBytes(): number | null {
  if (instance === null || !instance.device.startsWith('cuda')) return null;
  // 0: this torch has no device-generic memory API (before 2.10); the budget then needs setting.
  const bytes = Number(instance.addon.runtime('device_memory', deviceIndex(instance.device)));
  return bytes > 0 ? bytes : null;
}

/**
 * Keeps a float32 tensor's values in bfloat16 on the torch backend (half the memory): matrix
 * products with it run in bfloat16 and give float32; other kernels read a float32 copy. For a
 * frozen base's weights. Other backends: a no-op.
 */
export function holdInBfloat16(t: tf.Tensor): void {
  if (tf.getBackend() !== 'torch' || instance === null || t.dtype !== 'float32') return;
  instance.holdInBfloat16(t.dataId, t.size);
}

/**
 * Bytes that tf.memory() counts but torch does not hold: 2 per element of every tensor held in
 * bfloat16 (tfjs sees them as float32). 0 off torch.
 */
export function torchBf16SavedBytes(): number {
  return tf.getBackend() === 'torch' && instance !== null ? 2 * instance.bf16Elements : 0;
}
