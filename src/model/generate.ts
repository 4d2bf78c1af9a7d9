import * as tf from '@tensorflow/tfjs';
import { samplesOnDevice, tidyKeep } from '../backend/index.js';
import { sampleNextTokens, sampleNextTokensOnDevice } from '../sampling/index.js';
import type { Decoder, FrozenWeights, LayerCache } from './decoder.js';
import type { RotaryTables } from './rope.js';
import { GENERATION_YIELD_MS, type GenerationOutput, type SamplingOptions } from './types.js';

/** What the generation loop needs from a model. */
export interface GenerationModel {
  readonly decoder: Decoder;
  readonly rope: RotaryTables;
  readonly vocabSize: number;
  readonly eosTokenIds: readonly number[];
}

/** `cache`: one position per new token (KV cache); `recompute`: the whole sequence each step. */
export type GenerationMode = 'cache' | 'recompute';

function checkPrompts(promptIds: number[][], vocabSize: number): void {
  if (promptIds.length === 0) throw new Error('generate: promptIds is empty');
  promptIds.forEach((p, i) => {
    if (p.length === 0) throw new Error(`generate: promptIds[${i}] is empty (a prompt needs at least one token)`);
    for (const id of p) {
      if (!Number.isInteger(id) || id < 0 || id >= vocabSize) throw new Error(`generate: promptIds[${i}] has token ${id} outside [0, ${vocabSize})`);
    }
  });
}

/**
 * One left-padded forward pass over `ids` rows (each [padded width]), returning last-position
 * logits and, when asked, the layer caches.
 */
function prefill(
  model: GenerationModel,
  ids: number[][],
  /** Left padding of each row inside `ids`. */
  pads: readonly number[],
  keepCache: boolean,
  frozen: FrozenWeights,
  attentionBlockBytes: number | undefined,
): { logits: tf.Tensor2D; cache: LayerCache[] | null } {
  return tidyKeep(() => {
    const b = ids.length;
    const width = ids[0].length;
    const flat = new Int32Array(b * width);
    const positions: number[][] = [];
    for (let r = 0; r < b; r++) {
      flat.set(ids[r], r * width);
      positions.push(Array.from({ length: width }, (_, j) => Math.max(0, j - pads[r])));
    }
    const { cos, sin } = model.rope.tables(positions);
    const { hidden, cache } = model.decoder.forward(model.decoder.embed(flat), {
      batch: b,
      seqLen: width,
      cos,
      sin,
      mask: { pads },
      attentionBlockBytes,
      keepCache,
      frozen,
    });
    const last = tf.gather(hidden, Array.from({ length: b }, (_, r) => r * width + width - 1));
    return { logits: model.decoder.logits(last as tf.Tensor2D, frozen), cache };
  });
}

/** One cached step: a single new token per row at `positions[r]`, keys = cache + 1. */
function step(
  model: GenerationModel,
  tokens: number[],
  positions: number[],
  pads: number[],
  past: LayerCache[],
  frozen: FrozenWeights,
  attentionBlockBytes: number | undefined,
): { logits: tf.Tensor2D; cache: LayerCache[] } {
  return tidyKeep(() => {
    const b = tokens.length;
    const { cos, sin } = model.rope.tables(positions.map((p) => [p]));
    const { hidden, cache } = model.decoder.forward(model.decoder.embed(Int32Array.from(tokens)), {
      batch: b,
      seqLen: 1,
      cos,
      sin,
      mask: { pads },
      attentionBlockBytes,
      past,
      keepCache: true,
      frozen,
    });
    return { logits: model.decoder.logits(hidden, frozen), cache: cache as LayerCache[] };
  });
}

function disposeCache(cache: LayerCache[] | null): void {
  for (const c of cache ?? []) {
    c.kT.dispose();
    c.v.dispose();
  }
}

function selectRows(cache: LayerCache[], rows: number[]): LayerCache[] {
  return tf.tidy(() => cache.map((c) => ({ kT: tf.gather(c.kT, rows) as tf.Tensor4D, v: tf.gather(c.v, rows) as tf.Tensor4D })));
}

/**
 * Samples continuations of `promptIds`. Prompts are left-padded inside one batch with per-row
 * RoPE positions (a row's first real token is position 0) and pad keys masked. Each prompt is
 * prefilled once and its cache copied to its `numReturnSequences` samples. Rows that stop are
 * dropped from the batch. Log-probs come from the sampler (the distribution actually sampled).
 * `attentionBlockBytes` bounds one attention block's score buffers (default 64 MiB; a memory
 * plan's, see `planGeneration`).
 */
