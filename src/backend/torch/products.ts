import * as tf from '@tensorflow/tfjs';
import { SCALAR_TYPE, type TorchBackend } from './backend.js';

// Matrix products with tfjs's transpose flags, shared by BatchMatMul, _FusedMatMul and the fused
// linear kernel.

type Info = tf.TensorInfo;

const { broadcast_util, util } = tf;

/**
 * x [m, k] · W [n, k]ᵀ with a few rows against a large weight, on CPU: MKL's sgemm takes a slow
 * path for 2–64 rows against a transposed operand on this AMD EPYC (4 rows × [6144, 2048]: 9.5 ms
 * against 3.5 ms for W·xᵀ, 8 rows 16.5 against 6.4; PyTorch 2.13 from Python, 2 threads, idle
 * machine), which is every KV decoding step of several sequences through a real-size model.
 */
function fewRowsAgainstWeight(b: TorchBackend, a: Info, x: Info, transposeA: boolean, transposeB: boolean): boolean {
  if (b.device !== 'cpu' || transposeA || !transposeB || a.shape.length !== 2 || x.shape.length !== 2) return false;
  const m = a.shape[0];
  return m >= 2 && m <= 64 && x.shape[0] * x.shape[1] >= 1 << 20;
}

/**
 * Whether a product with a bfloat16-held weight runs in bfloat16. Yes on CUDA and on CPUs with
 * bfloat16 matrix units (AVX512-BF16, AMX); elsewhere only for a few rows, where the product is
 * bound by reading the weight and half the bytes pays: PyTorch 2.13's bfloat16 sgemm on this AVX2
 * EPYC runs ~1 GFLOP/s against ~120 in float32, so more rows take a float32 copy of the weight.
 */
function bf16Product(b: TorchBackend, rows: number): boolean {
  return b.bf16Units || rows <= BF16_ROWS_WITHOUT_UNITS;
}

/** Rows up to which a product with a bfloat16-held weight stays bfloat16 on a CPU without bf16 units. */
export const BF16_ROWS_WITHOUT_UNITS = 32;

/**
 * a·b with tfjs's transpose flags and batch broadcasting. A bfloat16-held operand (a frozen base's
 * weight) makes the product run in bfloat16 with a float32 result.
 */
export function batchMatMul(b: TorchBackend, a: Info, x: Info, transposeA: boolean, transposeB: boolean): { handle: number; shape: number[] } {
  const rows = util.sizeFromShape(a.shape) / (transposeA ? a.shape[a.shape.length - 2] : a.shape[a.shape.length - 1]);
  const bf16 = (b.isBf16(a) || b.isBf16(x)) && bf16Product(b, rows);
  if (!bf16 && fewRowsAgainstWeight(b, a, x, transposeA, transposeB)) {
    // (W·xᵀ)ᵀ: the same numbers as x·Wᵀ, returned as a transposed view (no copy).
    const xT = b.call1('aten::transpose', 'int', [b.handle(a), 0, 1]);
    const wx = b.call1('aten::mm', '', [b.handle(x), xT]);
    const r = b.call1('aten::transpose', 'int', [wx, 0, 1]);
    b.addon.free(xT);
    b.addon.free(wx);
    return { handle: r, shape: [a.shape[0], x.shape[0]] };
  }
  const owned: number[] = [];
  const prep = (info: Info, transpose: boolean): number => {
    // Unless the product runs in bfloat16, a bfloat16-held operand comes as a float32 copy.
    let h = b.handle(info, bf16);
    if (bf16 && !b.isBf16(info)) owned.push((h = b.call1('aten::_to_copy', '', [h, SCALAR_TYPE.bfloat16])));
    if (transpose) owned.push((h = b.call1('aten::transpose', 'int', [h, -2, -1])));
    return h;
  };
  const ah = prep(a, transposeA);
  const xh = prep(x, transposeB);
  let r = b.call1('aten::matmul', '', [ah, xh]);
  if (bf16) {
    const f = b.call1('aten::_to_copy', '', [r, SCALAR_TYPE.float32]);
    b.addon.free(r);
    r = f;
  }
  for (const t of owned) b.addon.free(t);
  const m = transposeA ? a.shape[a.shape.length - 1] : a.shape[a.shape.length - 2];
  const p = transposeB ? x.shape[x.shape.length - 2] : x.shape[x.shape.length - 1];
  const batch = broadcast_util.assertAndGetBroadcastShape(a.shape.slice(0, -2), x.shape.slice(0, -2));
  return { handle: r, shape: [...batch, m, p] };
}
