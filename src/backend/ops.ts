import * as tf from '@tensorflow/tfjs';
import { fusedLinear } from './fused.js';

// Small differentiable primitives that route around the wasm backend's slow or missing kernels
// (backend-findings §3.3/§3.4). They are numerically the plain tfjs ops on every backend.

/** What tfjs hands a custom op to keep tensors for its gradient (they come back as `saved`). */
export type GradientSaver = (tensors: tf.Tensor[]) => void;

/** A custom op's value, and the gradients of its inputs (one per input, in order) given `dy`. */
export interface CustomGradient<T extends tf.Tensor> {
  readonly value: T;
  readonly gradFunc: (dy: T, saved: tf.Tensor[]) => tf.Tensor | tf.Tensor[];
}

/**
 * An op with a hand-written gradient, typed: `f(inputs, save)` gets the op's tensor inputs as the
 * tuple `I` it is called with. Every custom gradient of comlrl is made here, because
 * tf.customGrad's own typing puts the inputs and the save callback in one rest array.
 */
export function custom<I extends tf.Tensor[], T extends tf.Tensor = tf.Tensor>(f: (inputs: I, save: GradientSaver) => CustomGradient<T>): (...inputs: I) => T {
  return tf.customGrad<T>((...args) => {
    const save = args[args.length - 1];
    if (typeof save !== 'function') throw new Error('custom: tfjs passed no save callback');
    // tfjs passes the op's inputs in call order, then the callback: the tuple the op was called with.
    return f(args.slice(0, -1) as I, save);
  });
}

/** Swaps the last two axes with an explicit transpose (no transpose flags on matMul). */
export function transposeLast2<T extends tf.Tensor>(x: T): T {
  const r = x.rank;
  if (r < 2) throw new Error(`transposeLast2: needs rank >= 2, got rank ${r}`);
  const perm = [...Array(r - 2).keys(), r - 1, r - 2];
  return tf.transpose(x, perm);
}

/**
 * Whether one BatchMatMul kernel beats per-slice 2-D products: on the native backends (TensorFlow,
 * torch) one batched call is fast at every size; on wasm, slicing wins except for a few rows.
 */
export function batchedMatMulIsFast(): boolean {
  const b = tf.getBackend();
  return b === 'tensorflow' || b === 'torch';
}

/**
 * Plain (non-differentiable-aware) matmul: rank-2 directly, higher ranks split into 2-D matmuls
 * over the flattened batch, which is several times faster than BatchMatMul on wasm (except for
 * very few rows per entry, and on tensorflow, where one batched call wins).
 * Batch dims of `a` and `b` must be equal (no broadcasting).
 */
export function rawMatMul(a: tf.Tensor, b: tf.Tensor): tf.Tensor {
  if (a.rank !== b.rank) throw new Error(`matMul: rank mismatch ${a.rank} vs ${b.rank}`);
  if (a.rank === 2) return tf.matMul(a as tf.Tensor2D, b as tf.Tensor2D);
  const batch = a.shape.slice(0, -2);
  const bBatch = b.shape.slice(0, -2);
  if (batch.some((d, i) => d !== bBatch[i])) {
    throw new Error(`matMul: batch dims differ [${batch.join(',')}] vs [${bBatch.join(',')}]`);
  }
  const n = batch.reduce((x, y) => x * y, 1);
  const [m, k] = a.shape.slice(-2);
  const [k2, p] = b.shape.slice(-2);
  if (k !== k2) throw new Error(`matMul: inner dims differ ${k} vs ${k2}`);
  // A few rows per batch entry (KV-cache decoding): the batched kernel beats per-slice op overhead.
  if (m <= 4 || batchedMatMulIsFast()) return tf.reshape(tf.matMul(tf.reshape(a, [n, m, k]) as tf.Tensor3D, tf.reshape(b, [n, k, p]) as tf.Tensor3D), [...batch, m, p]);
  const as = tf.unstack(tf.reshape(a, [n, m, k]));
  const bs = tf.unstack(tf.reshape(b, [n, k, p]));
  const outs = as.map((x, i) => tf.matMul(x as tf.Tensor2D, bs[i] as tf.Tensor2D));
  return tf.reshape(tf.stack(outs), [...batch, m, p]);
}

