/**
 * The memory settings and the budget they give. Settings are a value: a run builds them (the CLI
 * from the config's `memory` section with `memorySettingsOf`, a script as an object) and gives them
 * to `loadCausalLM`, whose model carries them into every pass it plans; nothing here is global.
 */
import * as os from 'node:os';
import { activeBackend, torchDeviceMemoryBytes } from '../backend/index.js';

/**
 * How one pass over a model bounds its memory: what the planner decides for a set of rows
 * (`planMicroBatches`) and what the model's passes are given.
 */
export interface PassMemory {
  /** Bytes one attention block's score buffers may take (queries are processed in blocks). */
  readonly attentionBlockBytes: number;
  /** Bytes one chunk of vocabulary logits may take (scoring processes completion tokens in chunks). */
  readonly logitsChunkBytes: number;
  /** Recompute each decoder layer in the backward pass instead of keeping its activations. */
  readonly recompute: boolean;
}

/** How comlrl bounds the memory of training and generation. */
export interface MemorySettings {
  /**
   * Bytes that tensors may take in all (weights, optimizer state, activations). null: the
   * backend's default ({@link defaultBudgetBytes}).
   */
  budgetBytes: number | null;
  /** Rows per forward/backward pass of scoring and critics; 'auto': as many as fit the budget. */
  microBatchSize: number | 'auto';
  /** Sequences generated together; 'auto': as many as fit the budget. */
  generationBatchSize: number | 'auto';
  /** Per-layer activation recomputation in backward passes; 'auto': only when a pass needs it to fit. */
  recompute: boolean | 'auto';
  /** Bytes one attention block's score buffers may take. */
  attentionBlockBytes: number;
  /** Bytes one chunk of vocabulary logits may take. */
  logitsChunkBytes: number;
  /**
   * Keep a frozen LoRA base's decoder-layer weights in host memory and upload each layer only
   * while a pass runs it (taped passes then always recompute layers); 'auto': on wasm, when those
   * weights would take more than a quarter of the budget (see {@link offloadsFrozenLayers}).
   */
  offloadFrozenLayers: boolean | 'auto';
  /**
   * How a frozen LoRA base's resident matrix weights (layers' linears and the head) are held:
   * `float32`, or `bfloat16` on the torch backend (half the memory; products with them run in
   * bfloat16 with float32 results, as PyTorch's bf16 autocast does). Other backends keep float32.
   */
  frozenBaseDtype: 'float32' | 'bfloat16';
}

const MiB = 2 ** 20;
const GiB = 2 ** 30;

/** Defaults: budget from the backend, automatic micro-batches and recomputation, 64 MiB blocks. */
export const DEFAULT_MEMORY_SETTINGS: Readonly<MemorySettings> = {
  budgetBytes: null,
  microBatchSize: 'auto',
  generationBatchSize: 'auto',
  recompute: 'auto',
  attentionBlockBytes: 64 * MiB,
  logitsChunkBytes: 64 * MiB,
  offloadFrozenLayers: 'auto',
  frozenBaseDtype: 'float32',
};

/**
 * The default tensor budget of a backend: wasm's heap is a 32-bit address space that stops at
 * 4 GiB (weights included), so 3.5 GiB leaves room for the allocator and the runtime; the other
 * backends allocate from the machine's memory, of which half is used for tensors (TensorFlow's
 * allocator, the JS-side weight copies made while loading and the runtime take the rest: at 75% a
 * Qwen3-0.6B LoRA step on tensorflow peaked at 19.5 GB RSS of 24 GB).
 */
export function defaultBudgetBytes(backend: string | null = activeBackend()): number {
  if (backend === 'wasm') return 3.5 * GiB;
  // torch on a GPU: the device's memory, less a tenth for CUDA's context and allocator slack.
  const gpu = backend === 'torch' ? torchDeviceMemoryBytes() : null;
  if (gpu !== null) return Math.floor(0.9 * gpu);
  return Math.floor(0.5 * os.totalmem());
}

/** The budget of `settings`: its `budgetBytes`, else the active backend's default. */
export function budgetBytes(settings: Pick<MemorySettings, 'budgetBytes'>): number {
  return settings.budgetBytes ?? defaultBudgetBytes();
}

/**
 * Whether a frozen base whose decoder layers' linear weights take `layerBytes` keeps them in host
 * memory. wasm's heap stops at 4 GiB with the weights inside it (Qwen3-0.6B's layers alone take
 * 1.64 GiB of the 3.5 GiB budget), while host memory is the machine's; uploading a layer per use
 * costs a copy per pass, so 'auto' does it only where the heap is the limit and the layers a
 * large part of it. Other backends allocate from the machine's memory anyway.
 */
export function offloadsFrozenLayers(layerBytes: number, settings: Pick<MemorySettings, 'offloadFrozenLayers' | 'budgetBytes'>, backend: string | null = activeBackend()): boolean {
  const s = settings.offloadFrozenLayers;
  if (s !== 'auto') return s;
  return backend === 'wasm' && layerBytes > budgetBytes(settings) / 4;
}

const UNITS: Record<string, number> = { b: 1, kb: 1e3, mb: 1e6, gb: 1e9, tb: 1e12, kib: 2 ** 10, mib: MiB, gib: GiB, tib: 2 ** 40 };

/**
 * Bytes from a number or a size string: `3.5GiB`, `3500MB`, `2e9` (B, kB/KiB, MB/MiB, GB/GiB,
 * TB/TiB; decimal and binary units as written). Throws a message naming the accepted forms.
 */
export function parseBytes(value: number | string, field = 'memory size'): number {
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value <= 0) throw new Error(`${field}: must be a positive number of bytes, got ${value}`);
    return Math.floor(value);
  }
  const m = /^\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-z]*)\s*$/i.exec(value);
  const unit = m ? UNITS[(m[2] || 'b').toLowerCase()] : undefined;
  if (!m || unit === undefined) throw new Error(`${field}: '${value}' is not a size; write e.g. 3.5GiB, 3500MB or 2e9`);
  const bytes = Math.floor(Number(m[1]) * unit);
  if (!(bytes > 0)) throw new Error(`${field}: must be positive, got '${value}'`);
  return bytes;
}
