import * as tf from '@tensorflow/tfjs';
import { ATTENTION, ATTENTION_GRAD, LINEAR, LORA_DELTA, LORA_DELTA_GRAD, TOKEN_LOG_PROBS, TOKEN_LOG_PROBS_GRAD, RMS_NORM, RMS_NORM_GRAD, ROTARY, SILU_MUL, SILU_MUL_GRAD } from '../fused.js';
import { paddedCausalBiasValues } from '../ops.js';
import { SCALAR_TYPE, type TorchBackend } from './backend.js';
import type { KernelAttrs, TorchKernel } from './kernel.js';
import type { TorchArg } from './native.js';
import { batchMatMul } from './products.js';

// The fused ops of ../fused.ts as a few ATen calls each, inside one tfjs kernel: tfjs's
// per-kernel JavaScript is paid once. Derivations of the gradients are in the comments. Each
// kernel frees its intermediate handles itself (scopedN), also when an ATen call throws.

type Aten = (name: string, overload: string, args: readonly TorchArg[]) => number;

/**
 * Runs ATen calls (and uploads, through `own`) whose intermediate results are freed when `f`
 * returns or throws; the answers are kept.
 */
function scopedN(b: TorchBackend, f: (t: Aten, own: (h: number) => number) => number[]): number[] {
  const made: number[] = [];
  const own = (h: number): number => {
    made.push(h);
    return h;
  };
  const t: Aten = (name, overload, args) => own(b.call1(name, overload, args));
  let answers: number[] = [];
  try {
    answers = f(t, own);
    return answers;
  } finally {
    for (const h of made) if (!answers.includes(h)) b.addon.free(h);
  }
}

/** {@link scopedN} with one answer. */
function scoped(b: TorchBackend, f: (t: Aten) => number): number {
  return scopedN(b, (t) => [f(t)])[0];
}

/** Sum over every axis but the last (the gradient of a weight broadcast along the last axis). */
function sumLeading(t: Aten, v: number, rank: number): number {
  if (rank === 1) return t('aten::clone', '', [v]);
  return t('aten::sum', 'dim_IntList', [v, Array.from({ length: rank - 1 }, (_, i) => i), false]);
}

// ---- attention ----------------------------------------------------------------------------------

/** ATTENTION's shapes and attributes. */
interface AttentionShape {
  b: number;
  s: number;
  heads: number;
  kv: number;
  d: number;
  scale: number;
  pads: readonly number[];
  blockRows: number;
}

function attentionShape(q: tf.TensorInfo, k: tf.TensorInfo, a: KernelAttrs): AttentionShape {
  const [b, s, heads, d] = q.shape;
  return { b, s, heads, kv: k.shape[2], d, scale: a.scale as number, pads: (a.pads as number[] | undefined) ?? [], blockRows: a.blockRows as number };
}

/** x [B, S, h, d] as [B, h, S, d] with RoPE applied (a view of x is permuted, the result is new). */
function rotated(t: Aten, x: number, cos: number, sin: number, half: number): number {
  const xh = t('aten::permute', '', [x, [0, 2, 1, 3]]);
  return t('aten::addcmul', '', [t('aten::mul', 'Tensor', [xh, cos]), t('aten::roll', '', [xh, [half], [-1]]), sin]);
}

/** The transpose of RoPE's map applied to a gradient: dy·cos + swap(dy·sin). */
function rotatedBack(t: Aten, dy: number, cos: number, sin: number, half: number): number {
  return t('aten::add', 'Tensor', [t('aten::mul', 'Tensor', [dy, cos]), t('aten::roll', '', [t('aten::mul', 'Tensor', [dy, sin]), [half], [-1]])]);
}

/** Query blocks [q0, q0 + rows) of an S-query pass. */
function queryBlocks(sh: AttentionShape): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let q0 = 0; q0 < sh.s; q0 += sh.blockRows) out.push([q0, Math.min(sh.blockRows, sh.s - q0)]);
  return out;
}