const matMulGrad = custom(([a, b], save) => {
  save([a, b]);
  return {
    value: rawMatMul(a, b),
    gradFunc: (dy, [sa, sb]) => [rawMatMul(dy, transposeLast2(sb)), rawMatMul(transposeLast2(sa), dy)],
  };
});

/**
 * `a @ b` for equal-rank operands ([..., m, k] x [..., k, p]) whose gradient uses explicit
 * transposes and 2-D matmuls instead of tfjs's transpose-flag BatchMatMul (≈12x slower on wasm).
 */
export function matMul<T extends tf.Tensor>(a: T, b: tf.Tensor): T {
  return matMulGrad(a, b) as T;
}

/**
 * x [N, in] · wᵀ for a Hugging Face weight w [out, in] → [N, out], with w read in place: no copy
 * or transpose of the weight per call. Not differentiable by itself (a building block for
 * `linear` and the frozen-base products).
 *
 * wasm: XNNPACK packs a matmul's SECOND operand into a private buffer cached as long as that
 * tensor lives, so x · (a long-lived weight) would keep a second copy of every weight (an
 * out-of-memory abort at Qwen3-0.6B's size), and copying the weight before each product costs more
 * than the product at decode time (a 1-row step of a 0.6 B model took 2.4 s). The weight goes
 * FIRST, which XNNPACK reads in place: y = (W · xᵀ)ᵀ, the small xᵀ packed and freed with it
 * (1 thread, [3072, 1024] weight: 1.7 ms at 1 row, 1.3 ms at 4, 51 ms at 300, against 18, 63 and
 * 56 ms copying column blocks). Intermediates are freed at once, also inside a tidy scope: at a
 * 150k vocabulary each is as large as the result.
 * TensorFlow: oneDNN's matmul (TF's default) reads a transposed second operand in place, so one
 * transpose-flag matmul is the whole product.
 * `npm run bench -- matmul` measures both against a weight transposed beforehand.
 */
export function matMulWeightT(x: tf.Tensor2D, w: tf.Tensor2D): tf.Tensor2D {
  if (tf.getBackend() !== 'wasm') return tf.matMul(x, w, false, true);
  const xT = tf.transpose(x);
  const yT: tf.Tensor2D = tf.matMul(w, xT);
  xT.dispose();
  if (x.shape[0] === 1) return tf.reshape(yT, [1, w.shape[0]]);
  const y: tf.Tensor2D = tf.transpose(yT);
  yT.dispose();
  return y;
}

const linearGrad = custom(([x, w], save) => {
  save([x, w]);
  return {
    value: matMulWeightT(x as tf.Tensor2D, w as tf.Tensor2D),
    // d/dx = dy·W ; d/dW = dyᵀ·x, already in W's [out, in] layout.
    gradFunc: (dy, [sx, sw]) => [
      tf.matMul(dy as tf.Tensor2D, sw as tf.Tensor2D),
      tf.matMul(tf.transpose(dy as tf.Tensor2D), sx as tf.Tensor2D),
    ],
  };
});

/**
 * A linear layer in Hugging Face weight layout: `x [N, in]`, `weight [out, in]`, optional
 * `bias [out]`; returns `x·weightᵀ + bias` as [N, out].
 */
export function linear(x: tf.Tensor2D, weight: tf.Tensor2D, bias?: tf.Tensor1D): tf.Tensor2D {
  if (x.shape[1] !== weight.shape[1]) {
    throw new Error(`linear: input width ${x.shape[1]} does not match weight [${weight.shape.join(',')}]`);
  }
  const y = fusedLinear(x, weight) ?? (linearGrad(x, weight) as tf.Tensor2D);
  return bias ? tf.add(y, bias) : y;
}

const gatherRowsGrad = custom(([table, idx], save) => {
  save([idx]);
  return {
    value: tf.gather(table, idx),
    // Scatter-add sums duplicate rows; tfjs's own gather gradient needs UnsortedSegmentSum (no wasm kernel).
    gradFunc: (dy, [si]) => [tf.scatterND(tf.reshape(si, [-1, 1]), dy, table.shape), tf.zerosLike(si)],
  };
});

