import * as tf from '@tensorflow/tfjs';

// Fused ops: one kernel where the decoder would otherwise run several (RMSNorm's six, SwiGLU's
// three, RoPE's five, a linear layer's customGrad, self-attention's twenty-odd, the head's
// log-softmax), with gradient kernels instead of tfjs's composed gradients. A backend opts in by
// registering the kernels below (the torch backend does: a tfjs kernel there costs ~15–35 µs of
// JavaScript, an ATen call inside one ~3 µs); on every other backend these functions run the
// plain composition, numerically the same ops as before.
// The kernels and their gradients are kept apart as in tfjs-core: names and gradients here, the
// torch implementations in torch/fused-kernels.ts.

/**
 * y = x / sqrt(mean(x², last axis) + eps) · weight, and rstd = 1/sqrt(mean(x²) + eps) per row
 * (x's shape with a last axis of 1), kept for the gradient. Inputs x, weight; attrs eps.
 */
export const RMS_NORM = 'ComlrlRmsNorm';
/** ∂/∂x or ∂/∂weight of {@link RMS_NORM} given dy and the forward's rstd. Inputs dy, x, weight, rstd; attrs eps, wrt. */
export const RMS_NORM_GRAD = 'ComlrlRmsNormGrad';
/** y = silu(gate) · up (SwiGLU's product). Inputs gate, up. */
export const SILU_MUL = 'ComlrlSiluMul';
/** ∂/∂gate or ∂/∂up of {@link SILU_MUL} given dy. Inputs dy, gate, up; attrs wrt. */
export const SILU_MUL_GRAD = 'ComlrlSiluMulGrad';
/**
 * RoPE in the rotate-half convention with a signed sine table: y = x·cos + swap(x)·sin, where
 * swap exchanges the two halves of the last axis. With `adjoint` it computes the gradient map
 * dy·cos + swap(dy·sin) instead (the transpose of the forward map, which is linear in x).
 * Inputs x, cos, sin; attrs adjoint.
 */
export const ROTARY = 'ComlrlRotary';

/** y = x·Wᵀ for x [N, in] and a weight W [out, in] (Hugging Face layout). Inputs x, weight. */
export const LINEAR = 'ComlrlLinear';
/**
 * Causal self-attention of one pass without a cache, from the projections to the merged heads:
 * q [B, S, heads, d], k and v [B, S, kvHeads, d] (query head h reads KV head ⌊h·kvHeads/heads⌋),
 * RoPE tables cos and sin [B or 1, 1, S, d] as for {@link ROTARY}; q and k are rotated, q is
 * scaled by `scale`, and softmax(q·kᵀ + bias)·v is taken in blocks of `blockRows` query rows
 * (the bias masks later keys and each row's first `pads[row]` keys; `pads` empty: no padding).
 * Outputs: the merged heads [B·S, heads·d], and what the backend keeps for the gradient (torch on
 * CPU: each query row's log-sum-exp [B, heads, S]; else an empty tensor). Inputs q, k, v, cos,
 * sin; attrs scale, pads, blockRows.
 */
export const ATTENTION = 'ComlrlAttention';
/**
 * Gradients of {@link ATTENTION} given dy [B·S, heads·d]: with `wrt` 'qkv' three outputs (∂q, ∂k,
 * ∂v), with 'cos' or 'sin' that table's. Inputs dy, q, k, v, cos, sin and ATTENTION's two outputs
 * (y, lse); attrs as ATTENTION's and wrt.
 */
export const ATTENTION_GRAD = 'ComlrlAttentionGrad';

/**
 * A LoRA module's delta scale·(x·Aᵀ)·Bᵀ for x [N, in], A [r, in], B [out, r]: one kernel where the
 * plain composition runs three (two products and the scaling). Inputs x, a, b; attrs scale.
 */
export const LORA_DELTA = 'ComlrlLoraDelta';
/**
 * Gradients of {@link LORA_DELTA} given dy [N, out], all three in one kernel: with u = dy·B [N, r],
 * ∂x = scale·u·A, ∂A = scale·uᵀ·x, ∂B = scale·dyᵀ·(x·Aᵀ). Inputs dy, x, a, b; attrs scale.
 */
