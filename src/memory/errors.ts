/**
 * Memory failures in words a user can act on: a pass refused before it allocates, and the
 * backend's own crashes (wasm's `memory access out of bounds`, `Aborted()`) translated.
 */
import { formatBytes } from '../logging/format.js';
import { RAM_HEADROOM, type RamState } from './machine.js';

/** What a user can turn down, named as config keys. */
export const MEMORY_KNOBS = [
  'max_new_tokens',
  'num_generations',
  'memory.micro_batch_size (or memory.generation_batch_size)',
  'lora (train adapters on a frozen base instead of every weight)',
  'a smaller model',
  'memory.budget (at most ~3.5 GiB on wasm; the tensorflow backend has no 4 GiB cap)',
] as const;

/** The knob of a critic pass: how much history its input carries. */
export const CRITIC_INPUT_KNOB = 'critic_max_length (tokens of history a critic reads; oldest turns are dropped first)';

/** A pass that would not fit the memory budget; thrown before anything is allocated for it. */
export class MemoryBudgetError extends Error {
  constructor(
    /** What was about to run, e.g. `scoring agent 0 (1 row of 2,048 tokens)`. */
    readonly pass: string,
    readonly estimateBytes: number,
    readonly availableBytes: number,
    readonly budgetBytes: number,
    /** Set when the machine's RAM, not the budget, left too little (backends other than wasm). */
    readonly ram: RamState | null = null,
    /** Knobs particular to this pass, named before the general ones (a critic's `critic_max_length`). */
    readonly knobs: readonly string[] = [],
  ) {
    const free = ram
      ? `${formatBytes(Math.max(0, availableBytes))} of this machine's ${formatBytes(ram.limitBytes)} of RAM is free ` +
        `(the process holds ${formatBytes(ram.residentBytes)}, ${Math.round(RAM_HEADROOM * 100)}% is kept for the system; ` +
        `memory.budget ${formatBytes(budgetBytes)} is more than this machine can give)`
      : `${formatBytes(Math.max(0, availableBytes))} of the ${formatBytes(budgetBytes)} budget is free ` +
        `(the rest holds weights and optimizer state)`;
    super(`not enough memory for ${pass}: it needs about ${formatBytes(estimateBytes)} but only ${free}. Reduce one of: ${[...knobs, ...MEMORY_KNOBS].join('; ')}.`);
    this.name = 'MemoryBudgetError';
  }
}

const BACKEND_CRASHES = [
  /memory access out of bounds/i,
  /table index is out of bounds/i,
  /^Aborted\(/,
  /Aborted\(\)/,
  /Array buffer allocation failed/i,
  /Out of memory/i,
  /Cannot enlarge memory/i,
  /OOM when allocating/i,
  /RangeError: WebAssembly\.Memory/i,
  // A view of the wasm heap past its end: a tensor's allocation failed at the 4 GiB edge
  // (a 40-layer Qwen3-0.6B-shaped LoRA run, reading its 622 MB head).
  /Invalid typed array length/i,
  // What a wasm heap corrupted by a failed allocation reports next.
  /null function or function signature mismatch/i,
  /RuntimeError: unreachable/i,
];

/** A backend memory crash said in words (see {@link backendMemoryError}); `cause` is the backend's error. */
export class BackendMemoryError extends Error {}

/**
 * Whether an error is a backend running out of memory (rather than a bug of ours or the user's)
 * that is not yet said in words.
 */
export function isBackendMemoryCrash(err: unknown): boolean {
  if (err instanceof BackendMemoryError) return false;
  const text = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return BACKEND_CRASHES.some((re) => re.test(text));
}

/** The plain-words error for a backend memory crash, keeping the original as `cause`. */
export function backendMemoryError(err: unknown, backend: string | null, budget: number): BackendMemoryError {
  const original = err instanceof Error ? err.message : String(err);
  const heap = backend === 'wasm' ? "the wasm backend's heap (4 GiB at most)" : `the ${backend ?? 'tensor'} backend's memory`;
  return new BackendMemoryError(
    `ran out of memory: ${heap} could not hold this step (the backend said: ${original.split('\n')[0]}). ` +
      `comlrl's budget was ${formatBytes(budget)}; its estimates missed this pass. Reduce one of: ${MEMORY_KNOBS.join('; ')}. ` +
      'Checkpoints already written are intact; resume from the last one with `npx comlrl train --resume`.',
    { cause: err },
  );
}

/**
 * `err` said in words ({@link backendMemoryError}) when it is a backend memory crash, else `err`
 * as it is. Whoever knows the memory settings a run used names its budget: the CLI's commands,
 * from the run config.
 */
export function inMemoryCrashWords(err: unknown, backend: string | null, budget: number): unknown {
  return isBackendMemoryCrash(err) ? backendMemoryError(err, backend, budget) : err;
}
