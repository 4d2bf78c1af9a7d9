import * as tf from '@tensorflow/tfjs';
import { RMS_NORM, RMS_NORM_GRAD, ROTARY, SILU_MUL, SILU_MUL_GRAD } from '../fused.js';
import type { TorchBackend } from './backend.js';
import type { TorchArg } from './native.js';
import type { TorchKernel } from './kernel.js';

// The fused ops of ../fused.ts as a few ATen calls each, inside one tfjs kernel: tfjs's
// per-kernel JavaScript is paid once. Derivations of the gradients are in the comments.

/** Runs ATen calls whose intermediate results are freed when `f` returns (the answer is kept). */
function scoped(b: TorchBackend, f: (t: (name: string, overload: string, args: readonly TorchArg[]) => number) => number): number {
  const made: number[] = [];
  const t = (name: string, overload: string, args: readonly TorchArg[]): number => {
    const h = b.call1(name, overload, args);
    made.push(h);
    return h;
  };
  const answer = f(t);
  for (const h of made) if (h !== answer) b.addon.free(h);
  return answer;
}

/** 1/sqrt(mean(x², last axis, kept) + eps). */
function rstd(t: (name: string, overload: string, args: readonly TorchArg[]) => number, x: number, eps: number): number {
  const ms = t('aten::mean', 'dim', [t('aten::mul', 'Tensor', [x, x]), [-1], true]);
  return t('aten::rsqrt', '', [t('aten::add', 'Scalar', [ms, eps])]);
}

/** Sum over every axis but the last (the gradient of a weight broadcast along the last axis). */
function sumLeading(t: (name: string, overload: string, args: readonly TorchArg[]) => number, v: number, rank: number): number {
  if (rank === 1) return t('aten::clone', '', [v]);
  return t('aten::sum', 'dim_IntList', [v, Array.from({ length: rank - 1 }, (_, i) => i), false]);
}

export const FUSED_KERNELS: TorchKernel[] = [
  {
    name: RMS_NORM,
    inputs: ['x', 'weight'],
    impl: ([x, w], a, b) => {
      const [y, r] = b.callN('aten::_fused_rms_norm', '', [b.handle(x), [x.shape[x.shape.length - 1]], b.handle(w), a.eps as number]);
      b.addon.free(r);
      return b.out(y, x.shape, 'float32');
    },
  },
  {
    // y = w ⊙ x·r with r = (mean(x²) + eps)^(-1/2), x̂ = x·r, g = dy ⊙ w:
    // ∂L/∂x = r·(g − x̂·mean(g ⊙ x̂)) (∂r/∂x_j = −r³·x_j/h); ∂L/∂w = Σ_rows dy ⊙ x̂.
    name: RMS_NORM_GRAD,
    inputs: ['dy', 'x', 'weight'],
    impl: ([dy, x, w], a, b) => {
      const wrtX = a.wrt === 'x';
      const h = scoped(b, (t) => {
        const hx = b.handle(x);
        const hdy = b.handle(dy);
        const r = rstd(t, hx, a.eps as number);
        const xhat = t('aten::mul', 'Tensor', [hx, r]);
        if (!wrtX) return sumLeading(t, t('aten::mul', 'Tensor', [hdy, xhat]), x.shape.length);
        const g = t('aten::mul', 'Tensor', [hdy, b.handle(w)]);
        const m = t('aten::mean', 'dim', [t('aten::mul', 'Tensor', [g, xhat]), [-1], true]);
        // g − x̂·m, then ·r
        return t('aten::mul', 'Tensor', [t('aten::sub', 'Tensor', [g, t('aten::mul', 'Tensor', [xhat, m])]), r]);
      });
      return b.out(h, wrtX ? x.shape : w.shape, 'float32');
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
