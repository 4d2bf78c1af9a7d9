import * as tf from '@tensorflow/tfjs';
import { initBackend } from '../src/backend/index.js';
import { linear } from '../src/backend/ops.js';
import { matMulAgainstFrozen } from '../src/model/lora/frozen-linear.js';

/** Qwen3-1.7B's MLP gate/up weight, [out, in] as Hugging Face stores it. */
const WEIGHT: readonly [number, number] = [6144, 2048];
/** A decoding step of 4 sequences, and a scoring/training chunk. */
const ROWS = [4, 300] as const;

function msPerCall(f: () => tf.Tensor, flops: number): number {
  for (let i = 0; i < 2; i++) f().dispose();
  const runs = Math.max(4, Math.min(100, Math.floor(4e10 / flops)));
  const t0 = performance.now();
  for (let i = 0; i < runs; i++) {
    const y = f();
    y.dataSync();
    y.dispose();
  }
  return (performance.now() - t0) / runs;
}

/**
 * x · Wᵀ for one Hugging Face [out, in] weight, the product every projection makes, four ways:
 * comlrl's frozen path (`matMulAgainstFrozen`), its trainable `linear`, tfjs's transpose flag, and
 * a weight transposed once beforehand (the floor: no copy of W per call). Milliseconds per call.
 */
export async function benchMatmul(): Promise<Record<string, number>> {
  await initBackend();
  const [out, inF] = WEIGHT;
  const w = tf.randomNormal([out, inF]) as tf.Tensor2D;
  const wT = tf.transpose(w) as tf.Tensor2D;
  const figures: Record<string, number> = {};
  for (const n of ROWS) {
    const x = tf.randomNormal([n, inF]) as tf.Tensor2D;
    const flops = 2 * n * out * inF;
    figures[`frozen_${n}rows_ms`] = msPerCall(() => matMulAgainstFrozen(x, w), flops);
    figures[`linear_${n}rows_ms`] = msPerCall(() => linear(x, w), flops);
    figures[`flag_${n}rows_ms`] = msPerCall(() => tf.matMul(x, w, false, true), flops);
    figures[`pretransposed_${n}rows_ms`] = msPerCall(() => tf.matMul(x, wT), flops);
    x.dispose();
  }
  tf.dispose([w, wT]);
  figures.op_dispatch_us = opDispatchMicros();
  return figures;
}

/** Microseconds per tiny op ([4, 256] + [4, 256]): what a backend pays per op regardless of size. */
function opDispatchMicros(): number {
  const a = tf.randomNormal([4, 256]);
  const b = tf.randomNormal([4, 256]);
  for (let i = 0; i < 2000; i++) tf.add(a, b).dispose();
  const runs = 20000;
  const t0 = performance.now();
  for (let i = 0; i < runs; i++) tf.add(a, b).dispose();
  const us = ((performance.now() - t0) / runs) * 1000;
  tf.dispose([a, b]);
  return us;
}