export const LORA_DELTA_GRAD = 'ComlrlLoraDeltaGrad';

/**
 * Per row of logits [n, V] and targets [n] (int32): log softmax(logits)[target] and log Σ exp(logits).
 * Outputs lp [n], lse [n]. Inputs logits, targets.
 */
export const TOKEN_LOG_PROBS = 'ComlrlTokenLogProbs';
/**
 * (onehot(target) − exp(logits − lse))·dy per row, [n, V]: the gradient of Σ dy·lp with respect to
 * the logits (a target outside [0, V) has no one, as in a block of the vocabulary it is not in).
 * Inputs logits [n, V], lse [n], targets [n] int32, dy [n]; attrs wholeRows (optional: the block is
 * the whole vocabulary and lse these logits' own log Σ exp, so exp(logits − lse) is their softmax).
 */
export const TOKEN_LOG_PROBS_GRAD = 'ComlrlTokenLogProbsGrad';

/** The fused kernels a backend registers to take these ops over (all of them, or none is used). */
export const FUSED_KERNEL_NAMES: readonly string[] = [RMS_NORM, RMS_NORM_GRAD, SILU_MUL, SILU_MUL_GRAD, ROTARY, LINEAR, ATTENTION, ATTENTION_GRAD, TOKEN_LOG_PROBS, TOKEN_LOG_PROBS_GRAD, LORA_DELTA, LORA_DELTA_GRAD];

/** One parameter's part of an in-place AdamW step (see {@link fusedAdamWInPlace}). */
export interface AdamWParamUpdate {
  readonly param: tf.Variable;
  readonly grad: tf.Tensor;
  readonly m: tf.Variable;
  readonly v: tf.Variable;
  /** This parameter's update count, this update included (1 on its first). */
  readonly step: number;
}

/** The hyperparameters of an in-place AdamW step; bias corrections come from each update's step. */
export interface AdamWStepScalars {
  readonly beta1: number;
  readonly beta2: number;
  readonly eps: number;
  readonly lr: number;
  readonly weightDecay: number;
}

/**
 * A backend that takes a whole AdamW step in one multi-tensor kernel (torch: `_fused_adamw_`, one
 * pass over memory for all parameters, as `torch.optim.AdamW(fused=True)`), in place where it can;
 * a parameter or moment it cannot update in place (shared with another tensor, not contiguous,
 * held in bfloat16) is stepped on a copy that its variable then takes. It returns false, having
 * changed nothing, when it cannot take the step at all (a gradient or parameter not float32).
 */
export interface InPlaceAdamWBackend {
  adamwInPlace(updates: readonly AdamWParamUpdate[], scalars: AdamWStepScalars): boolean;
}

function hasInPlaceAdamW(b: tf.KernelBackend): b is tf.KernelBackend & InPlaceAdamWBackend {
  return typeof (b as Partial<InPlaceAdamWBackend>).adamwInPlace === 'function';
}

/**
 * One AdamW step over all `updates` in place where the active backend can (see
 * {@link InPlaceAdamWBackend}); false elsewhere, and the optimizer runs its per-parameter update.
 */
export function fusedAdamWInPlace(updates: readonly AdamWParamUpdate[], scalars: AdamWStepScalars): boolean {
  const backend = tf.backend();
  return updates.length > 0 && hasInPlaceAdamW(backend) && backend.adamwInPlace(updates, scalars);
}

/** Whether the active backend registers the fused kernel `name` (one of {@link FUSED_KERNEL_NAMES}). */
export function fusedOnActiveBackend(name: string): boolean {
  return tf.getKernel(name, tf.getBackend()) !== undefined;
}

/** Attribute values the fused kernels take. */
export type FusedAttrs = Record<string, string | number | boolean | readonly number[]>;

/** Runs the fused kernel `name` on the active backend (check {@link fusedOnActiveBackend} first). */
export function runFused<T extends tf.Tensor | tf.Tensor[] = tf.Tensor>(name: string, inputs: tf.NamedTensorMap, attrs: FusedAttrs = {}): T {
  return tf.engine().runKernel(name, inputs, attrs as unknown as tf.NamedAttrMap) as T;
}