/** What both directions of the attention kernel start from. */
interface AttentionOperands {
  /** Rotated and scaled queries as [B, kv, rep, S, d]. */
  q5: number;
  /** Rotated keys [B, kv, S, d] and their transpose. */
  kr: number;
  krT: number;
  /** Values [B, kv, S, d] (a view). */
  vh: number;
}

function attentionOperands(t: Aten, b: TorchBackend, [q, k, v, cos, sin]: tf.TensorInfo[], sh: AttentionShape): AttentionOperands {
  const half = sh.d / 2;
  const [hc, hs] = [b.handle(cos), b.handle(sin)];
  const qr = t('aten::mul', 'Scalar', [rotated(t, b.handle(q), hc, hs, half), sh.scale]);
  const kr = rotated(t, b.handle(k), hc, hs, half);
  return {
    q5: t('aten::reshape', '', [qr, [sh.b, sh.kv, sh.heads / sh.kv, sh.s, sh.d]]),
    kr,
    krT: t('aten::transpose', 'int', [kr, -2, -1]),
    vh: t('aten::permute', '', [b.handle(v), [0, 2, 1, 3]]),
  };}

/** Rows [q0, q0 + n) of x5 [B, kv, rep, S, d] as [B, kv, rep·n, d]. */
function rowBlock(t: Aten, x5: number, sh: AttentionShape, q0: number, n: number): number {
  const part = n === sh.s ? x5 : t('aten::slice', 'Tensor', [x5, 3, q0, q0 + n, 1]);
  return t('aten::reshape', '', [part, [sh.b, sh.kv, (sh.heads / sh.kv) * n, sh.d]]);
}

/** softmax(q·kᵀ + bias) of one query block, [B, kv, rep·n, S]. */
function blockProbs(t: Aten, own: (h: number) => number, b: TorchBackend, qb: number, ops: AttentionOperands, sh: AttentionShape, q0: number, n: number): number {
  const rep = sh.heads / sh.kv;
  const pads = sh.pads.length > 0 ? sh.pads : [0];
  const bias = own(b.addon.upload(paddedCausalBiasValues(pads, sh.s, sh.s, q0, n), [pads.length, 1, 1, n, sh.s], b.device));
  const scores = t('aten::reshape', '', [t('aten::matmul', '', [qb, ops.krT]), [sh.b, sh.kv, rep, n, sh.s]]);
  const p = t('aten::softmax', 'int', [t('aten::add', 'Tensor', [scores, bias]), -1]);
  return t('aten::reshape', '', [p, [sh.b, sh.kv, rep * n, sh.s]]);
}

/** [B, kv, rep, S, d] (the head axis split in two) back to [B, S, heads, d], contiguous. */
function headsLast(t: Aten, x: number, sh: AttentionShape): number {
  const bhsd = t('aten::reshape', '', [x, [sh.b, sh.heads, sh.s, sh.d]]);
  return t('aten::contiguous', '', [t('aten::permute', '', [bhsd, [0, 2, 1, 3]])]);
}

/**
 * Whether ATTENTION runs as ATen's CPU flash-attention kernels (`_scaled_dot_product_flash_attention_for_cpu`
 * and its backward): on CPU, when no row is padded (the causal mask is the kernel's own) or when one
 * pass's whole [B, 1, S, S] padding bias fits the block bound (blockRows covers every query). They
 * keep each row's log-sum-exp, so the gradient never recomputes the probabilities; elsewhere the
 * blocked path below runs, which recomputes them block by block.
 */
function flashAttention(b: TorchBackend, sh: AttentionShape): boolean {
  return b.device === 'cpu' && (sh.pads.every((p) => p === 0) || sh.blockRows >= sh.s);
}

/** The additive padding bias [pads, 1, S, S] of a flash pass, or null where the causal flag alone masks. */
function flashBias(own: (h: number) => number, b: TorchBackend, sh: AttentionShape): number | null {
  if (sh.pads.every((p) => p === 0)) return null;
  return own(b.addon.upload(paddedCausalBiasValues(sh.pads, sh.s, sh.s), [sh.pads.length, 1, sh.s, sh.s], b.device));
}

