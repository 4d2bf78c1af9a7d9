/**
 * The machine's memory as a limit on tensors. wasm's tensors live in its own heap (the budget
 * covers that); every other backend allocates from the machine, where the process also holds
 * what is not a tensor (TensorFlow's allocator, load-time weight copies, Node itself: 4–7 GiB more
 * than its tensors in the tensorflow memory benches). A budget set near the machine's RAM would
 * let the system's out-of-memory killer end the run without a word, so passes are also planned
 * against what the RAM has left.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as v8 from 'node:v8';
import * as vm from 'node:vm';

/** Share of the RAM limit kept free for the system and for allocations no estimate sees. */
export const RAM_HEADROOM = 0.08;

/** A cgroup's memory limit in bytes, or null where there is none (or it is not readable). */
function cgroupLimitBytes(): number | null {
  for (const file of ['/sys/fs/cgroup/memory.max', '/sys/fs/cgroup/memory/memory.limit_in_bytes']) {
    try {
      const text = fs.readFileSync(file, 'utf8').trim();
      const bytes = Number(text);
      // "max", or the kernel's near-2^63 "no limit" value.
      if (Number.isFinite(bytes) && bytes > 0 && bytes < 2 ** 60) return bytes;
    } catch {
      // no such cgroup file on this system
    }
  }
  return null;
}

/** Physical memory this process may use: the machine's RAM, or its cgroup's limit when lower. */
export function ramLimitBytes(): number {
  const cgroup = cgroupLimitBytes();
  return cgroup === null ? os.totalmem() : Math.min(cgroup, os.totalmem());
}

/** What the RAM has left for new tensors off wasm: the limit less the headroom and the process's resident memory. */
export interface RamState {
  readonly limitBytes: number;
  readonly residentBytes: number;
  readonly freeBytes: number;
}

/** The RAM left to this process now (its resident set counts the tensors it holds). */
export function ramState(): RamState {
  const limitBytes = ramLimitBytes();
  const residentBytes = process.memoryUsage.rss();
  return { limitBytes, residentBytes, freeBytes: Math.floor((1 - RAM_HEADROOM) * limitBytes) - residentBytes };
}

let collect: (() => void) | null | undefined;

/**
 * Runs V8's full garbage collection so that host buffers nobody holds any more (the weights'
 * load-time copies, values read back from tensors) leave the resident set before it is measured
 * for a refusal: V8 frees large array buffers only when it collects, and until then they count in
 * the RSS. Returns false where the collector cannot be reached.
 */
export function reclaimHostMemory(): boolean {
  if (collect === undefined) {
    try {
      v8.setFlagsFromString('--expose-gc');
      collect = vm.runInNewContext('gc') as () => void;
    } catch {
      collect = null;
    }
  }
  collect?.();
  return collect !== null;
}
