/**
 * Micro-batch plans: which rows run through a model together so that every pass fits the memory
 * budget, and whether layers are recomputed. Gradients of a step are summed over its
 * micro-batches, so a plan changes memory and time, never the loss (up to float rounding).
 *
 * The planner is a function of its inputs: it reads the settings it is given and returns its
 * decision ({@link MicroBatchPlan}, {@link GenerationPlan}), which the caller hands to the passes.
 * It writes nothing into the model and keeps no state.
 */
import * as tf from '@tensorflow/tfjs';
import { torchBf16SavedBytes, torchOnGpu } from '../backend/index.js';
import { MemoryBudgetError } from './errors.js';
import { decoderShape, generationBytes, passBytes, variableBytes, type DecoderShape } from './estimate.js';
import { ramState, reclaimHostMemory, type RamState } from './machine.js';
import { budgetBytes, type MemorySettings, type PassMemory } from './settings.js';

/** What the planner needs of a model: its trainable variables (and, to estimate, its shapes). */
export interface PlannableModel {
  trainableVariables(): tf.Variable[];
  /**
   * Bytes of weights uploaded per use while a pass runs one layer (a frozen base offloaded to host
   * memory); such a model recomputes every layer of a taped pass. Default 0.
   */
  readonly frozenLayerUploadBytes?: number;
}

/** The size of one row as a pass sees it. */
export interface RowSize {
  /** Tokens of the row (prompt + completion, or the critic's input). */
  readonly width: number;
  /** Tokens whose vocabulary log-probs are computed (0 for critic rows). */
  readonly scored: number;
}

/** Options of {@link planMicroBatches}. */
export interface MicroBatchOptions {
  /** What the rows are for, named in errors: `scoring agent 0`. */
  readonly label: string;
  /** A gradient tape records the passes. */
  readonly backward: boolean;
  /** At most this many rows per pass (a config's fixed micro-batch size); null: the memory setting. */
  readonly maxRows?: number | null;
  /** Other models whose trainable variables also get gradients in the same step (a critic head). */
  readonly extraTrainable?: readonly tf.Variable[];
  /** Knobs particular to these rows, named first when they are refused (see MemoryBudgetError). */
  readonly knobs?: readonly string[];
  /** The settings the plan follows (a model's own: `CausalLM.memory`). */
  readonly memory: Readonly<MemorySettings>;
}

/** What {@link planMicroBatches} decided. */
export interface MicroBatchPlan<R> {
  /** The rows, in order, split into the passes that fit. */
  readonly batches: R[][];
  /** The attention block, logits chunk and recomputation every one of those passes runs with. */
  readonly pass: PassMemory;
}

/**
 * Tensor bytes held right now (0 before a backend is set): tfjs's count, less what a frozen base
 * held in bfloat16 on torch does not take (tfjs counts those weights as float32).
 */
export function heldTensorBytes(): number {
  return (tf.getBackend() as string | null | undefined) ? tf.memory().numBytes - torchBf16SavedBytes() : 0;
}

/** Bytes new tensors may take now, and what bounds them. */
export interface FreeTensorMemory {
  readonly bytes: number;
  readonly budget: number;
  /** Off wasm, when the machine's RAM leaves less than the budget: the RAM's state (named in errors). */
  readonly ram: RamState | null;
}

/**
 * The budget less the tensors held now; off wasm also no more than the machine's RAM leaves
 * (see machine.ts), so that a budget set near the RAM is refused in words, not killed by the system.
 */
export function freeTensorMemory(settings: Pick<MemorySettings, 'budgetBytes'>): FreeTensorMemory {
  const budget = budgetBytes(settings);
  const fromBudget = budget - heldTensorBytes();
  const backend = tf.getBackend() as string | null | undefined;
  // wasm's heap and a GPU's memory are bounded by the budget alone, not by the machine's RAM.
  if (!backend || backend === 'wasm' || (backend === 'torch' && torchOnGpu())) return { bytes: fromBudget, budget, ram: null };
  const ram = ramState();
  return ram.freeBytes < fromBudget ? { bytes: ram.freeBytes, budget, ram } : { bytes: fromBudget, budget, ram: null };
}

