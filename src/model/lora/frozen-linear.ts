/**
 * x·Wᵀ for a weight W [out, in] (Hugging Face layout) that lives on and takes no gradient: a
 * frozen LoRA base, or any weight in a tape-free pass (generation).
 *
 * How the product itself is taken on each backend, and why, is in `matMulWeightT` (backend/ops.ts).
 */
import * as tf from '@tensorflow/tfjs';
import { fusedLinear } from '../../backend/fused.js';
import { custom, matMulWeightT } from '../../backend/ops.js';

/** Most weight elements copied at once in the backward pass (4 M floats = 16 MB): big transient buffers fragment the wasm heap. */
const BLOCK_ELEMS = 4 * 1024 * 1024;

/** wasm gets row blocks in the backward pass (see `inputGrad`); TensorFlow takes the whole product. */
function onWasm(): boolean {
  return tf.getBackend() === 'wasm';
}

/**
 * x [N, in] · wᵀ for w [out, in] → [N, out], not differentiable, with w read in place (never
 * copied, never packed): see `matMulWeightT`.
 */
export function matMulAgainstFrozen(x: tf.Tensor2D, w: tf.Tensor2D): tf.Tensor2D {
  if (x.shape[1] !== w.shape[1]) throw new Error(`frozen matmul: input width ${x.shape[1]} does not match weight [${w.shape.join(',')}] (stored [out, in])`);
  return matMulWeightT(x, w);
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
  // Where the backend has a linear kernel, its weight gradient is never asked for (w is not a variable).
  const fused = fusedLinear(x, w);
  if (fused !== null) return fused;
  const f = custom(([xin]: [tf.Tensor2D]) => ({
    value: matMulAgainstFrozen(xin, w),
    gradFunc: (dy: tf.Tensor2D) => inputGrad(dy, w, blockElems),
  }));
  return f(x);
}
