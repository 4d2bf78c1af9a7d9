import * as tf from '@tensorflow/tfjs';
import { rotary } from '../backend/fused.js';
import type { RopeScaling } from './config.js';

/**
 * RoPE inverse frequencies θ^(-2i/d) for i < d/2, in float64, with optional linear or Llama 3
 * frequency scaling (long wavelengths divided by `factor`, a smooth blend in between).
 */
export function ropeInverseFrequencies(headDim: number, theta: number, scaling: RopeScaling | null): Float64Array {
  const half = headDim / 2;
  const inv = new Float64Array(half);
  for (let i = 0; i < half; i++) inv[i] = 1 / theta ** ((2 * i) / headDim);
  if (!scaling) return inv;
  if (scaling.type === 'linear') return inv.map((f) => f / scaling.factor);
  const { factor, lowFreqFactor: lo, highFreqFactor: hi, originalMaxPositionEmbeddings: old } = scaling;
  const lowWavelen = old / lo;
  const highWavelen = old / hi;
  return inv.map((f) => {
    const wavelen = (2 * Math.PI) / f;
    if (wavelen < highWavelen) return f;
    if (wavelen > lowWavelen) return f / factor;
    const smooth = (old / wavelen - lo) / (hi - lo);
    return (1 - smooth) * (f / factor) + smooth * f;
  });
}

/**
 * Rotary tables for given positions, laid out for `x·cos + swapHalves(x)·sinSigned`:
 * cos = [cos(p·f), cos(p·f)], sinSigned = [-sin(p·f), sin(p·f)] (the rotate-half convention).
 */
export class RotaryTables {
  constructor(
    private readonly inv: Float64Array,
    readonly headDim: number,
  ) {}

  /** cos / sinSigned as tensors of shape [rows, 1, S, headDim] for positions[rows][S]. */
  tables(positions: readonly (readonly number[])[]): { cos: tf.Tensor4D; sin: tf.Tensor4D } {
    const rows = positions.length;
    const s = positions[0]?.length ?? 0;
    const d = this.headDim;
    const half = d / 2;
    const cos = new Float32Array(rows * s * d);
    const sin = new Float32Array(rows * s * d);
    for (let r = 0; r < rows; r++) {
      for (let t = 0; t < s; t++) {
        const p = positions[r][t];
        const base = (r * s + t) * d;
        for (let i = 0; i < half; i++) {
          const a = p * this.inv[i];
          const c = Math.cos(a);
          const sn = Math.sin(a);
          cos[base + i] = c;
          cos[base + half + i] = c;
          sin[base + i] = -sn;
          sin[base + half + i] = sn;
        }
      }
    }
    return { cos: tf.tensor4d(cos, [rows, 1, s, d]), sin: tf.tensor4d(sin, [rows, 1, s, d]) };
  }
}

/** Applies RoPE to x [B, heads, S, d] with tables from {@link RotaryTables.tables}. */
export function applyRotary(x: tf.Tensor4D, cos: tf.Tensor4D, sinSigned: tf.Tensor4D): tf.Tensor4D {
  return rotary(x, cos, sinSigned);
}
