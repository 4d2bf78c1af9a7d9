/**
 * Teacher-forced token log-probs through the vocabulary projection, in row chunks, with a gradient
 * that recomputes each chunk's logits. The full [rows, vocab] float32 logits never exist at once:
 * at Qwen's 151,936-token vocabulary, 1,024 completion tokens would need 622 MB per copy, and the
 * log-softmax and its gradient hold several copies.
 */
import * as tf from '@tensorflow/tfjs';
import { activeBackend, custom, tidyKeep } from '../backend/index.js';
import { fusedOnActiveBackend, runFused, TOKEN_LOG_PROBS, TOKEN_LOG_PROBS_GRAD } from '../backend/fused.js';
import { matMulAgainstFrozen } from './lora/frozen-linear.js';

/** Bytes of logits-sized buffers one chunk may hold at once (default 64 MiB). */
export const DEFAULT_LOGITS_CHUNK_BYTES = 64 * 1024 * 1024;

// A chunk holds about three logits-sized buffers at once (logits, softmax, gradient).
const LIVE_LOGIT_BUFFERS = 3;

/** Rows per chunk so that a chunk's logits buffers stay within `chunkBytes`. */
export function logitsChunkRows(rows: number, vocab: number, chunkBytes: number): number {
  return Math.max(1, Math.min(rows, Math.floor(chunkBytes / (vocab * 4 * LIVE_LOGIT_BUFFERS))));
}

/** log softmax(logits)[target] and log Σ exp(logits) per row of one chunk: logits [n, V], targets [n]. */
export function chunkLogProbs(logits: tf.Tensor2D, targets: tf.Tensor1D): [tf.Tensor1D, tf.Tensor1D] {
  if (fusedOnActiveBackend(TOKEN_LOG_PROBS)) return runFused<[tf.Tensor1D, tf.Tensor1D]>(TOKEN_LOG_PROBS, { logits, targets });
  const [n, v] = logits.shape;
  const m = tf.max(logits, 1, true);
  const lse = tf.reshape(tf.add(tf.log(tf.sum(tf.exp(tf.sub(logits, m)), 1, true)), m), [n]) as tf.Tensor1D;
  const flat = tf.add(tf.mul(tf.range(0, n, 1, 'int32'), tf.scalar(v, 'int32')), targets);
  const picked = tf.gather(tf.reshape(logits, [n * v]), flat);
  return [tf.sub(picked, lse) as tf.Tensor1D, lse];
}

// Vocabulary rows of the head multiplied at once in the backward pass (16 MiB of floats).
const HEAD_BLOCK_FLOATS = 4 * 1024 * 1024;

/** Vocabulary rows per block of the head in the backward pass. */
function headBlockWidth(hidden: number, vocab: number): number {
  return Math.max(1, Math.min(vocab, Math.floor(HEAD_BLOCK_FLOATS / hidden)));
}

/**
 * d Σ dy·lp / d hidden, and when `trainable` d Σ dy·lp / d head, for a head w [V, H]: the
 * vocabulary is walked in row blocks of w (each copied once, so the second operand of the hidden
 * gradient's matmul is a fresh tensor, see `matMulAgainstFrozen`), and every row chunk adds
 * (onehot − softmax)·dy of that block times the block's rows. The head is never copied whole
 * (Qwen's is 622 MB), and softmax comes from the forward pass's log Σ exp.
 */