/** The flash kernels' operands: rotated q [B, heads, S, d] (unscaled: the kernel scales), rotated k and v [B, kv, S, d] (views). */
function flashOperands(t: Aten, b: TorchBackend, [q, k, v, cos, sin]: tf.TensorInfo[], sh: AttentionShape): [number, number, number] {
  const half = sh.d / 2;
  const [hc, hs] = [b.handle(cos), b.handle(sin)];
  return [rotated(t, b.handle(q), hc, hs, half), rotated(t, b.handle(k), hc, hs, half), t('aten::permute', '', [b.handle(v), [0, 2, 1, 3]])];
}

/** Outputs: the merged heads [B·S, heads·d] and each query row's log-sum-exp [B, heads, S] (empty [0] on the blocked path). */
function attentionForward(b: TorchBackend, inputs: tf.TensorInfo[], a: KernelAttrs): tf.TensorInfo[] {
  const sh = attentionShape(inputs[0], inputs[1], a);
  const rep = sh.heads / sh.kv;
  if (flashAttention(b, sh)) {
    const [h, lse] = scopedN(b, (t, own) => {
      const [qr, kr, vh] = flashOperands(t, b, inputs, sh);
      const bias = flashBias(own, b, sh);
      const [o, l] = b.callN('aten::_scaled_dot_product_flash_attention_for_cpu', '', [qr, kr, vh, 0, bias === null, bias, sh.scale]).map(own);
      // o is [B, heads, S, d] laid out as [B, S, heads, d]: the permute and contiguous copy nothing.
      return [t('aten::reshape', '', [t('aten::contiguous', '', [t('aten::permute', '', [o, [0, 2, 1, 3]])]), [sh.b * sh.s, sh.heads * sh.d]]), l];
    });
    return [b.out(h, [sh.b * sh.s, sh.heads * sh.d], 'float32'), b.out(lse, [sh.b, sh.heads, sh.s], 'float32')];
  }
  const [h, none] = scopedN(b, (t, own) => {
    const ops = attentionOperands(t, b, inputs, sh);
    const outs = queryBlocks(sh).map(([q0, n]) => {
      const p = blockProbs(t, own, b, rowBlock(t, ops.q5, sh, q0, n), ops, sh, q0, n);
      return t('aten::reshape', '', [t('aten::matmul', '', [p, ops.vh]), [sh.b, sh.kv, rep, n, sh.d]]);
    });
    const joined = outs.length === 1 ? outs[0] : t('aten::cat', '', [outs, 3]);
    return [t('aten::reshape', '', [headsLast(t, joined, sh), [sh.b * sh.s, sh.heads * sh.d]]), own(b.addon.upload(new Float32Array(0), [0], b.device))];
  });
  return [b.out(h, [sh.b * sh.s, sh.heads * sh.d], 'float32'), b.out(none, [0], 'float32')];
}

/**
 * ATTENTION's gradients: ∂ rotated q, ∂ rotated k and ∂v from the flash kernel (with the forward's
 * output and log-sum-exp) or the blocked path; RoPE's transpose takes the first two back to q and
 * k. A table's gradient sums x·dy (cos) or swap(x)·dy (sin) over what the table was broadcast
 * along, for q and k both. Inputs dy, q, k, v, cos, sin, and the forward's y and lse.
 */