export async function generateSequences(
  model: GenerationModel,
  promptIds: number[][],
  options: SamplingOptions,
  mode: GenerationMode = 'cache',
  attentionBlockBytes?: number,
): Promise<GenerationOutput> {
  checkPrompts(promptIds, model.vocabSize);
  const maxNew = options.maxNewTokens;
  if (!Number.isInteger(maxNew) || maxNew < 0) throw new Error(`generate: maxNewTokens must be an integer >= 0, got ${maxNew}`);
  const n = options.numReturnSequences ?? 1;
  if (!Number.isInteger(n) || n < 1) throw new Error(`generate: numReturnSequences must be an integer >= 1, got ${n}`);
  const stop = new Set<number>([...(options.eosTokenIds ?? model.eosTokenIds), ...(options.stopTokenIds ?? [])]);
  const samplerOptions = { greedy: options.greedy, temperature: options.temperature, topK: options.topK, topP: options.topP };
  if (!options.greedy && !options.rng) throw new Error('generate: options.rng is required unless greedy is set');

  const total = promptIds.length * n;
  const sequences: number[][] = Array.from({ length: total }, () => []);
  const logProbs: number[][] = Array.from({ length: total }, () => []);
  const finished: boolean[] = new Array<boolean>(total).fill(false);
  if (maxNew === 0) return { sequences, logProbs, finished };

  const width = Math.max(...promptIds.map((p) => p.length));
  const uniquePads = promptIds.map((p) => width - p.length);
  const padded = promptIds.map((p, i) => [...new Array<number>(uniquePads[i]).fill(0), ...p]);
  const expand = Array.from({ length: total }, (_, r) => Math.floor(r / n));
  // Active rows (output indices), their prompt padding; prompt length per output row.
  let active = expand.map((_, r) => r);
  let pads = expand.map((u) => uniquePads[u]);
  const lens = expand.map((u) => promptIds[u].length);

  // Weights cannot change during one call: every pass reads them in place (nothing to free).
  const frozen = model.decoder.freeze();
  let cache: LayerCache[] | null = null;
  let logits: tf.Tensor2D | null = null;
  try {
    const first = prefill(model, padded, uniquePads, mode === 'cache', frozen, attentionBlockBytes);
    logits = n === 1 ? first.logits : tf.tidy(() => tf.gather(first.logits, expand) as tf.Tensor2D);
    if (n !== 1) first.logits.dispose();
    if (first.cache) {
      cache = n === 1 ? first.cache : selectRows(first.cache, expand);
      if (n !== 1) disposeCache(first.cache);
    }
    const yieldEvery = options.yieldEveryMs ?? GENERATION_YIELD_MS;
    let ranAt = performance.now();
    for (let t = 0; t < maxNew; t++) {
      if (performance.now() - ranAt >= yieldEvery) {
        // A pending signal handler (Ctrl-C, SIGTERM) runs here, mid-generation.
        await new Promise<void>((resolve) => setImmediate(resolve));
        ranAt = performance.now();
      }
      const pick = samplesOnDevice()
        ? await sampleNextTokensOnDevice(logits, samplerOptions, options.rng)
        : sampleNextTokens((await logits.data()) as Float32Array, model.vocabSize, samplerOptions, options.rng);
      logits.dispose();
      const keep: number[] = [];
      active.forEach((row, i) => {
        const tok = pick.tokens[i];
        sequences[row].push(tok);
        logProbs[row].push(pick.logProbs[i]);
        if (stop.has(tok)) finished[row] = true;
        else keep.push(i);
      });
      if (keep.length === 0 || t === maxNew - 1) break;
      if (keep.length !== active.length) {
        if (cache) {
          const next = selectRows(cache, keep);
          disposeCache(cache);
          cache = next;
        }
        active = keep.map((i) => active[i]);
        pads = keep.map((i) => pads[i]);
      }
      if (mode === 'cache') {
        const out = step(
          model,
          active.map((row) => sequences[row][t]),
          active.map((row) => lens[row] + t),
          pads,
          cache as LayerCache[],
          frozen,
          attentionBlockBytes,
        );
        disposeCache(cache);
        cache = out.cache;
        logits = out.logits;
      } else {
        const ids = active.map((row) => [...padded[expand[row]], ...sequences[row]]);
        logits = prefill(model, ids, pads, false, frozen, attentionBlockBytes).logits;
      }
    }
  } finally {
    disposeCache(cache);
    if (logits && !logits.isDisposed) logits.dispose();
  }
  return { sequences, logProbs, finished };
}
