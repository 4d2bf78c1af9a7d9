/**
 * Teacher-forced token log-probs through the vocabulary projection, in row chunks, with a gradient
 * that recomputes each chunk's logits. The full [rows, vocab] float32 logits never exist at once:
 * at Qwen's 151,936-token vocabulary, 1,024 completion tokens would need 622 MB per copy, and the
 * log-softmax and its gradient hold several copies.
 */
import * as tf from '@tensorflow/tfjs';
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
function chunkLogProbs(logits: tf.Tensor2D, targets: tf.Tensor1D): [tf.Tensor1D, tf.Tensor1D] {
  const [n, v] = logits.shape;
  const m = tf.max(logits, 1, true);
  const lse = tf.reshape(tf.add(tf.log(tf.sum(tf.exp(tf.sub(logits, m)), 1, true)), m), [n]) as tf.Tensor1D;
  const flat = tf.add(tf.mul(tf.range(0, n, 1, 'int32'), tf.scalar(v, 'int32')), targets);
  const picked = tf.gather(tf.reshape(logits, [n * v]), flat);
  return [tf.sub(picked, lse) as tf.Tensor1D, lse];
}

// Columns of a frozen head transposed at once in its backward pass (16 MiB of floats).
const HEAD_BLOCK_FLOATS = 4 * 1024 * 1024;

/**
 * d Σ dy·lp / d hidden for a frozen head kept as [H, V]: the vocabulary is walked in column blocks
 * (each transposed once), and every row chunk adds (onehot − softmax)·dy of that block times the
 * block's rows. The head is never copied whole (Qwen's is 622 MB), and softmax comes from the
 * forward pass's log Σ exp.
 */
function frozenHeadHiddenGrad(
  hid: tf.Tensor2D,
  headT: tf.Tensor2D,
  lse: tf.Tensor1D,
  dy: tf.Tensor,
  targets: ArrayLike<number>,
  chunkBytes: number,
): tf.Tensor2D {
  const [n, h] = hid.shape;
  const vocab = headT.shape[1];
  const width = Math.max(1, Math.min(vocab, Math.floor(HEAD_BLOCK_FLOATS / h)));
  let dh: tf.Tensor2D = tf.zeros([n, h]);
  for (let v0 = 0; v0 < vocab; v0 += width) {
    const w = Math.min(width, vocab - v0);
    const rows = logitsChunkRows(n, w, chunkBytes);
    const next = tf.tidy(() => {
      const block = tf.slice(headT, [0, v0], [h, w]);
      const blockRows = tf.transpose(block);
      const parts: tf.Tensor[] = [];
      for (let r0 = 0; r0 < n; r0 += rows) {
        const m = Math.min(rows, n - r0);
        parts.push(
          tf.tidy(() => {
            const p = tf.exp(tf.sub(tf.matMul(tf.slice(hid, [r0, 0], [m, h]), block), tf.reshape(tf.slice(lse, [r0], [m]), [m, 1])));
            const g = tf.mul(tf.sub(oneHotRows(targets, r0, m, v0, w), p), tf.reshape(tf.slice(dy, [r0], [m]), [m, 1]));
            return tf.matMul(g as tf.Tensor2D, blockRows);
          }),
        );
      }
      return tf.add(dh, parts.length === 1 ? parts[0] : tf.concat(parts)) as tf.Tensor2D;
    });
    dh.dispose();
    dh = next;
  }
  return dh;
}

/** The output head: its weight in Hugging Face layout [V, H], or pre-transposed [H, V] (frozen). */
export interface HeadWeight {
  readonly weight: tf.Tensor2D;
  /** True when `weight` is [H, V] (a frozen base's pre-transposed copy). */
  readonly transposed: boolean;
}

/**
 * One-hot rows [rows, width] of targets[r0 .. r0 + rows) over vocabulary columns [v0, v0 + width)
 * (a target outside the block gives a zero row). Built from plain numbers: tfjs's OneHot kernel
 * gives wrong values on wasm here.
 */