const run = runFused;

/** Sums a broadcast product back to the shape of the operand that was broadcast. */
function sumToShape(t: tf.Tensor, shape: readonly number[]): tf.Tensor {
  const lead = t.rank - shape.length;
  const axes: number[] = [];
  for (let i = 0; i < t.rank; i++) if (i < lead || (shape[i - lead] === 1 && t.shape[i] !== 1)) axes.push(i);
  return tf.reshape(axes.length ? tf.sum(t, axes) : t, [...shape]);
}

function swapHalves<T extends tf.Tensor>(x: T): T {
  const half = x.shape[x.rank - 1] / 2;
  const [a, b] = tf.split(x, [half, half], x.rank - 1);
  return tf.concat([b, a], x.rank - 1) as T;
}

/** RMSNorm over the last axis: x / sqrt(mean(x²) + eps) · weight. */
export function rmsNorm<T extends tf.Tensor>(x: T, weight: tf.Tensor1D, eps: number): T {
  if (fusedOnActiveBackend(RMS_NORM)) {
    const [y, rstd] = run<tf.Tensor[]>(RMS_NORM, { x, weight }, { eps });
    // rstd is for the gradient, which keeps its own reference under a tape.
    rstd.dispose();
    return y as T;
  }
  const ms = tf.mean(tf.square(x), -1, true);
  return tf.mul(tf.mul(x, tf.rsqrt(tf.add(ms, eps))), weight);
}

/** silu(gate) · up, the SwiGLU MLP's gated product. */
export function siluMul<T extends tf.Tensor>(gate: T, up: T): T {
  if (fusedOnActiveBackend(SILU_MUL)) return run<T>(SILU_MUL, { gate, up });
  return tf.mul(tf.mul(gate, tf.sigmoid(gate)), up);
}

/**
 * x·Wᵀ for a weight [out, in] as one kernel where the active backend has it (gradients: ∂x = dy·W,
 * ∂W = dyᵀ·x, each one product); null elsewhere, where the caller takes its own route.
 */
export function fusedLinear(x: tf.Tensor2D, weight: tf.Tensor2D): tf.Tensor2D | null {
  return fusedOnActiveBackend(LINEAR) ? run<tf.Tensor2D>(LINEAR, { x, weight }) : null;
}

/**
 * A LoRA module's delta scale·(x·Aᵀ)·Bᵀ (A [r, in], B [out, r]) as one kernel where the active
 * backend has it; null elsewhere, where the caller composes it.
 */
export function fusedLoraDelta(x: tf.Tensor2D, a: tf.Tensor2D, b: tf.Tensor2D, scale: number): tf.Tensor2D | null {
  return fusedOnActiveBackend(LORA_DELTA) ? run<tf.Tensor2D>(LORA_DELTA, { x, a, b }, { scale }) : null;
}

/** RoPE: x·cos + swap(x)·sinSigned (tables from `RotaryTables`, broadcast against x). */
export function rotary<T extends tf.Tensor>(x: T, cos: tf.Tensor, sinSigned: tf.Tensor): T {
  if (fusedOnActiveBackend(ROTARY)) return run<T>(ROTARY, { x, cos, sin: sinSigned }, { adjoint: false });
  return tf.add(tf.mul(x, cos), tf.mul(swapHalves(x), sinSigned));
}

let gradientsRegistered = false;

/**
 * Registers the fused kernels' gradients (once per process): each input's gradient is one fused
 * gradient kernel, so a pass that needs only ∂x (a LoRA base's frozen norm) runs only that one.
 */
