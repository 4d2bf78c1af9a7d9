/**
 * Causal grouped-query attention computed in blocks of query positions, with a gradient that
 * recomputes each block's probabilities instead of keeping them. Memory is then
 * O(block · keys) instead of O(S²) per layer, in the forward pass and in the backward pass alike:
 * a 8k-token centralized-critic input needs 256 MB per head for its full score matrix.
 */
import * as tf from '@tensorflow/tfjs';
import { batchedMatMulIsFast, custom, paddedCausalBias, rawMatMul, transposeLast2 } from '../backend/index.js';
import { ATTENTION, fusedOnActiveBackend, runFused } from '../backend/fused.js';
import { applyRotary } from './rope.js';

/** Which keys a query may see. */
export interface AttentionMask {
  /**
   * Left padding (in keys) of each row, or null when no row is padded. Query q of a pass with Q
   * queries over K keys sits at key slot K − Q + q and sees keys up to that slot, never a row's
   * padding (a padded query still sees itself, so no row is all-masked).
   */
  readonly pads: readonly number[] | null;
}

/** Bytes of float32 score-sized buffers one attention block may hold at once (default 64 MiB). */
export const DEFAULT_ATTENTION_BLOCK_BYTES = 64 * 1024 * 1024;

// A block holds about sixteen score-sized buffers at once in the backward pass as tfjs counts them
// (P, dP, dS, their reshaped and unstacked copies for the 2-D matmuls; test/memory-plan.test.ts).
const LIVE_SCORE_BUFFERS = 16;

/** Query positions per block so that a block's score buffers stay within `blockBytes`. */
export function attentionBlockRows(batch: number, heads: number, queries: number, keys: number, blockBytes: number): number {
  const perRow = batch * heads * keys * 4 * LIVE_SCORE_BUFFERS;
  return Math.max(1, Math.min(queries, Math.floor(blockBytes / perRow)));
}

/** Additive bias [B or 1, 1, rows, K] for queries [q0, q0 + rows) of a Q-query pass over K keys. */
function blockBias(mask: AttentionMask, q0: number, rows: number, queries: number, keys: number): tf.Tensor4D {
  return paddedCausalBias(mask.pads ?? [0], queries, keys, q0, rows);
}

interface Shapes {
  b: number;
  kv: number;
  rep: number;
  s: number;
  d: number;
  keys: number;
}

/** The query rows [q0, q0+rows) of q5 [b, kv, rep, s, d] as [b, kv, rep·rows, d]. */
function queryBlock(q5: tf.Tensor, sh: Shapes, q0: number, rows: number): tf.Tensor4D {
  const part = rows === sh.s ? q5 : tf.slice(q5, [0, 0, 0, q0, 0], [sh.b, sh.kv, sh.rep, rows, sh.d]);
  return tf.reshape(part, [sh.b, sh.kv, sh.rep * rows, sh.d]);
}

/** softmax(q·kᵀ + bias) of one block, [b, kv, rep·rows, keys]. */
function blockProbs(qb: tf.Tensor4D, kT: tf.Tensor4D, bias: tf.Tensor4D, sh: Shapes, rows: number): tf.Tensor4D {
  const scores = tf.reshape(rawMatMul(qb, kT), [sh.b, sh.kv * sh.rep, rows, sh.keys]);
  return tf.reshape(tf.softmax(tf.add(scores, bias)), [sh.b, sh.kv, sh.rep * rows, sh.keys]);
}

/** Splits [0, s) into blocks of `rows`. */
function blocks(s: number, rows: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let q0 = 0; q0 < s; q0 += rows) out.push([q0, Math.min(rows, s - q0)]);
  return out;
}

/**
 * Attention output [b, heads, S, d] for queries `q` [b, heads, S, d] (already scaled by 1/√d),
 * keys `kT` [b, kvHeads, d, K] (pre-transposed) and values `v` [b, kvHeads, K, d]. Query head
 * h reads KV head ⌊h / (heads/kvHeads)⌋. Differentiable in q, kT and v.
 * @param blockBytes - memory bound of one block's score buffers; see {@link attentionBlockRows}.
 */