/**
 * {@link freeTensorMemory}, measured again after a garbage collection when the RAM, not the
 * budget, leaves less than `need`: host buffers nobody holds still count in the resident set
 * until V8 collects them, and a refusal must not be made on their account.
 */
export function freeTensorMemoryFor(need: number, settings: Pick<MemorySettings, 'budgetBytes'>): FreeTensorMemory {
  const free = freeTensorMemory(settings);
  if (free.ram === null || free.bytes >= need) return free;
  reclaimHostMemory();
  return freeTensorMemory(settings);
}

/**
 * The pass the settings give without a plan (a direct pass, or a model without decoder shapes to
 * estimate): their attention block and logits chunk, recomputation only when they say `true`.
 */
export function unplannedPass(s: Readonly<MemorySettings>): PassMemory {
  return { attentionBlockBytes: s.attentionBlockBytes, logitsChunkBytes: s.logitsChunkBytes, recompute: s.recompute === true };
}

/**
 * The attention block and logits chunk under a budget: the settings, but no more than an eighth
 * of what is free each, divided by `shrink` (at least 1 MiB), so that a small budget shrinks the
 * blocks before it refuses a pass.
 */
function blockSizes(s: Readonly<MemorySettings>, available: number, shrink = 1): { attentionBlockBytes: number; logitsChunkBytes: number } {
  const cap = Math.max(2 ** 20, Math.floor(available / 8 / shrink));
  return { attentionBlockBytes: Math.min(s.attentionBlockBytes, cap), logitsChunkBytes: Math.min(s.logitsChunkBytes, cap) };
}

// Smaller attention blocks and logits chunks change time, not results: a row that does not fit
// with the largest blocks is tried with blocks 4 and 16 times smaller before it is refused.
const BLOCK_SHRINKS = [1, 4, 16] as const;

/**
 * Splits `rows` (kept in order) into micro-batches whose passes fit the budget of
 * `options.memory` left after the tensors held now, the step's gradient accumulators and any
 * layer uploads, and chooses the attention block, logits chunk and recomputation those passes run
 * with (recomputation under `recompute: 'auto'` only when the largest row needs it).
 * @throws MemoryBudgetError, before anything is allocated, when one row alone does not fit.
 */
export function planMicroBatches<R>(model: PlannableModel, rows: readonly R[], sizeOf: (row: R) => RowSize, options: MicroBatchOptions): MicroBatchPlan<R> {
  const settings = options.memory;
  if (rows.length === 0) return { batches: [], pass: unplannedPass(settings) };
  const maxRows = options.maxRows ?? (settings.microBatchSize === 'auto' ? Infinity : settings.microBatchSize);
  const shape = decoderShape(model);
  if (!shape) return { batches: chunk(rows, maxRows), pass: unplannedPass(settings) };

  let free = freeTensorMemory(settings);
  // Offloaded layer weights come in one layer at a time, beside the pass's activations.
  const uploads = model.frozenLayerUploadBytes ?? 0;
  const reserved = (options.backward ? variableBytes(model.trainableVariables()) + variableBytes(options.extraTrainable ?? []) : 0) + uploads;
  let available = free.bytes - reserved;
  const sizes = rows.map(sizeOf);
  const vocabSized = shape.vocabSize * shape.hiddenSize;
  const embeddingsTrainable = model.trainableVariables().some((v) => v.size === vocabSized);
  let shrink: number = BLOCK_SHRINKS[0];
  const cost = (batch: readonly RowSize[], recompute: boolean) =>
    passBytes(
      shape,
      { rows: batch.length, width: Math.max(...batch.map((r) => r.width)), scoredTokens: batch.reduce((a, r) => a + r.scored, 0) },
      { backward: options.backward, recompute, embeddingsTrainable, ...blockSizes(settings, available, shrink) },
    );

  const largest = sizes.reduce((a, r) => (r.width > a.width || (r.width === a.width && r.scored > a.scored) ? r : a));
  // Recomputation and block sizes for the largest row, and what that row then costs, given what
  // is available: the largest blocks that fit (recomputation first, smaller blocks next).
  const fitLargest = (): { recompute: boolean; single: number } => {
    let fit = { recompute: false, single: Infinity };
    for (const s of BLOCK_SHRINKS) {
      shrink = s;
      // A model with offloaded layers recomputes every taped pass (see Decoder.forward).
      const rc = uploads > 0 || (settings.recompute === 'auto' && options.backward ? cost([largest], false) > available : settings.recompute === true);
      fit = { recompute: rc, single: cost([largest], rc) };
      if (fit.single <= available) break;
    }
    return fit;
  };
  let { recompute, single } = fitLargest();
  if (single > available && free.ram !== null) {
    free = freeTensorMemoryFor(single + reserved, settings);
    available = free.bytes - reserved;
    ({ recompute, single } = fitLargest());
  }
  if (single > available) {
    throw new MemoryBudgetError(`${options.label} (1 row of ${largest.width} tokens)`, single, available, free.budget, free.ram, options.knobs);
  }
  const pass: PassMemory = { ...blockSizes(settings, available, shrink), recompute };

  const out: R[][] = [];
  let batch: R[] = [];
  let batchSizes: RowSize[] = [];
  rows.forEach((row, i) => {
    const next = [...batchSizes, sizes[i]];
    if (batch.length > 0 && (batch.length >= maxRows || cost(next, recompute) > available)) {
      out.push(batch);
      batch = [];
      batchSizes = [];
    }
    batch.push(row);
    batchSizes.push(sizes[i]);
  });
  out.push(batch);
  return { batches: out, pass };
}