function headGrads(
  hid: tf.Tensor2D,
  w: tf.Tensor2D,
  lse: tf.Tensor1D,
  dy: tf.Tensor,
  targets: ArrayLike<number>,
  chunkBytes: number,
  trainable: boolean,
  logits: tf.Tensor2D | null,
): [tf.Tensor2D, tf.Tensor2D | null] {
  const [n, h] = hid.shape;
  const vocab = w.shape[0];
  const width = headBlockWidth(h, vocab);
  let dh: tf.Tensor2D = tf.zeros([n, h]);
  const dHeadBlocks: tf.Tensor2D[] = [];
  for (let v0 = 0; v0 < vocab; v0 += width) {
    const wv = Math.min(width, vocab - v0);
    const rows = logitsChunkRows(n, wv, chunkBytes);
    const [next, dBlock] = tidyKeep((): [tf.Tensor2D, tf.Tensor2D | null] => {
      const block = tf.slice(w, [v0, 0], [wv, h]);
      const parts: tf.Tensor[] = [];
      let dB: tf.Tensor | null = null;
      for (let r0 = 0; r0 < n; r0 += rows) {
        const m = Math.min(rows, n - r0);
        const [part, dPart] = tidyKeep((): [tf.Tensor, tf.Tensor | null] => {
          const hc = tf.slice(hid, [r0, 0], [m, h]) as tf.Tensor2D;
          // The forward pass's logits when it kept them (one block, one chunk), else recomputed.
          const g = logitsGrad(logits ?? matMulAgainstFrozen(hc, block), tf.slice(lse, [r0], [m]), targets, r0, v0, tf.slice(dy, [r0], [m]), wv === vocab);
          // gᵀ·hc: the [wv, H] rows of the head's gradient, in the head's own layout.
          return [tf.matMul(g, block), trainable ? tf.matMul(tf.transpose(g), hc) : null];
        });
        parts.push(part);
        if (dPart) {
          const acc: tf.Tensor = dB ? tf.add(dB, dPart) : dPart;
          if (dB) {
            dB.dispose();
            dPart.dispose();
          }
          dB = acc;
        }
      }
      return [tf.add(dh, parts.length === 1 ? parts[0] : tf.concat(parts)) as tf.Tensor2D, dB as tf.Tensor2D | null];
    });
    dh.dispose();
    dh = next;
    if (dBlock) dHeadBlocks.push(dBlock);
  }
  if (!trainable) return [dh, null];
  const dHead = dHeadBlocks.length === 1 ? dHeadBlocks[0] : (tf.concat(dHeadBlocks) as tf.Tensor2D);
  if (dHeadBlocks.length > 1) tf.dispose(dHeadBlocks);
  return [dh, dHead];
}

/**
 * (onehot − softmax)·dy for one chunk's logits over vocabulary columns [v0, v0 + V) (rows
 * r0 onwards of `targets`): the gradient of Σ dy·lp with respect to those logits. `wholeRows`:
 * the columns are the whole vocabulary (then softmax = exp(logits − lse), which a backend may take
 * as one softmax).
 */
export function logitsGrad(logits: tf.Tensor2D, lse: tf.Tensor, targets: ArrayLike<number>, r0: number, v0: number, dy: tf.Tensor, wholeRows = false): tf.Tensor2D {
  const [m, width] = logits.shape;
  if (fusedOnActiveBackend(TOKEN_LOG_PROBS_GRAD)) {
    const columns = tf.tensor1d(Int32Array.from({ length: m }, (_, i) => targets[r0 + i] - v0), 'int32');
    return runFused<tf.Tensor2D>(TOKEN_LOG_PROBS_GRAD, { logits, lse, targets: columns, dy }, { wholeRows });
  }
  const p = tf.exp(tf.sub(logits, tf.reshape(lse, [m, 1])));
  return tf.mul(tf.sub(oneHotRows(targets, r0, m, v0, width), p), tf.reshape(dy, [m, 1]));
}

/** The output head: its weight in Hugging Face layout [V, H]. */
export interface HeadWeight {
  readonly weight: tf.Tensor2D;
  /** True for a frozen base's head (never a trainable variable). */
  readonly frozen: boolean;
}

/**
 * One-hot rows [rows, width] of targets[r0 .. r0 + rows) over vocabulary columns [v0, v0 + width)
 * (a target outside the block gives a zero row). Made on the backend from the targets where it
 * can (a [rows, width] upload per chunk otherwise); on wasm built from plain numbers, as tfjs's
 * OneHot kernel gives wrong values there.
 */
