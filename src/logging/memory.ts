import * as tf from '@tensorflow/tfjs';
import { torchGpuPeakBytes } from '../backend/index.js';

/** Memory figures for logs. */
export interface MemoryReport {
  /** Resident set size now, bytes. */
  readonly rssBytes: number;
  /** Highest resident set size of this process so far (kernel high-water mark), bytes. */
  readonly peakRssBytes: number;
  /** Bytes held by tfjs tensors now (0 before a backend is set). */
  readonly tensorBytes: number;
  /** Highest `tensorBytes` seen by any {@link peakMemory} / {@link sampleMemory} call, bytes. */
  readonly peakTensorBytes: number;
  /** Live tfjs tensors now. */
  readonly numTensors: number;
  /**
   * Size of the wasm backend's heap, bytes: it grows and never shrinks, so it is the backend's
   * high-water mark (at most 4 GiB). Null on other backends.
   */
  readonly wasmHeapBytes: number | null;
  /** The GPU's peak of allocated bytes (CUDA's allocator) when torch runs on a GPU; else null. */
  readonly gpuPeakBytes: number | null;
}

let peakTensorBytes = 0;

/**
 * Records the current tfjs tensor bytes into the running maximum. Call it where memory peaks (e.g.
 * after a backward pass) so that {@link peakMemory} sees that peak; cheap.
 */
export function sampleMemory(): void {
  const bytes = tensorBytes().bytes;
  if (bytes > peakTensorBytes) peakTensorBytes = bytes;
}

/** Process and tensor memory now and at their peaks. */
export function peakMemory(): MemoryReport {
  sampleMemory();
  const { bytes, count } = tensorBytes();
  // maxRSS is in kilobytes on every platform Node supports.
  const peakRss = process.resourceUsage().maxRSS * 1024;
  const rss = process.memoryUsage.rss();
  return {
    rssBytes: rss,
    peakRssBytes: Math.max(peakRss, rss),
    tensorBytes: bytes,
    peakTensorBytes,
    numTensors: count,
    wasmHeapBytes: wasmHeapBytes(),
    gpuPeakBytes: torchGpuPeakBytes(),
  };
}

/** The wasm backend's heap size (its high-water mark), or null when another backend is active. */
export function wasmHeapBytes(): number | null {
  if ((tf.getBackend() as string | null | undefined) !== 'wasm') return null;
  const heap = (tf.backend() as unknown as { wasm?: { HEAPU8?: Uint8Array } }).wasm?.HEAPU8;
  return heap ? heap.buffer.byteLength : null;
}

function tensorBytes(): { bytes: number; count: number } {
  // tf.memory() would pick and initialise a backend on its own; only ask once one is set.
  if (!(tf.getBackend() as string | null | undefined)) return { bytes: 0, count: 0 };
  const m = tf.memory();
  return { bytes: m.numBytes, count: m.numTensors };
}
