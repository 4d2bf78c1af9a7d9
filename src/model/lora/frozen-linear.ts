/**
 * x·Wᵀ for a weight W [out, in] (Hugging Face layout) that lives on and takes no gradient: a
 * frozen LoRA base, or any weight in a tape-free pass (generation).
 *
 * The wasm backend's XNNPACK matmul packs its SECOND operand into a private buffer cached for as
 * long as that tensor lives, so x · (a long-lived weight) would keep a second copy of every weight
 * (an out-of-memory abort at Qwen3-0.6B's size), and copying the weight before each product costs
 * more than the product itself at decode time (a 1-row step of a 0.6 B model took 2.4 s). Here the
 * weight is the FIRST operand, which XNNPACK reads in place: y = (W · xᵀ)ᵀ, the small xᵀ packed
 * and freed with it. Measured on wasm (1 thread, [3072, 1024] weight): 1.7 ms at 1 row, 1.3 ms at
 * 4 rows, 51 ms at 300 rows (37 GFLOP/s), against 18, 63 and 56 ms copying column blocks.
 */
import * as tf from '@tensorflow/tfjs';

/** Most weight elements copied at once in the backward pass (4 M floats = 16 MB): big transient buffers fragment the wasm heap. */
const BLOCK_ELEMS = 4 * 1024 * 1024;

/**
 * The operand order and the row blocks are for wasm's XNNPACK. TensorFlow reads a transposed
 * operand in place and packs nothing for good, so there one matmul is the whole product: fewer
 * kernels per decoding step and no copies (at Qwen3-1.7B's size, block copies moved 6.8 GB per
 * decoding step).
 */
function onWasm(): boolean {
  return tf.getBackend() === 'wasm';
}

/**
 * x [N, in] · wᵀ for w [out, in] → [N, out], not differentiable, with w read in place (never
 * copied, never packed). Intermediates are freed as soon as they are used, also inside a tidy
 * scope: at a 150k vocabulary each is as large as the result.
 */
export function matMulAgainstFrozen(x: tf.Tensor2D, w: tf.Tensor2D): tf.Tensor2D {
  if (x.shape[1] !== w.shape[1]) throw new Error(`frozen matmul: input width ${x.shape[1]} does not match weight [${w.shape.join(',')}] (stored [out, in])`);
  if (!onWasm()) return tf.matMul(x, w, false, true);
  const xT = tf.transpose(x);
  const yT: tf.Tensor2D = tf.matMul(w, xT);
  xT.dispose();
  if (x.shape[0] === 1) return tf.reshape(yT, [1, w.shape[0]]);
  const y: tf.Tensor2D = tf.transpose(yT);
  yT.dispose();
  return y;
}

/**
 * dy [N, out] · w [out, in] → [N, in], the input gradient of {@link matMulAgainstFrozen}: w is the
 * second operand here, so it is multiplied in contiguous row blocks copied fresh (their packed
 * buffers go with them), at most `block` elements each.
 */
function inputGrad(dy: tf.Tensor2D, w: tf.Tensor2D, block: number): tf.Tensor2D {
  if (!onWasm()) return tf.matMul(dy, w);
  const [outF, inF] = w.shape;
  const n = dy.shape[0];
  const rows = Math.max(1, Math.min(outF, Math.floor(block / inF)));
  let acc: tf.Tensor2D | null = null;
  for (let r = 0; r < outF; r += rows) {
    const m = Math.min(rows, outF - r);
    const part: tf.Tensor2D = tf.tidy(() => {
      const wb = tf.slice(w, [r, 0], [m, inF]);
      const dyb = m === outF ? dy : tf.slice(dy, [0, r], [n, m]);
      return tf.matMul(dyb, wb);
    });
    if (acc) {
      const next = tf.add(acc, part) as tf.Tensor2D;
      acc.dispose();
      part.dispose();
      acc = next;
    } else acc = part;
  }
  return acc as tf.Tensor2D;
}

/**
 * x [N, in] · wᵀ for w [out, in] → [N, out], differentiable in x only. `blockElems`: most weight
 * elements copied at once in the backward pass.
 */
export function frozenLinear(x: tf.Tensor2D, w: tf.Tensor2D, blockElems = BLOCK_ELEMS): tf.Tensor2D {
  if (x.shape[1] !== w.shape[1]) throw new Error(`frozenLinear: input width ${x.shape[1]} does not match weight [${w.shape.join(',')}] (stored [out, in])`);
  const f = tf.customGrad(((xin: tf.Tensor2D) => ({
    value: matMulAgainstFrozen(xin, w),
    gradFunc: (dy: tf.Tensor2D) => inputGrad(dy, w, blockElems),
  })) as unknown as Parameters<typeof tf.customGrad>[0]);
  return f(x) as tf.Tensor2D;
}