function attentionBackward(b: TorchBackend, [dy, ...rest]: tf.TensorInfo[], a: KernelAttrs): tf.TensorInfo | tf.TensorInfo[] {
  const inputs = rest.slice(0, 5);
  const [q, k, v, cos, sin, y, lse] = rest;
  const sh = attentionShape(q, k, a);
  const wrt = a.wrt as 'qkv' | 'cos' | 'sin';
  const half = sh.d / 2;
  const hs = scopedN(b, (t, own) => {
    // ∂/∂(rotated q) = scale·dQ as [B, heads, S, d] and ∂/∂(rotated k) = dK, [B, kv, S, d].
    const [dQr, dK, dV] = flashAttention(b, sh) ? flashGrads(t, own, b, dy, inputs, y, lse, sh) : blockedGrads(t, own, b, dy, inputs, sh);
    const [hc, hsn] = [b.handle(cos), b.handle(sin)];
    if (wrt === 'qkv') {
      const back = (x: number): number => t('aten::contiguous', '', [t('aten::permute', '', [rotatedBack(t, x, hc, hsn, half), [0, 2, 1, 3]])]);
      return [back(dQr), back(dK), t('aten::contiguous', '', [t('aten::permute', '', [dV, [0, 2, 1, 3]])])];
    }
    const table = wrt === 'cos' ? cos : sin;
    const part = (x: tf.TensorInfo, g: number): number => {
      let xh = t('aten::permute', '', [b.handle(x), [0, 2, 1, 3]]);
      if (wrt === 'sin') xh = t('aten::roll', '', [xh, [half], [-1]]);
      return t('aten::sum_to_size', '', [t('aten::mul', 'Tensor', [xh, g]), table.shape]);
    };
    return [t('aten::add', 'Tensor', [part(q, dQr), part(k, dK)])];
  });
  if (wrt !== 'qkv') return b.out(hs[0], (wrt === 'cos' ? cos : sin).shape, 'float32');
  return [b.out(hs[0], q.shape, 'float32'), b.out(hs[1], k.shape, 'float32'), b.out(hs[2], v.shape, 'float32')];
}

/**
 * The flash kernel's gradients from the forward's output y and log-sum-exp (no probabilities are
 * recomputed beyond the kernel's own tiles): ∂ rotated q (the kernel applies the scale), ∂ rotated
 * k and ∂v, as [B, heads or kv, S, d] (views of the kernel's [B, S, ·, d] results).
 */
function flashGrads(t: Aten, own: (h: number) => number, b: TorchBackend, dy: tf.TensorInfo, inputs: tf.TensorInfo[], y: tf.TensorInfo, lse: tf.TensorInfo, sh: AttentionShape): [number, number, number] {
  const [qr, kr, vh] = flashOperands(t, b, inputs, sh);
  const bias = flashBias(own, b, sh);
  // [B·S, heads·d] → [B, heads, S, d] views, as the forward kernel laid its output out.
  const heads = (x: tf.TensorInfo): number => t('aten::permute', '', [t('aten::reshape', '', [b.handle(x), [sh.b, sh.s, sh.heads, sh.d]]), [0, 2, 1, 3]]);
  const g = b.callN('aten::_scaled_dot_product_flash_attention_for_cpu_backward', '', [heads(dy), qr, kr, vh, heads(y), b.handle(lse), 0, bias === null, bias, sh.scale]).map(own);
  return [g[0], g[1], g[2]];
}

/**
 * The blocked path's gradients, block by block with the probabilities recomputed: with
 * P = softmax(S), dV = Σ Pᵀ·dO, dP = dO·Vᵀ, dS = P ∘ (dP − Σ_j dP∘P), dQ = dS·K (then ·scale),
 * dK = Σ dSᵀ·Q.
 */