function oneHotRows(targets: ArrayLike<number>, r0: number, rows: number, v0: number, width: number): tf.Tensor2D {
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
  const vocab = head.transposed ? head.weight.shape[1] : head.weight.shape[0];
  for (let i = 0; i < n; i++) {
    if (!(targets[i] >= 0 && targets[i] < vocab)) throw new Error(`chunkedTokenLogProbs: target ${targets[i]} outside [0, ${vocab}) at row ${i}`);
  }
  const rows = logitsChunkRows(n, vocab, chunkBytes);
  const spans: Array<[number, number]> = [];
  for (let r0 = 0; r0 < n; r0 += rows) spans.push([r0, Math.min(rows, n - r0)]);
  const trainableHead = !head.transposed && head.weight instanceof tf.Variable && head.weight.trainable;

  const op = tf.customGrad(((...args: Array<tf.Tensor | ((t: tf.Tensor[]) => void)>) => {
    const save = args[args.length - 1] as (t: tf.Tensor[]) => void;
    const hid = args[0] as tf.Tensor2D;
    const tgt = args[1] as tf.Tensor1D;
    // One transposed copy per call: wasm's transpose-flag matmuls are ~10x slower.
    const headT: tf.Tensor2D = head.transposed ? head.weight : tf.transpose(head.weight);
    // A frozen head lives on: multiply against block copies (see matMulAgainstFrozen).
    const logitsOf = (x: tf.Tensor2D): tf.Tensor2D => (head.transposed ? matMulAgainstFrozen(x, headT) : tf.matMul(x, headT));
    const parts = spans.map(([r0, m]) => tf.tidy(() => chunkLogProbs(logitsOf(tf.slice(hid, [r0, 0], [m, h]) as tf.Tensor2D), tf.slice(tgt, [r0], [m]))));
    const lse = parts.length === 1 ? parts[0][1] : tf.concat(parts.map((p) => p[1]));
    save([hid, tgt, headT, lse]);
    if (!head.transposed) headT.dispose();
    const value = parts.length === 1 ? parts[0][0] : tf.concat(parts.map((p) => p[0]));
    return {
      value,
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) =>
        tf.tidy(() => {
          const [sh, st, sHeadT, sLse] = saved as [tf.Tensor2D, tf.Tensor1D, tf.Tensor2D, tf.Tensor1D];
          if (head.transposed) return [frozenHeadHiddenGrad(sh, sHeadT, sLse, dy, targets, chunkBytes), tf.zerosLike(st)];
          // d lp_i / d logits_i = (onehot(target_i) − softmax(logits_i)) · dy_i.
          const headRows = head.weight;
          const dHidden: tf.Tensor[] = [];
          let dHeadT: tf.Tensor | null = trainableHead ? tf.zerosLike(sHeadT) : null;
          for (const [r0, m] of spans) {
            const [dh, next] = tf.tidy(() => {
              const hc = tf.slice(sh, [r0, 0], [m, h]);
              const dyc = tf.reshape(tf.slice(dy, [r0], [m]), [m, 1]);
              const onehot = oneHotRows(targets, r0, m, 0, vocab);
              const g = tf.mul(tf.sub(onehot, tf.softmax(tf.matMul(hc, sHeadT))), dyc) as tf.Tensor2D;
              return [tf.matMul(g, headRows), dHeadT ? tf.add(dHeadT, tf.matMul(tf.transpose(hc), g)) : null];
            });
            dHidden.push(dh);
            if (dHeadT && next) {
              dHeadT.dispose();
              dHeadT = next;
            }
          }
          const dh = dHidden.length === 1 ? dHidden[0] : tf.concat(dHidden);
          const dTargets = tf.zerosLike(st);
          return trainableHead && dHeadT ? [dh, dTargets, tf.transpose(dHeadT)] : [dh, dTargets];
        }),
    };
  }) as unknown as Parameters<typeof tf.customGrad>[0]);

  const targetsT = tf.tensor1d(targets, 'int32');
  try {
    return (trainableHead ? op(hidden, targetsT, head.weight) : op(hidden, targetsT)) as tf.Tensor1D;
  } finally {
    targetsT.dispose();
  }
}