export function blockedAttention(
  q: tf.Tensor4D,
  kT: tf.Tensor4D,
  v: tf.Tensor4D,
  mask: AttentionMask,
  blockBytes: number = DEFAULT_ATTENTION_BLOCK_BYTES,
): tf.Tensor4D {
  const [b, nh, s, d] = q.shape;
  const kv = kT.shape[1];
  const keys = kT.shape[3];
  const sh: Shapes = { b, kv, rep: nh / kv, s, d, keys };
  const rows = attentionBlockRows(b, nh, s, keys, blockBytes);
  const spans = blocks(s, rows);

  const op = custom(([qIn, kTIn, vIn]: [tf.Tensor4D, tf.Tensor4D, tf.Tensor4D], save) => {
    save([qIn, kTIn, vIn]);
    const q5 = tf.reshape(qIn, [b, kv, sh.rep, s, d]);
    const outs = spans.map(([q0, n]) =>
      tf.tidy(() => {
        const p = blockProbs(queryBlock(q5, sh, q0, n), kTIn, blockBias(mask, q0, n, s, keys), sh, n);
        return tf.reshape(rawMatMul(p, vIn), [b, kv, sh.rep, n, d]);
      }),
    );
    const joined = outs.length === 1 ? outs[0] : tf.concat(outs, 3);
    return {
      value: tf.reshape<tf.Rank.R4>(joined, [b, nh, s, d]),
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => attentionGrad(dy, saved, mask, sh, spans),
    };
  });
  return op(q, kT, v);
}

/**
 * Causal self-attention of a pass without a cache, from the projections to the merged heads:
 * q [B, S, heads, d], k and v [B, S, kvHeads, d] as the projections give them, RoPE tables
 * cos / sin [B or 1, 1, S, d]. Rotates q and k, scales q by 1/√d, attends in blocks as
 * {@link blockedAttention} and returns [B·S, heads·d]. One kernel (and one gradient kernel) where
 * the backend has the fused attention kernel (torch); elsewhere these same steps as tfjs ops.
 */
export function selfAttention(
  q: tf.Tensor4D,
  k: tf.Tensor4D,
  v: tf.Tensor4D,
  cos: tf.Tensor4D,
  sin: tf.Tensor4D,
  mask: AttentionMask,
  blockBytes: number = DEFAULT_ATTENTION_BLOCK_BYTES,
): tf.Tensor2D {
  if (fusedOnActiveBackend(ATTENTION)) {
    const [b, s, nh, d] = q.shape;
    const blockRows = attentionBlockRows(b, nh, s, s, blockBytes);
    const [out, kept] = runFused<tf.Tensor[]>(ATTENTION, { q, k, v, cos, sin }, { scale: 1 / Math.sqrt(d), pads: mask.pads ?? [], blockRows });
    // The second output is for the gradient, which keeps its own reference under a tape.
    kept.dispose();
    return out as tf.Tensor2D;
  }
  const heads = headsFirst(q, k, v, cos, sin);
  return mergeHeads(blockedAttention(heads.q, heads.kT, heads.v, mask, blockBytes));
}

/**
 * The projections q [B, S, heads, d], k and v [B, S, kvHeads, d] laid out for
 * {@link blockedAttention}: q rotated and scaled by 1/√d as [B, heads, S, d], k rotated and
 * transposed as [B, kvHeads, d, S], v as [B, kvHeads, S, d] (the layout of a KV cache).
 */
export function headsFirst(q: tf.Tensor4D, k: tf.Tensor4D, v: tf.Tensor4D, cos: tf.Tensor4D, sin: tf.Tensor4D): { q: tf.Tensor4D; kT: tf.Tensor4D; v: tf.Tensor4D } {
  return {
    q: tf.mul(applyRotary(tf.transpose(q, [0, 2, 1, 3]), cos, sin), 1 / Math.sqrt(q.shape[3])),
    kT: tf.transpose(applyRotary(tf.transpose(k, [0, 2, 1, 3]), cos, sin), [0, 1, 3, 2]),
    v: tf.transpose(v, [0, 2, 1, 3]),
  };
}

/** Attention output [B, heads, S, d] as [B·S, heads·d], the input of the output projection. */
export function mergeHeads(x: tf.Tensor4D): tf.Tensor2D {
  const [b, nh, s, d] = x.shape;
  return tf.reshape(tf.transpose(x, [0, 2, 1, 3]), [b * s, nh * d]);
}