function blockedGrads(t: Aten, own: (h: number) => number, b: TorchBackend, dy: tf.TensorInfo, inputs: tf.TensorInfo[], sh: AttentionShape): [number, number, number] {
  const rep = sh.heads / sh.kv;
  const ops = attentionOperands(t, b, inputs, sh);
  // dy [B·S, heads·d] → [B, heads, S, d] → [B, kv, rep, S, d]
  const dO = t('aten::reshape', '', [t('aten::permute', '', [t('aten::reshape', '', [b.handle(dy), [sh.b, sh.s, sh.heads, sh.d]]), [0, 2, 1, 3]]), [sh.b, sh.kv, rep, sh.s, sh.d]]);
  const vT = t('aten::transpose', 'int', [ops.vh, -2, -1]);
  let dK = -1;
  let dV = -1;
  const dQs: number[] = [];
  for (const [q0, n] of queryBlocks(sh)) {
    const qb = rowBlock(t, ops.q5, sh, q0, n);
    const p = blockProbs(t, own, b, qb, ops, sh, q0, n);
    const dob = rowBlock(t, dO, sh, q0, n);
    const dP = t('aten::matmul', '', [dob, vT]);
    const dS = t('aten::mul', 'Tensor', [p, t('aten::sub', 'Tensor', [dP, t('aten::sum', 'dim_IntList', [t('aten::mul', 'Tensor', [dP, p]), [-1], true])])]);
    dQs.push(t('aten::reshape', '', [t('aten::matmul', '', [dS, ops.kr]), [sh.b, sh.kv, rep, n, sh.d]]));
    const dKb = t('aten::matmul', '', [t('aten::transpose', 'int', [dS, -2, -1]), qb]);
    const dVb = t('aten::matmul', '', [t('aten::transpose', 'int', [p, -2, -1]), dob]);
    dK = dK < 0 ? dKb : t('aten::add', 'Tensor', [dK, dKb]);
    dV = dV < 0 ? dVb : t('aten::add', 'Tensor', [dV, dVb]);
  }
  const joined = dQs.length === 1 ? dQs[0] : t('aten::cat', '', [dQs, 3]);
  return [t('aten::mul', 'Scalar', [t('aten::reshape', '', [joined, [sh.b, sh.heads, sh.s, sh.d]]), sh.scale]), dK, dV];
}

/** Row indices [n] (int32) as the [n, 1] int64 column that gather and scatter take along axis 1. */
function indexColumn(t: Aten, indices: number): number {
  return t('aten::unsqueeze', '', [t('aten::_to_copy', '', [indices, SCALAR_TYPE.int64]), 1]);
}