/**
 * Rows `table[idx[i]]` (axis 0) with a scatter-add gradient. Use it for embeddings and for
 * picking positions out of a flattened [B·S, D] tensor (instead of `gather` with batchDims, which
 * is wrong on wasm).
 */
export function gatherRows<T extends tf.Tensor>(table: T, idx: tf.Tensor1D | Int32Array | number[]): T {
  const ids = idx instanceof tf.Tensor ? idx : tf.tensor1d(Int32Array.from(idx), 'int32');
  if (ids.dtype !== 'int32') throw new Error(`gatherRows: indices must be int32, got ${ids.dtype}`);
  const out = gatherRowsGrad(table, ids) as T;
  if (!(idx instanceof tf.Tensor)) ids.dispose();
  return out;
}

const gatherRowsMaskedGrad = custom(([table, idx, keep], save) => {
  save([idx, keep]);
  return {
    value: tf.gather(table, idx),
    // The scatter-add of gatherRows, with the positions whose `keep` is 0 left out.
    gradFunc: (dy, [si, sk]) => [tf.scatterND(tf.reshape(si, [-1, 1]), tf.mul(dy, sk), table.shape), tf.zerosLike(si), tf.zerosLike(sk)],
  };
});

/**
 * Embedding lookup `table[ids[i]]` ({@link gatherRows}) whose gradient leaves the lookups of
 * `paddingIdx` out, as torch's `nn.Embedding(padding_idx=…)` (transformers builds its embeddings
 * with `padding_idx = pad_token_id`): a looked-up pad token gives its row no gradient. Other uses
 * of the table (a tied head) still train the row.
 */
export function embeddingRows(table: tf.Tensor2D, ids: Int32Array, paddingIdx: number | null): tf.Tensor2D {
  if (paddingIdx === null || !ids.includes(paddingIdx)) return gatherRows(table, ids);
  return tf.tidy(() => {
    const idx = tf.tensor1d(ids, 'int32');
    const keep = tf.tensor2d(Float32Array.from(ids, (id) => (id === paddingIdx ? 0 : 1)), [ids.length, 1]);
    return gatherRowsMaskedGrad(table, idx, keep) as tf.Tensor2D;
  });
}

/**
 * `x[i, cols[i]]` for a 2-D `x [N, V]`, as a [N] tensor, via a flattened index `i·V + col`
 * (differentiable; no batchDims gather).
 */
export function takeAlongRows(x: tf.Tensor2D, cols: ArrayLike<number>): tf.Tensor1D {
  const [n, v] = x.shape;
  if (cols.length !== n) throw new Error(`takeAlongRows: ${cols.length} columns for ${n} rows`);
  const flat = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const c = cols[i];
    if (!Number.isInteger(c) || c < 0 || c >= v) throw new Error(`takeAlongRows: column ${c} out of range [0, ${v}) at row ${i}`);
    flat[i] = i * v + c;
  }
  return tf.tidy(() => gatherRows(tf.reshape(x, [n * v, 1]), flat).reshape([n]) as tf.Tensor1D);
}

const logSumExpRowsGrad = custom(([x], save) => {
  const value = tf.tidy(() => {
    const m = tf.max(x, 1, true);
    return tf.reshape(tf.add(tf.log(tf.sum(tf.exp(tf.sub(x, m)), 1, true)), m), [x.shape[0]]);
  });
  save([x, value]);
  return {
    value,
    // d lse / dx = softmax(x); avoids tfjs's Max gradient, whose Equal kernel is very slow on wasm.
    gradFunc: (dy, [sx, lse]) => [tf.mul(tf.reshape(dy, [-1, 1]), tf.exp(tf.sub(sx, tf.reshape(lse, [-1, 1]))))],
  };
});

/** log Σ_j exp(x[i, j]) per row of a 2-D tensor, [N], with a softmax gradient. */
export function logSumExpRows(x: tf.Tensor2D): tf.Tensor1D {
  return logSumExpRowsGrad(x) as tf.Tensor1D;
}

/**
 * Runs `fn(...inputs)` as one op whose gradient is zero for every input. Ops inside `fn` are not
 * recorded on the gradient tape, so comparisons (`greater`, `equal`, ...) that have no gradient in
 * tfjs can build masks from differentiated tensors.
 */
