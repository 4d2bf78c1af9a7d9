/**
 * Byte estimates of the passes comlrl runs over a decoder, from its shapes. They are upper-bound
 * style figures (float32 everywhere, every buffer a pass keeps alive counted), used to size
 * micro-batches and to refuse a pass before it allocates; `test/memory-plan.test.ts` checks them
 * against measured peaks.
 */
import type * as tf from '@tensorflow/tfjs';

/** The decoder shapes an estimate needs. */
export interface DecoderShape {
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly numLayers: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly intermediateSize: number;
}

/** A batch of rows run through the model together. */
export interface PassShape {
  /** Rows in the batch. */
  readonly rows: number;
  /** Padded width (prompt + completion tokens of the longest row). */
  readonly width: number;
  /** Positions whose vocabulary log-probs are computed (completion tokens); 0 for critics. */
  readonly scoredTokens: number;
}

/** How a pass runs. */
export interface PassMode {
  /** A gradient tape records it (training) — else a forward pass only. */
  readonly backward: boolean;
  /** Per-layer recomputation in the backward pass. */
  readonly recompute: boolean;
  readonly attentionBlockBytes: number;
  readonly logitsChunkBytes: number;
  /** The output head / embeddings receive gradients (full fine-tuning). */
  readonly embeddingsTrainable: boolean;
}

const F32 = 4;
const SAFETY = 1.5;
// Two buffers of a head's 4 M-float row block (src/model/lm-head.ts).
const FROZEN_HEAD_BLOCK_BYTES = 2 * 4 * 1024 * 1024 * 4;

/**
 * Floats one token keeps per decoder layer on a gradient tape (norms, projections, rotary, MLP),
 * as tfjs counts them: a reshape or an unstacked slice counts as a buffer of its own, which
 * doubles the plain count (fitted on measured peaks in test/memory-plan.test.ts).
 */
function tapeFloatsPerTokenLayer(m: DecoderShape): number {
  const q = m.numHeads * m.headDim;
  const kv = m.numKvHeads * m.headDim;
  return 2 * (10 * m.hiddenSize + 6 * m.intermediateSize + 6 * q + 6 * kv);
}

/** Peak bytes of the activations of one pass (weights and optimizer state not included). */
export function passBytes(m: DecoderShape, pass: PassShape, mode: PassMode): number {
  const n = pass.rows * pass.width;
  const layer = n * tapeFloatsPerTokenLayer(m);
  let floats = n * m.hiddenSize * 2; // embeddings and the residual stream
  if (mode.backward) {
    floats += mode.recompute ? m.numLayers * n * m.hiddenSize + layer : m.numLayers * layer;
    floats += layer; // gradients flowing back through one layer
  } else {
    floats += layer; // layers run one at a time without a tape
  }
  let bytes = floats * F32;
  bytes += Math.min(mode.attentionBlockBytes, pass.rows * m.numHeads * pass.width * pass.width * F32 * 16);
  if (pass.scoredTokens > 0) {
    const head = m.vocabSize * m.hiddenSize * F32;
    // A trainable head: room for one head-sized buffer besides the logits chunk (upper bound).
    if (mode.embeddingsTrainable) bytes += head;
    bytes += Math.min(mode.logitsChunkBytes, pass.scoredTokens * m.vocabSize * F32 * 3);
    // Backward: a trainable head's gradient blocks and their concatenation; a frozen head's row blocks.
    if (mode.backward) bytes += mode.embeddingsTrainable ? 2 * head : Math.min(head, FROZEN_HEAD_BLOCK_BYTES);
  }
  if (mode.backward && mode.embeddingsTrainable) bytes += m.vocabSize * m.hiddenSize * F32; // embedding scatter gradient
  // Temporaries the terms above miss (measured peaks ran ~1.25x the sum; see the test).
  return Math.ceil(bytes * SAFETY);
}

/** Bytes of a KV-cache generation batch: caches of every layer at full length plus one prefill layer. */
export function generationBytes(m: DecoderShape, sequences: number, promptWidth: number, newTokens: number, attentionBlockBytes: number): number {
  const kv = m.numKvHeads * m.headDim;
  const cache = 2 * m.numLayers * sequences * kv * (promptWidth + newTokens) * F32;
  // The concatenation that grows a cache holds the old and the new copy of one layer at once.
  const growth = 2 * sequences * kv * (promptWidth + newTokens) * F32;
  const prefill = passBytes(m, { rows: sequences, width: promptWidth, scoredTokens: 0 }, {
    backward: false,
    recompute: false,
    attentionBlockBytes,
    logitsChunkBytes: 0,
    embeddingsTrainable: false,
  });
  const logits = sequences * m.vocabSize * F32 * 3;
  return cache + growth + prefill + logits;
}

/** Bytes of the given variables' values. */
export function variableBytes(vars: readonly tf.Variable[]): number {
  return vars.reduce((a, v) => a + v.size * F32, 0);
}

/** The shapes of a model comlrl loaded (any object exposing `decoderConfig`), or null. */
export function decoderShape(model: object): DecoderShape | null {
  const cfg = (model as Partial<{ decoderConfig: DecoderShape }>).decoderConfig;
  return cfg ?? null;
}