export const FUSED_KERNELS: TorchKernel[] = [
  {
    // lp = log_softmax(logits)[target] (one fused pass over each row; ATen's logsumexp takes four
    // and two temporaries of the logits' size), then lse = logits[target] − lp.
    name: TOKEN_LOG_PROBS,
    inputs: ['logits', 'targets'],
    impl: ([logits, targets], _a, b) => {
      const [lp, lse] = scopedN(b, (t) => {
        const index = indexColumn(t, b.handle(targets));
        const pick = (x: number): number => t('aten::squeeze', 'dim', [t('aten::gather', '', [x, 1, index]), 1]);
        const lp = pick(t('aten::_log_softmax', '', [b.handle(logits), 1, false]));
        return [lp, t('aten::sub', 'Tensor', [pick(b.handle(logits)), lp])];
      });
      return [b.out(lp, targets.shape, 'float32'), b.out(lse, targets.shape, 'float32')];
    },
  },
  {
    // (onehot − p)·dy with p = exp(logits − lse), without a one-hot matrix: every element is
    // (0 − p)·dy = −p·dy, then each row's target element is overwritten with (1 − p)·dy (the
    // same arithmetic); a target outside the block keeps its row as it is.
    // With wholeRows, p is one softmax pass (ATen's exp of logits − lse slows down several-fold
    // on rows far below their maximum, as a trained head's are).
    name: TOKEN_LOG_PROBS_GRAD,
    inputs: ['logits', 'lse', 'targets', 'dy'],
    impl: ([logits, lse, targets, dy], a, b) => {
      const [n, v] = logits.shape;
      const h = scoped(b, (t) => {
        const p =
          a.wholeRows === true
            ? t('aten::_softmax', '', [b.handle(logits), 1, false])
            : t('aten::exp', '', [t('aten::sub', 'Tensor', [b.handle(logits), t('aten::unsqueeze', '', [b.handle(lse), 1])])]);
        const dyCol = t('aten::unsqueeze', '', [b.handle(dy), 1]);
        const g = t('aten::mul', 'Tensor', [t('aten::neg', '', [p]), dyCol]);
        const tgt = b.handle(targets);
        const inBlock = t('aten::unsqueeze', '', [t('aten::logical_and', '', [t('aten::ge', 'Scalar', [tgt, 0]), t('aten::lt', 'Scalar', [tgt, v])]), 1]);
        const column = indexColumn(t, t('aten::clamp', '', [tgt, 0, v - 1]));
        const hit = t('aten::mul', 'Tensor', [t('aten::rsub', 'Scalar', [t('aten::gather', '', [p, 1, column]), 1]), dyCol]);
        const kept = t('aten::gather', '', [g, 1, column]);
        return t('aten::scatter_', 'src', [g, 1, column, t('aten::where', 'self', [inBlock, hit, kept])]);
      });
      return b.out(h, [n, v], 'float32');
    },
  },
  {
    name: LINEAR,
    inputs: ['x', 'weight'],
    impl: ([x, w], _a, b) => {
      const { handle, shape } = batchMatMul(b, x, w, false, true);
      return b.out(handle, shape, 'float32');
    },
  },
  {
    // ((x·Aᵀ)·Bᵀ)·scale: the products and scaling of the composition, in its order.
    name: LORA_DELTA,
    inputs: ['x', 'a', 'b'],
    impl: ([x, a, bw], attrs, b) => {
      const h = scoped(b, (t) => {
        const low = t('aten::mm', '', [b.handle(x), t('aten::t', '', [b.handle(a)])]);
        return t('aten::mul', 'Scalar', [t('aten::mm', '', [low, t('aten::t', '', [b.handle(bw)])]), attrs.scale as number]);
      });
      return b.out(h, [x.shape[0], bw.shape[0]], 'float32');
    },
  },
  {
    // g = dy·scale, u = g·B: ∂x = u·A, ∂A = uᵀ·x, ∂B = gᵀ·(x·Aᵀ) (the composition's gradients: the
    // scaling's first, then each product's).
    name: LORA_DELTA_GRAD,
    inputs: ['dy', 'x', 'a', 'b'],
    impl: ([dy, x, a, bw], attrs, b) => {
      const [dx, da, db] = scopedN(b, (t) => {
        const g = t('aten::mul', 'Scalar', [b.handle(dy), attrs.scale as number]);
        const u = t('aten::mm', '', [g, b.handle(bw)]);
        const low = t('aten::mm', '', [b.handle(x), t('aten::t', '', [b.handle(a)])]);
        return [t('aten::mm', '', [u, b.handle(a)]), t('aten::mm', '', [t('aten::t', '', [u]), b.handle(x)]), t('aten::mm', '', [t('aten::t', '', [g]), low])];
      });
      return [b.out(dx, x.shape, 'float32'), b.out(da, a.shape, 'float32'), b.out(db, bw.shape, 'float32')];
    },
  },
  { name: ATTENTION, inputs: ['q', 'k', 'v', 'cos', 'sin'], impl: (inputs, a, b) => attentionForward(b, inputs, a) },
  { name: ATTENTION_GRAD, inputs: ['dy', 'q', 'k', 'v', 'cos', 'sin', 'y', 'lse'], impl: (inputs, a, b) => attentionBackward(b, inputs, a) },
  {
    // Outputs y and rstd = 1/sqrt(mean(x²) + eps) per row ([..., 1]), which the gradient reuses.
    name: RMS_NORM,
    inputs: ['x', 'weight'],
    impl: ([x, w], a, b) => {
      const rshape = [...x.shape.slice(0, -1), 1];
      const eps = a.eps as number;
      if (b.device === 'cpu' && b.addon.rmsNorm !== undefined) {
        const [y, r] = b.addon.rmsNorm(b.handle(x), b.handle(w), eps);
        return [b.out(y, x.shape, 'float32'), b.out(r, rshape, 'float32')];
      }
      const [y, r] = scopedN(b, (t, own) => {
        const [y0, r0] = b.callN('aten::_fused_rms_norm', '', [b.handle(x), [x.shape[x.shape.length - 1]], b.handle(w), eps]).map(own);
        return [y0, t('aten::reshape', '', [r0, rshape])];
      });
      return [b.out(y, x.shape, 'float32'), b.out(r, rshape, 'float32')];
    },
  },
  {
    // y = w ⊙ x·r with r the forward's rstd, x̂ = x·r, g = dy ⊙ w:
    // ∂L/∂x = r·(g − x̂·mean(g ⊙ x̂)) (∂r/∂x_j = −r³·x_j/h); ∂L/∂w = Σ_rows dy ⊙ x̂.
    name: RMS_NORM_GRAD,
    inputs: ['dy', 'x', 'weight', 'rstd'],
    impl: ([dy, x, w, rstd], a, b) => {
      const wrtX = a.wrt === 'x';
      const shape = wrtX ? x.shape : w.shape;
      if (b.device === 'cpu' && b.addon.rmsNormGrad !== undefined) return b.out(b.addon.rmsNormGrad(b.handle(dy), b.handle(x), b.handle(w), b.handle(rstd), !wrtX), shape, 'float32');
      const h = scoped(b, (t) => {
        const [hx, hdy, r] = [b.handle(x), b.handle(dy), b.handle(rstd)];
        const xhat = t('aten::mul', 'Tensor', [hx, r]);
        if (!wrtX) return sumLeading(t, t('aten::mul', 'Tensor', [hdy, xhat]), x.shape.length);
        const g = t('aten::mul', 'Tensor', [hdy, b.handle(w)]);
        const m = t('aten::mean', 'dim', [t('aten::mul', 'Tensor', [g, xhat]), [-1], true]);
        // g − x̂·m, then ·r
        return t('aten::mul', 'Tensor', [t('aten::sub', 'Tensor', [g, t('aten::mul', 'Tensor', [xhat, m])]), r]);
      });
      return b.out(h, shape, 'float32');
    },
  },
  {
    name: SILU_MUL,
    inputs: ['gate', 'up'],
    impl: ([gate, up], _a, b) => {
      const h = scoped(b, (t) => t('aten::mul', 'Tensor', [t('aten::silu', '', [b.handle(gate)]), b.handle(up)]));
      return b.out(h, tf.broadcast_util.assertAndGetBroadcastShape(gate.shape, up.shape), 'float32');
    },
  },
  {
    // y = silu(gate) ⊙ up: ∂L/∂up = dy ⊙ silu(gate); ∂L/∂gate = silu'(gate) ⊙ dy ⊙ up (silu_backward).
    name: SILU_MUL_GRAD,
    inputs: ['dy', 'gate', 'up'],
    impl: ([dy, gate, up], a, b) => {
      const wrtGate = a.wrt === 'gate';
      const h = scoped(b, (t) =>
        wrtGate
          ? t('aten::silu_backward', '', [t('aten::mul', 'Tensor', [b.handle(dy), b.handle(up)]), b.handle(gate)])
          : t('aten::mul', 'Tensor', [b.handle(dy), t('aten::silu', '', [b.handle(gate)])]),
      );
      return b.out(h, wrtGate ? gate.shape : up.shape, 'float32');
    },
  },
  {
    // Forward: x·cos + swap(x)·sin. The map is linear in x; its transpose (the gradient) is
    // dy·cos + swap(dy·sin), since swap is its own inverse. swap = roll by half the last axis.
    name: ROTARY,
    inputs: ['x', 'cos', 'sin'],
    impl: ([x, cos, sin], a, b) => {
      const half = x.shape[x.shape.length - 1] / 2;
      const h = scoped(b, (t) => {
        const hx = b.handle(x);
        const xc = t('aten::mul', 'Tensor', [hx, b.handle(cos)]);
        if (a.adjoint === true) return t('aten::add', 'Tensor', [xc, t('aten::roll', '', [t('aten::mul', 'Tensor', [hx, b.handle(sin)]), [half], [-1]])]);
        return t('aten::addcmul', '', [xc, t('aten::roll', '', [hx, [half], [-1]]), b.handle(sin)]);
      });
      return b.out(h, tf.broadcast_util.assertAndGetBroadcastShape(tf.broadcast_util.assertAndGetBroadcastShape(x.shape, cos.shape), sin.shape), 'float32');
    },
  },
];