function oneHotRows(targets: ArrayLike<number>, r0: number, rows: number, v0: number, width: number): tf.Tensor2D {
  if (activeBackend() !== 'wasm') {
    const columns = Int32Array.from({ length: rows }, (_, i) => targets[r0 + i] - v0);
    return tf.tidy(() => tf.oneHot(tf.tensor1d(columns, 'int32'), width, 1, 0, 'float32') as tf.Tensor2D);
  }
  const data = new Float32Array(rows * width);
  for (let i = 0; i < rows; i++) {
    const c = targets[r0 + i] - v0;
    if (c >= 0 && c < width) data[i * width + c] = 1;
  }
  return tf.tensor2d(data, [rows, width]);
}

/**
 * log p(targets[i]) for hidden states `hidden` [N, H] under the output head. Differentiable in
 * `hidden` and, when the head is a trainable variable in [V, H] layout, in the head.
 */
export function chunkedTokenLogProbs(
  hidden: tf.Tensor2D,
  head: HeadWeight,
  targets: Int32Array,
  chunkBytes: number = DEFAULT_LOGITS_CHUNK_BYTES,
): tf.Tensor1D {
  const [n, h] = hidden.shape;
  if (targets.length !== n) throw new Error(`chunkedTokenLogProbs: ${targets.length} targets for ${n} rows`);
  const vocab = head.weight.shape[0];
  for (let i = 0; i < n; i++) {
    if (!(targets[i] >= 0 && targets[i] < vocab)) throw new Error(`chunkedTokenLogProbs: target ${targets[i]} outside [0, ${vocab}) at row ${i}`);
  }
  const rows = logitsChunkRows(n, vocab, chunkBytes);
  const spans: Array<[number, number]> = [];
  for (let r0 = 0; r0 < n; r0 += rows) spans.push([r0, Math.min(rows, n - r0)]);
  const trainableHead = !head.frozen && head.weight instanceof tf.Variable && head.weight.trainable;

  // When all logits are one chunk and the head one block, the forward pass keeps its logits for the
  // backward pass (at most a third of the chunk budget, which the backward pass would fill with the
  // same logits anyway) instead of multiplying by the head again; larger passes recompute them.
  const keepLogits = spans.length === 1 && headBlockWidth(h, vocab) >= vocab;

  // Inputs: the hidden rows, the targets, and the head's weight when it trains.
  const op = custom(([hid, tgt]: [tf.Tensor2D, tf.Tensor1D, ...tf.Tensor[]], save) => {
    // The head is read in place as the first matmul operand: no transposed or packed copy of it.
    // [lp, lse] per chunk, and the logits when they are kept (a chunk's logits go with its scope).
    const parts = spans.map(([r0, m]) =>
      tf.tidy((): [tf.Tensor1D, tf.Tensor1D, ...tf.Tensor2D[]] => {
        const logits = matMulAgainstFrozen(tf.slice(hid, [r0, 0], [m, h]) as tf.Tensor2D, head.weight);
        const lpLse = chunkLogProbs(logits, tf.slice(tgt, [r0], [m]));
        return keepLogits ? [...lpLse, logits] : lpLse;
      }),
    );
    const lse = parts.length === 1 ? parts[0][1] : tf.concat(parts.map((p) => p[1]));
    save(keepLogits ? [hid, tgt, lse, parts[0][2]] : [hid, tgt, lse]);
    // What the tape keeps is its own copy of the handle (none without a tape, as when scoring).
    if (keepLogits) parts[0][2].dispose();
    const value = parts.length === 1 ? parts[0][0] : tf.concat(parts.map((p) => p[0]));
    return {
      value,
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) =>
        tf.tidy(() => {
          const [sh, st, sLse, sLogits] = saved as [tf.Tensor2D, tf.Tensor1D, tf.Tensor1D, tf.Tensor2D | undefined];
          // d lp_i / d logits_i = (onehot(target_i) − softmax(logits_i)) · dy_i.
          const [dh, dHead] = headGrads(sh, head.weight, sLse, dy, targets, chunkBytes, trainableHead, sLogits ?? null);
          const dTargets = tf.zerosLike(st);
          return dHead ? [dh, dTargets, dHead] : [dh, dTargets];
        }),
    };
  });

  const targetsT = tf.tensor1d(targets, 'int32');
  try {
    return trainableHead ? op(hidden, targetsT, head.weight) : op(hidden, targetsT);
  } finally {
    targetsT.dispose();
  }
}