function chunk<R>(rows: readonly R[], size: number): R[][] {
  const n = Number.isFinite(size) && size > 0 ? size : rows.length;
  const out: R[][] = [];
  for (let i = 0; i < rows.length; i += n) out.push(rows.slice(i, i + n));
  return out;
}

/** What a KV-cache generation needs to be planned. */
export interface GenerationRequest {
  /** Sequences to generate in all (prompts × samples). */
  readonly total: number;
  /** Tokens of the widest prompt. */
  readonly promptWidth: number;
  readonly maxNewTokens: number;
  /** The settings the plan follows (a model's own: `CausalLM.memory`). */
  readonly memory: Readonly<MemorySettings>;
  /** What is generated, named in errors. Default `generation`. */
  readonly label?: string;
}

/** What {@link planGeneration} decided. */
export interface GenerationPlan {
  /** Sequences generated together: all of them when they fit. */
  readonly batchSize: number;
  /** The attention block of the prefill passes. */
  readonly attentionBlockBytes: number;
}

/**
 * How many sequences of a KV-cache generation run together: all `total` when they fit the
 * budget, else fewer (at most the memory setting `generationBatchSize`), and the attention block
 * their prefill uses.
 * @throws MemoryBudgetError when a single sequence does not fit.
 */
export function planGeneration(model: PlannableModel, request: GenerationRequest): GenerationPlan {
  const { total, promptWidth, maxNewTokens, memory: settings } = request;
  const label = request.label ?? 'generation';
  const cap = settings.generationBatchSize === 'auto' ? total : Math.min(total, settings.generationBatchSize);
  const shape = decoderShape(model);
  if (!shape) return { batchSize: cap, attentionBlockBytes: settings.attentionBlockBytes };
  let free = freeTensorMemory(settings);
  const uploads = model.frozenLayerUploadBytes ?? 0;
  const firstGuess = generationBytes(shape, 1, promptWidth, maxNewTokens, blockSizes(settings, free.bytes).attentionBlockBytes) + uploads;
  if (firstGuess > free.bytes) free = freeTensorMemoryFor(firstGuess, settings);
  const available = free.bytes - uploads;
  const { attentionBlockBytes } = blockSizes(settings, available);
  // Generation reads every weight in place (Decoder.freeze copies nothing; see matMulWeightT).
  const fits = (n: number) => generationBytes(shape, n, promptWidth, maxNewTokens, attentionBlockBytes) <= available;
  if (!fits(1)) {
    const need = generationBytes(shape, 1, promptWidth, maxNewTokens, attentionBlockBytes);
    throw new MemoryBudgetError(`${label} (1 sequence: ${promptWidth} prompt + ${maxNewTokens} new tokens)`, need, available, free.budget, free.ram);
  }
  let lo = 1;
  let hi = cap;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (fits(mid)) lo = mid;
    else hi = mid - 1;
  }
  return { batchSize: lo, attentionBlockBytes };
}
