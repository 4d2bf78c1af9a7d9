/**
 * x·Wᵀ for a frozen weight stored pre-transposed as wT [in, out]: the forward pass is a plain
 * matmul, and the gradient reaches x only (the weight is a constant). tfjs's own matMul gradient
 * would use a transpose-flag matmul, which is several times slower on wasm, so dx = dy·W is
 * computed with explicit transposes of W, in column blocks so that a large weight (the output head
 * over a 150k vocabulary) never needs a full transposed copy.
 */
import * as tf from '@tensorflow/tfjs';

/** Most weight elements copied or transposed at once (4 M floats = 16 MB): big transient buffers fragment the wasm heap. */
const BLOCK_ELEMS = 4 * 1024 * 1024;

/**
 * Only wasm needs the block copies: its XNNPACK matmul caches a packed copy of a live second
 * operand, and its transposed-operand matmuls are slow. Elsewhere they would copy the whole base
 * on every call (6.8 GB per decoding step at Qwen3-1.7B's size).
 */
function blocked(): boolean {
  return tf.getBackend() === 'wasm';
}

function inputGrad(dy: tf.Tensor2D, wT: tf.Tensor2D, block: number): tf.Tensor2D {
  const [inF, outF] = wT.shape;
  if (!blocked()) return tf.matMul(dy, wT, false, true);
  if (inF * outF <= block) return tf.matMul(dy, tf.transpose(wT));
  const cols = Math.max(1, Math.floor(block / inF));
  const n = dy.shape[0];
  let acc: tf.Tensor2D | null = null;
  for (let c = 0; c < outF; c += cols) {
    const w = Math.min(cols, outF - c);
    const part: tf.Tensor2D = tf.tidy(() => tf.matMul(tf.slice(dy, [0, c], [n, w]), tf.transpose(tf.slice(wT, [0, c], [inF, w]))));
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
 * x [N, in] · wT [in, out] for a weight that lives on: the product is taken against fresh copies
 * of column blocks of wT. The wasm backend's XNNPACK matmul packs its second operand into a
 * private buffer cached for as long as that tensor lives, so a plain matmul against a frozen base
 * would keep a second copy of every base weight (an out-of-memory abort at Qwen3-0.6B's size); a
 * block copy and its packed buffer are freed right after use.
 */
export function matMulAgainstFrozen(x: tf.Tensor2D, wT: tf.Tensor2D, blockElems = BLOCK_ELEMS): tf.Tensor2D {
  const [inF, outF] = wT.shape;
  if (!blocked()) return tf.matMul(x, wT);
  const cols = Math.max(1, Math.min(outF, Math.floor(blockElems / inF)));
  return tf.tidy(() => {
    const parts: tf.Tensor2D[] = [];
    for (let c = 0; c < outF; c += cols) {
      // Freed at once, not at the end of the scope: all blocks alive together would be a copy of wT.
      const block = tf.slice(wT, [0, c], [inF, Math.min(cols, outF - c)]);
      parts.push(tf.matMul(x, block));
      block.dispose();
    }
    return parts.length === 1 ? parts[0] : (tf.concat(parts, 1) as tf.Tensor2D);
  });
}

/**
 * x [N, in] · wT [in, out] → [N, out], differentiable in x only. `blockElems`: most weight
 * elements transposed at once in the backward pass.
 */
export function frozenLinear(x: tf.Tensor2D, wT: tf.Tensor2D, blockElems = BLOCK_ELEMS): tf.Tensor2D {
  if (x.shape[1] !== wT.shape[0]) throw new Error(`frozenLinear: input width ${x.shape[1]} does not match weight [${wT.shape.join(',')}] (stored [in, out])`);
  const f = tf.customGrad(((xin: tf.Tensor2D) => ({
    value: matMulAgainstFrozen(xin, wT, blockElems),
    gradFunc: (dy: tf.Tensor2D) => inputGrad(dy, wT, blockElems),
  })) as unknown as Parameters<typeof tf.customGrad>[0]);
  return f(x) as tf.Tensor2D;
}