export function registerFusedGradients(): void {
  if (gradientsRegistered) return;
  gradientsRegistered = true;
  tf.registerGradient({
    kernelName: RMS_NORM,
    inputsToSave: ['x', 'weight'],
    outputsToSave: [false, true],
    gradFunc: (dys, [x, weight, rstd], attrs) => {
      // rstd (the second output) is never on a loss's path.
      const dy = (dys as tf.Tensor[])[0];
      const eps = (attrs as { eps: number }).eps;
      const grad = (wrt: 'x' | 'weight') => () => run(RMS_NORM_GRAD, { dy, x, weight, rstd }, { eps, wrt });
      return { x: grad('x'), weight: grad('weight') };
    },
  });
  tf.registerGradient({
    kernelName: SILU_MUL,
    inputsToSave: ['gate', 'up'],
    gradFunc: (dy, saved) => {
      const [gate, up] = saved;
      const grad = (wrt: 'gate' | 'up') => () => run(SILU_MUL_GRAD, { dy: dy as tf.Tensor, gate, up }, { wrt });
      return { gate: grad('gate'), up: grad('up') };
    },
  });
  tf.registerGradient({
    kernelName: ROTARY,
    inputsToSave: ['x', 'cos', 'sin'],
    gradFunc: (dy, saved) => {
      const [x, cos, sin] = saved;
      const g = dy as tf.Tensor;
      return {
        x: () => run(ROTARY, { x: g, cos, sin }, { adjoint: true }),
        // The tables are constants in the decoder; their gradients are here for completeness.
        cos: () => sumToShape(tf.mul(g, x), cos.shape),
        sin: () => sumToShape(tf.mul(g, swapHalves(x)), sin.shape),
      };
    },
  });
  tf.registerGradient({
    kernelName: LINEAR,
    inputsToSave: ['x', 'weight'],
    gradFunc: (dy, [x, weight]) => ({
      x: () => tf.matMul(dy as tf.Tensor, weight),
      // A frozen weight is not on the path to the variables, so tfjs never asks for this one.
      weight: () => tf.matMul(dy as tf.Tensor, x, true, false),
    }),
  });
  tf.registerGradient({
    kernelName: LORA_DELTA,
    inputsToSave: ['x', 'a', 'b'],
    gradFunc: (dy, [x, a, b], attrs) => {
      // One kernel gives all three (they share dy·B); tfjs frees the ones it does not ask for.
      const [dx, da, db] = run<tf.Tensor[]>(LORA_DELTA_GRAD, { dy: dy as tf.Tensor, x, a, b }, attrs as unknown as FusedAttrs);
      return { x: () => dx, a: () => da, b: () => db };
    },
  });
  tf.registerGradient({
    kernelName: TOKEN_LOG_PROBS,
    inputsToSave: ['logits', 'targets'],
    outputsToSave: [false, true],
    gradFunc: (dys, [logits, targets, lse]) => {
      // tfjs hands zeros for an output that is not on the path, so both are tensors.
      const [dlp, dlse] = dys as tf.Tensor[];
      return {
        // ∂lp/∂logits is the fused gradient kernel's; ∂lse/∂logits = softmax(logits).
        logits: () => tf.add(run<tf.Tensor>(TOKEN_LOG_PROBS_GRAD, { logits, lse, targets, dy: dlp }, { wholeRows: true }), tf.mul(tf.exp(tf.sub(logits, tf.expandDims(lse, 1))), tf.expandDims(dlse, 1))),
        targets: () => tf.zerosLike(targets),
      };
    },
  });
  tf.registerGradient({
    kernelName: ATTENTION,
    inputsToSave: ['q', 'k', 'v', 'cos', 'sin'],
    outputsToSave: [true, true],
    gradFunc: (dys, [q, k, v, cos, sin, y, lse], attrs) => {
      // The second output (lse) is the backend's own record, never on a loss's path.
      const dy = (dys as tf.Tensor[])[0];
      const inputs = { dy, q, k, v, cos, sin, y, lse };
      const a = attrs as unknown as FusedAttrs;
      // One kernel gives all three: each needs the block's recomputed probabilities.
      const [dq, dk, dv] = run<tf.Tensor[]>(ATTENTION_GRAD, inputs, { ...a, wrt: 'qkv' });
      return {
        q: () => dq,
        k: () => dk,
        v: () => dv,
        // The tables are constants in the decoder; their gradients are here for completeness.
        cos: () => run<tf.Tensor>(ATTENTION_GRAD, inputs, { ...a, wrt: 'cos' }),
        sin: () => run<tf.Tensor>(ATTENTION_GRAD, inputs, { ...a, wrt: 'sin' }),
      };
    },
  });
}