export function withoutGradient<T extends tf.Tensor>(inputs: readonly tf.Tensor[], fn: (...xs: tf.Tensor[]) => T): T {
  if (inputs.length === 0) return fn();
  const op = custom((xs) => ({
    // clone: a customGrad value must be a new tensor even when fn returns an input unchanged.
    value: tf.clone(fn(...xs)),
    gradFunc: () => xs.map((x) => tf.zerosLike(x)),
  }));
  return op(...inputs) as T;
}

/** The same values with a zero gradient (tfjs has no stop-gradient op). */
export function stopGradient<T extends tf.Tensor>(x: T): T {
  return withoutGradient([x], (t) => t) as T;
}

/**
 * A 0/1 float mask [B, T]: row b has ones in [starts[b], starts[b] + lengths[b]).
 * Built from plain numbers, so it is a constant under any gradient tape.
 */
export function lengthMask(lengths: readonly number[], width: number, starts?: readonly number[]): tf.Tensor2D {
  const data = new Float32Array(lengths.length * width);
  lengths.forEach((len, b) => {
    const s = starts?.[b] ?? 0;
    const e = Math.min(width, s + len);
    for (let t = Math.max(0, s); t < e; t++) data[b * width + t] = 1;
  });
  return tf.tensor2d(data, [lengths.length, width]);
}

/** Additive bias that masks disallowed attention: 0 where allowed, this value where not. */
export const MASKED_BIAS = -1e9;

/**
 * Additive causal mask [S, S]: query i sees keys 0..i. A large finite negative (not -inf), so a
 * row with every key masked stays finite.
 */
export function causalBias(size: number): tf.Tensor2D {
  const data = new Float32Array(size * size);
  for (let i = 0; i < size; i++) for (let j = i + 1; j < size; j++) data[i * size + j] = MASKED_BIAS;
  return tf.tensor2d(data, [size, size]);
}

/**
 * Additive attention bias [B, 1, rows, K] for left-padded rows with a cache: query q of row b sits
 * at absolute slot `keyLen - queryLen + q`, sees keys up to that slot, and never the first
 * `padding[b]` keys (a padded query still sees itself, so no row is all-masked). `firstQuery` and
 * `rows` select a block of the queries (attention in blocks); by default all of them.
 */
export function paddedCausalBias(padding: readonly number[], queryLen: number, keyLen: number, firstQuery = 0, rows = queryLen): tf.Tensor4D {
  return tf.tensor4d(paddedCausalBiasValues(padding, queryLen, keyLen, firstQuery, rows), [padding.length, 1, rows, keyLen]);
}

/** The values of {@link paddedCausalBias}, row-major [B, 1, rows, K], for a backend to upload itself. */
export function paddedCausalBiasValues(padding: readonly number[], queryLen: number, keyLen: number, firstQuery = 0, rows = queryLen): Float32Array {
  const b = padding.length;
  const data = new Float32Array(b * rows * keyLen);
  for (let r = 0; r < b; r++) {
    for (let i = 0; i < rows; i++) {
      const slot = keyLen - queryLen + firstQuery + i;
      const base = (r * rows + i) * keyLen;
      for (let k = 0; k < keyLen; k++) {
        const allowed = k <= slot && (k >= padding[r] || k === slot);
        if (!allowed) data[base + k] = MASKED_BIAS;
      }
    }
  }
  return data;
}

/**
 * `tf.tidy` for results whose static type is not a `TensorContainer` (interfaces, nullable
 * fields): every tensor reachable from the result is kept, everything else is disposed.
 */
export function tidyKeep<T>(fn: () => T): T {
  return tf.tidy(fn as () => tf.TensorContainer) as T;
}

/**
 * A tensor whose values the backend holds now. tfjs-node keeps the JS array a tensor is made from
 * until an op first reads it and only then copies it into TensorFlow, so a model's weights would
 * all exist twice at its first pass (the JS arrays go only when V8 next collects): at 3 B
 * parameters, 24 GB. A reshape to its own shape is a TensorFlow op that takes the values and
 * shares its buffer; `t` is disposed. Other backends take the values when the tensor is made.
 */
export function uploadNow<T extends tf.Tensor>(t: T): T {
  if (tf.getBackend() !== 'tensorflow') return t;
  const held = tf.reshape(t, t.shape) as T;
  t.dispose();
  return held;
}