/**
 * Gradients of {@link blockedAttention} w.r.t. q, kT, v, block by block: with P = softmax(S),
 * dV = Pᵀ·dO, dP = dO·Vᵀ, dS = P ∘ (dP − Σ_j dP∘P), dQ = dS·K, dK = dSᵀ·Q.
 */
function attentionGrad(dy: tf.Tensor, saved: tf.Tensor[], mask: AttentionMask, sh: Shapes, spans: Array<[number, number]>): tf.Tensor[] {
  const [q, kT, v] = saved as tf.Tensor4D[];
  const { b, kv, rep, s, d } = sh;
  return tf.tidy(() => {
    const q5 = tf.reshape(q, [b, kv, rep, s, d]);
    const dy5 = tf.reshape(dy, [b, kv, rep, s, d]);
    const k = transposeLast2(kT);
    const vT = transposeLast2(v);
    let dk: tf.Tensor = tf.zerosLike(k);
    let dv: tf.Tensor = tf.zerosLike(v);
    const dqs: tf.Tensor[] = [];
    for (const [q0, n] of spans) {
      const [dqb, dkNext, dvNext] = tf.tidy(() => {
        const qb = queryBlock(q5, sh, q0, n);
        const p = blockProbs(qb, kT, blockBias(mask, q0, n, s, sh.keys), sh, n);
        const dob = queryBlock(dy5, sh, q0, n);
        const dP = rawMatMul(dob, vT);
        const dS = tf.mul(p, tf.sub(dP, tf.sum(tf.mul(dP, p), -1, true)));
        return [
          tf.reshape(rawMatMul(dS, k), [b, kv, rep, n, d]),
          tf.add(dk, rawMatMul(transposeLast2(dS), qb)),
          tf.add(dv, rawMatMul(transposeLast2(p), dob)),
        ];
      });
      dk.dispose();
      dv.dispose();
      dk = dkNext;
      dv = dvNext;
      dqs.push(dqb);
    }
    const dq = tf.reshape(dqs.length === 1 ? dqs[0] : tf.concat(dqs, 3), [b, kv * rep, s, d]);
    return [dq, transposeLast2(dk), dv];
  });
}

/**
 * Attention of one new position per row against its cache (a KV-cache decoding step): `q`
 * [b, 1, heads, d] (already scaled by 1/√d; with one position, the memory order of
 * [b, heads, 1, d]), `kT` [b, kvHeads, d, K] and `v` [b, kvHeads, K, d], the new position last.
 * Returns [b, heads·d]. Same arithmetic as {@link blockedAttention} on one query, without its
 * blocking and custom gradient: a decoding step is a few small kernels whose count, not their
 * arithmetic, sets its time on tensorflow (bench/model.ts, generation row).
 */
export function stepAttention(q: tf.Tensor4D, kT: tf.Tensor4D, v: tf.Tensor4D, mask: AttentionMask): tf.Tensor2D {
  const [b, , nh, d] = q.shape;
  const [, kv, , keys] = kT.shape;
  const rep = nh / kv;
  let scores = batchedMatMul(tf.reshape(q, [b * kv, rep, d]), tf.reshape(kT, [b * kv, d, keys]));
  // The new position is the last key slot, so the causal part of the mask is empty: only padded
  // rows need a bias.
  if (mask.pads?.some((p) => p > 0)) {
    const bias = paddedCausalBias(mask.pads, 1, keys);
    scores = tf.reshape(tf.add(tf.reshape(scores, [b, kv, rep, keys]), bias), [b * kv, rep, keys]);
  }
  const out = batchedMatMul(tf.softmax(scores), tf.reshape(v, [b * kv, keys, d]));
  return tf.reshape(out, [b, nh * d]);
}

/** [n, m, k]·[n, k, p] in one kernel where that is the fast path (see `rawMatMul`). */
function batchedMatMul(a: tf.Tensor3D, b: tf.Tensor3D): tf.Tensor3D {
  return a.shape[1] <= 4 || batchedMatMulIsFast() ? tf.matMul(a, b) : (rawMatMul(a, b) as tf.Tensor3D);
}
