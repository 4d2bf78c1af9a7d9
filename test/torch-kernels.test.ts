import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { initBackend, setBackendLogger, torchBackend, TORCH_KERNEL_NAMES } from '../src/backend/index.js';
import { createRng } from '../src/util/rng.js';
import { ATTENTION, ATTENTION_GRAD, LINEAR, LORA_DELTA, LORA_DELTA_GRAD, fusedLoraDelta, TOKEN_LOG_PROBS, TOKEN_LOG_PROBS_GRAD, RMS_NORM, RMS_NORM_GRAD, ROTARY, SILU_MUL, SILU_MUL_GRAD, rmsNorm, rotary, siluMul } from '../src/backend/fused.js';
import { linear } from '../src/backend/ops.js';
import { selfAttention } from '../src/model/attention.js';
import { chunkLogProbs, logitsGrad } from '../src/model/lm-head.js';
import { AdamW } from '../src/optim/adamw.js';

// Kernel conformance: every kernel the torch backend registers, run through tfjs's ops on random
// inputs (broadcast shapes, empty and scalar tensors, every dtype the kernel takes) and compared
// with tfjs's `cpu` backend, forward and through tf.grad; the torch-side dtype of every output is
// checked too, and no kernel leaves a torch tensor behind. Runs in the torch pass of `npm test`.

type Dtype = 'float32' | 'int32' | 'bool';
interface Input {
  shape: number[];
  dtype?: Dtype;
  /** Uniform range for floats and ints (ints: integers in [lo, hi]). */
  range?: [number, number];
  /** Fixed values instead of random ones. */
  values?: number[];
}
interface Case {
  kernel: string;
  name: string;
  inputs: Input[];
  run: (...xs: tf.Tensor[]) => tf.Tensor | tf.Tensor[];
  /** Compare gradients w.r.t. the float inputs too. */
  grad?: boolean;
  tol?: number;
}

const cases: Case[] = [];
const add = (c: Case): void => {
  cases.push(c);
};

const F = (shape: number[], range?: [number, number]): Input => ({ shape, range });
const I = (shape: number[], range: [number, number] = [-5, 5]): Input => ({ shape, dtype: 'int32', range });
const B = (shape: number[]): Input => ({ shape, dtype: 'bool' });
const SHAPES = [[2, 3], [5], [], [0, 3]];

// ---- element-wise ----
const unaries: Array<[string, (x: tf.Tensor) => tf.Tensor, [number, number]?, boolean?]> = [
  ['Abs', tf.abs],
  ['Neg', tf.neg],
  ['Exp', tf.exp],
  ['Expm1', tf.expm1],
  ['Log', tf.log, [0.1, 3]],
  ['Log1p', tf.log1p, [-0.5, 3]],
  ['Sqrt', tf.sqrt, [0.1, 3]],
  ['Rsqrt', tf.rsqrt, [0.1, 3]],
  ['Square', tf.square],
  ['Reciprocal', tf.reciprocal, [0.5, 3]],
  ['Sigmoid', tf.sigmoid],
  ['Tanh', tf.tanh],
  ['Relu', tf.relu],
  ['Elu', tf.elu], // its gradient runs EluGrad
  ['Selu', tf.selu],
  ['Sign', tf.sign, undefined, false],
  ['Floor', tf.floor, undefined, false],
  ['Ceil', tf.ceil, undefined, false],
  ['Round', tf.round, undefined, false],
  ['Sin', tf.sin],
  ['Cos', tf.cos],
  ['Tan', tf.tan, [-1, 1]],
  ['Asin', tf.asin, [-0.9, 0.9]],
  ['Acos', tf.acos, [-0.9, 0.9]],
  ['Atan', tf.atan],
  ['Sinh', tf.sinh],
  ['Cosh', tf.cosh],
  ['Asinh', tf.asinh],
  ['Acosh', tf.acosh, [1.1, 3]],
  ['Atanh', tf.atanh, [-0.9, 0.9]],
  ['Erf', tf.erf],
  ['Softplus', tf.softplus],
  ['Relu6', tf.relu6, [-3, 9]],
  ['LeakyRelu', (x) => tf.leakyRelu(x, 0.2)],
  ['Step', (x) => tf.step(x, 0.3), undefined, false],
  ['ClipByValue', (x) => tf.clipByValue(x, -0.5, 0.5)],
];
for (const [kernel, f, range, grad] of unaries) {
  for (const shape of SHAPES) add({ kernel, name: `[${shape}]`, inputs: [F(shape, range ?? [-2, 2])], run: f, grad: grad ?? true });
}
for (const [kernel, f] of [['Abs', tf.abs], ['Neg', tf.neg], ['Square', tf.square], ['Sign', tf.sign]] as const) {
  add({ kernel, name: 'int32', inputs: [I([3, 4])], run: f });
}
add({ kernel: 'EluGrad', name: 'through tf.grad', inputs: [F([2, 3])], run: (x) => tf.grad((v: tf.Tensor) => tf.elu(v))(x) });
const special: Input = { shape: [6], values: [0, 1, -1, NaN, Infinity, -Infinity] };
add({ kernel: 'IsNan', name: 'special values', inputs: [special], run: tf.isNaN });
add({ kernel: 'IsInf', name: 'special values', inputs: [special], run: tf.isInf });
add({ kernel: 'IsFinite', name: 'special values', inputs: [special], run: tf.isFinite });
add({ kernel: 'LogicalNot', name: 'bool', inputs: [B([3, 4])], run: tf.logicalNot });
for (const dtype of ['int32', 'bool'] as const) add({ kernel: 'Cast', name: `float32 -> ${dtype}`, inputs: [F([3, 4], [-3, 3])], run: (x) => tf.cast(x, dtype) });
add({ kernel: 'Cast', name: 'int32 -> float32', inputs: [I([3, 4])], run: (x) => tf.cast(x, 'float32') });
add({ kernel: 'Cast', name: 'bool -> float32', inputs: [B([3, 4])], run: (x) => tf.cast(x, 'float32') });
add({ kernel: 'Cast', name: 'float32 -> float32 (grad)', inputs: [F([3])], run: (x) => tf.cast(tf.mul(x, 2), 'float32'), grad: true });
add({ kernel: 'Identity', name: 'clone', inputs: [F([2, 2])], run: tf.clone, grad: true });

const PAIRS: Array<[number[], number[]]> = [
  [[2, 3], [2, 3]],
  [[2, 3], [3]],
  [[4, 1, 3], [2, 1]],
  [[], [2, 3]],
  [[0, 3], [3]],
];
const binaries: Array<[string, (a: tf.Tensor, b: tf.Tensor) => tf.Tensor, [number, number]?, boolean?]> = [
  ['Add', tf.add],
  ['Sub', tf.sub],
  ['Multiply', tf.mul],
  ['RealDiv', tf.div, [0.5, 3]],
  ['FloorDiv', tf.floorDiv, [0.5, 3], false],
  ['Mod', tf.mod, [0.5, 3], false],
  ['Maximum', tf.maximum],
  ['Minimum', tf.minimum],
  ['Pow', tf.pow, [0.5, 2]],
  ['Atan2', tf.atan2],
  ['SquaredDifference', tf.squaredDifference],
  ['Equal', tf.equal, undefined, false],
  ['NotEqual', tf.notEqual, undefined, false],
  ['Less', tf.less, undefined, false],
  ['LessEqual', tf.lessEqual, undefined, false],
  ['Greater', tf.greater, undefined, false],
  ['GreaterEqual', tf.greaterEqual, undefined, false],
];
// tfjs's own gradients of these do not reduce over broadcast axes (the cpu backend fails the same way).
const NO_BROADCAST_GRAD = new Set(['Maximum', 'Minimum', 'SquaredDifference']);
for (const [kernel, f, range, grad] of binaries) {
  for (const [sa, sb] of PAIRS) {
    const same = sa.join() === sb.join();
    add({ kernel, name: `[${sa}] & [${sb}]`, inputs: [F(sa, range ?? [-2, 2]), F(sb, range ?? [-2, 2])], run: f, grad: (grad ?? true) && (same || !NO_BROADCAST_GRAD.has(kernel)) });
  }
}
for (const [kernel, f] of [
  ['Add', tf.add],
  ['Sub', tf.sub],
  ['Multiply', tf.mul],
  ['FloorDiv', tf.floorDiv],
  ['Mod', tf.mod],
  ['Maximum', tf.maximum],
  ['Minimum', tf.minimum],
  ['Equal', tf.equal],
  ['Less', tf.less],
  ['Greater', tf.greater],
] as const) {
  const nonzero: [number, number] = kernel === 'FloorDiv' || kernel === 'Mod' ? [1, 4] : [-5, 5];
  add({ kernel, name: 'int32 [2,3] & [3]', inputs: [I([2, 3], [-9, 9]), I([3], nonzero)], run: f });
}
add({ kernel: 'FloorDiv', name: 'int32 negative divisors', inputs: [{ shape: [4], dtype: 'int32', values: [7, -7, 7, -7] }, { shape: [4], dtype: 'int32', values: [2, 2, -2, -2] }], run: tf.floorDiv });
add({ kernel: 'Mod', name: 'int32 negative divisors', inputs: [{ shape: [4], dtype: 'int32', values: [7, -7, 7, -7] }, { shape: [4], dtype: 'int32', values: [3, 3, -3, -3] }], run: tf.mod });
for (const [kernel, f] of [['LogicalAnd', tf.logicalAnd], ['LogicalOr', tf.logicalOr], ['LogicalXor', tf.logicalXor]] as const) {
  add({ kernel, name: 'bool [2,3] & [3]', inputs: [B([2, 3]), B([3])], run: f });
}
add({ kernel: 'AddN', name: 'three tensors', inputs: [F([2, 3]), F([2, 3]), F([2, 3])], run: (a, b, c) => tf.addN([a, b, c]), grad: true });
add({ kernel: 'Select', name: 'same shapes', inputs: [B([2, 3]), F([2, 3]), F([2, 3])], run: (c, a, b) => tf.where(c, a, b), grad: true });
add({ kernel: 'Select', name: 'broadcast condition', inputs: [B([3]), F([2, 3]), F([2, 3])], run: (c, a, b) => tf.where(c, a, b), grad: true });
add({ kernel: 'Select', name: 'int32', inputs: [B([2, 3]), I([2, 3]), I([2, 3])], run: (c, a, b) => tf.where(c, a, b) });

// ---- reductions ----
const AXES: Array<number | number[] | undefined> = [undefined, 0, 1, -1, [0, 2]];
for (const [kernel, f] of [
  ['Sum', tf.sum],
  ['Mean', tf.mean],
  ['Max', tf.max],
  ['Min', tf.min],
  ['Prod', tf.prod],
] as const) {
  for (const axis of AXES) {
    for (const keepDims of [false, true]) {
      // tfjs's Prod gradient rejects a negative axis (the cpu backend fails the same way).
      add({ kernel, name: `axis ${JSON.stringify(axis)} keepDims ${keepDims}`, inputs: [F([2, 3, 4], [0.5, 1.5])], run: (x) => f(x, axis, keepDims), grad: !(kernel === 'Prod' && axis === -1) });
    }
  }
  add({ kernel, name: 'int32', inputs: [I([3, 4], [-3, 3])], run: (x) => f(x, 1) });
}
add({ kernel: 'Sum', name: 'bool', inputs: [B([3, 4])], run: (x) => tf.sum(x, 0) });
add({ kernel: 'Sum', name: 'scalar', inputs: [F([])], run: (x) => tf.sum(x), grad: true });
for (const [kernel, f] of [['Any', tf.any], ['All', tf.all]] as const) {
  for (const axis of [undefined, 0, 1]) add({ kernel, name: `axis ${axis}`, inputs: [B([3, 4])], run: (x) => f(x, axis) });
}
for (const [kernel, f] of [['ArgMax', tf.argMax], ['ArgMin', tf.argMin]] as const) {
  for (const axis of [0, 1, -1]) add({ kernel, name: `axis ${axis}`, inputs: [F([3, 5])], run: (x) => f(x, axis) });
  add({ kernel, name: 'int32', inputs: [I([3, 5], [-100, 100])], run: (x) => f(x, 1) });
}
for (const exclusive of [false, true]) {
  for (const reverse of [false, true]) {
    // tfjs's Cumsum gradient transposes its answer for a non-last axis (the cpu backend fails the same way).
    for (const axis of [0, 1]) add({ kernel: 'Cumsum', name: `axis ${axis} exclusive ${exclusive} reverse ${reverse}`, inputs: [F([3, 4])], run: (x) => tf.cumsum(x, axis, exclusive, reverse), grad: axis === 1 });
    add({ kernel: 'Cumprod', name: `exclusive ${exclusive} reverse ${reverse}`, inputs: [F([3, 4], [0.5, 1.5])], run: (x) => tf.cumprod(x, 0, exclusive, reverse) });
  }
}
add({ kernel: 'Cumsum', name: 'int32', inputs: [I([5])], run: (x) => tf.cumsum(x) });
add({ kernel: 'Softmax', name: 'last axis', inputs: [F([3, 7], [-5, 5])], run: (x) => tf.softmax(x), grad: true });
add({ kernel: 'Softmax', name: 'rank 3', inputs: [F([2, 2, 5], [-5, 5])], run: (x) => tf.softmax(x), grad: true });
add({ kernel: 'TopK', name: 'k 3 of 8', inputs: [F([4, 8])], run: (x) => { const r = tf.topk(x, 3); return [r.values, r.indices]; } });
add({ kernel: 'TopK', name: 'int32', inputs: [{ shape: [6], dtype: 'int32', values: [4, -1, 9, 3, 7, 0] }], run: (x) => { const r = tf.topk(x, 2); return [r.values, r.indices]; } });

// ---- shapes and indexing ----
add({ kernel: 'Reshape', name: 'with -1', inputs: [F([2, 3, 4])], run: (x) => tf.reshape(x, [4, -1]), grad: true });
add({ kernel: 'Reshape', name: 'int32 to scalar', inputs: [I([1, 1])], run: (x) => tf.reshape(x, []) });
add({ kernel: 'Transpose', name: 'perm [2,0,1]', inputs: [F([2, 3, 4])], run: (x) => tf.transpose(x, [2, 0, 1]), grad: true });
add({ kernel: 'Transpose', name: 'bool', inputs: [B([2, 3])], run: (x) => tf.transpose(x) });
add({ kernel: 'Slice', name: 'middle block', inputs: [F([4, 5, 3])], run: (x) => tf.slice(x, [1, 2, 0], [2, -1, 2]), grad: true });
add({ kernel: 'Slice', name: 'whole (no axis sliced)', inputs: [I([3, 2])], run: (x) => tf.slice(x, [0, 0], [3, 2]) });
add({ kernel: 'Slice', name: 'empty', inputs: [F([3, 2])], run: (x) => tf.slice(x, [1, 0], [0, 2]) });
add({ kernel: 'StridedSlice', name: 'stride 2', inputs: [F([6, 5])], run: (x) => tf.stridedSlice(x, [1, 0], [6, 5], [2, 2]) });
add({ kernel: 'StridedSlice', name: 'negative stride and masks', inputs: [F([6, 5])], run: (x) => tf.stridedSlice(x, [4, 0], [0, 3], [-1, 1], 0, 0, 0, 0, 0) });
add({ kernel: 'StridedSlice', name: 'shrink axis', inputs: [F([4, 5])], run: (x) => tf.stridedSlice(x, [2, 1], [3, 4], [1, 1], 0, 0, 0, 0, 1) });
add({ kernel: 'Concat', name: 'axis 1', inputs: [F([2, 3]), F([2, 1]), F([2, 0])], run: (a, b, c) => tf.concat([a, b, c], 1), grad: true });
add({ kernel: 'Concat', name: 'int32 axis 0', inputs: [I([1, 3]), I([2, 3])], run: (a, b) => tf.concat([a, b], 0) });
add({ kernel: 'Pack', name: 'axis 1', inputs: [F([2, 3]), F([2, 3])], run: (a, b) => tf.stack([a, b], 1), grad: true });
add({ kernel: 'Pack', name: 'scalars', inputs: [I([]), I([])], run: (a, b) => tf.stack([a, b]) });
add({ kernel: 'Unpack', name: 'axis 1', inputs: [F([2, 3, 2])], run: (x) => tf.unstack(x, 1), grad: true });
add({ kernel: 'SplitV', name: 'sizes [1,-1]', inputs: [F([2, 5])], run: (x) => tf.split(x, [1, -1], 1), grad: true });
add({ kernel: 'SplitV', name: 'three equal', inputs: [I([6, 2])], run: (x) => tf.split(x, 3, 0) });
add({ kernel: 'Tile', name: 'reps [2,1,3]', inputs: [F([2, 1, 2])], run: (x) => tf.tile(x, [2, 1, 3]), grad: true });
add({ kernel: 'ExpandDims', name: 'axis -1', inputs: [F([2, 3])], run: (x) => tf.expandDims(x, -1), grad: true });
add({ kernel: 'BroadcastTo', name: 'rank up', inputs: [F([3])], run: (x) => tf.broadcastTo(x, [2, 3]) });
add({ kernel: 'Reverse', name: 'axes [0,2]', inputs: [F([2, 3, 2])], run: (x) => tf.reverse(x, [0, 2]), grad: true });
add({ kernel: 'PadV2', name: 'asymmetric', inputs: [F([2, 3])], run: (x) => tf.pad(x, [[1, 0], [2, 3]], 0.5), grad: true });
add({ kernel: 'PadV2', name: 'int32', inputs: [I([2])], run: (x) => tf.pad(x, [[1, 2]], 7) });
add({ kernel: 'GatherV2', name: 'axis 0 repeated', inputs: [F([5, 3]), { shape: [4], dtype: 'int32', values: [4, 0, 4, 2] }], run: (x, i) => tf.gather(x, i), grad: true });
add({ kernel: 'GatherV2', name: 'axis 1, 2-D indices', inputs: [F([2, 5, 3]), { shape: [2, 2], dtype: 'int32', values: [1, 0, 4, 4] }], run: (x, i) => tf.gather(x, i, 1), grad: true });
add({ kernel: 'GatherV2', name: 'batchDims 1', inputs: [F([2, 4, 3]), { shape: [2, 2], dtype: 'int32', values: [3, 0, 1, 1] }], run: (x, i) => tf.gather(x, i, 1, 1) });
add({ kernel: 'GatherV2', name: 'int32 table', inputs: [I([4]), { shape: [3], dtype: 'int32', values: [3, 3, 0] }], run: (x, i) => tf.gather(x, i) });
add({ kernel: 'GatherNd', name: 'depth 2', inputs: [F([3, 4, 2]), { shape: [3, 2], dtype: 'int32', values: [0, 1, 2, 3, 1, 0] }], run: (x, i) => tf.gatherND(x, i) });
add({ kernel: 'ScatterNd', name: 'duplicates add', inputs: [{ shape: [4, 1], dtype: 'int32', values: [1, 3, 1, 0] }, F([4, 3])], run: (i, u) => tf.scatterND(i, u, [5, 3]) });
add({ kernel: 'ScatterNd', name: 'depth 2', inputs: [{ shape: [2, 2], dtype: 'int32', values: [0, 1, 2, 0] }, F([2])], run: (i, u) => tf.scatterND(i, u, [3, 2]) });
add({ kernel: 'UnsortedSegmentSum', name: 'three segments', inputs: [F([5, 2]), { shape: [5], dtype: 'int32', values: [2, 0, 2, 1, 0] }], run: (x, s) => tf.unsortedSegmentSum(x, s as tf.Tensor1D, 3), grad: true });
add({ kernel: 'OneHot', name: 'depth 4, out of range', inputs: [{ shape: [4], dtype: 'int32', values: [0, 3, 5, -1] }], run: (i) => tf.oneHot(i, 4, 2, -1) });
add({ kernel: 'OneHot', name: 'float32 2-D', inputs: [{ shape: [2, 2], dtype: 'int32', values: [1, 0, 2, 2] }], run: (i) => tf.oneHot(i, 3, 1, 0, 'float32') });

// ---- creation ----
add({ kernel: 'Fill', name: 'float, int, bool', inputs: [], run: () => [tf.fill([2, 3], 1.5), tf.fill([2], 4, 'int32'), tf.fill([3], 1, 'bool'), tf.ones([0, 2])] });
add({ kernel: 'ZerosLike', name: 'float and int', inputs: [F([2, 3]), I([4])], run: (a, b) => [tf.zerosLike(a), tf.zerosLike(b)] });
add({ kernel: 'OnesLike', name: 'float and bool', inputs: [F([2, 3]), B([4])], run: (a, b) => [tf.onesLike(a), tf.onesLike(b)] });
add({ kernel: 'Range', name: 'int, float, negative step, empty', inputs: [], run: () => [tf.range(0, 10, 3, 'int32'), tf.range(0.5, 2.1, 0.4), tf.range(5, -1, -2), tf.range(3, 3)] });
add({ kernel: 'LinSpace', name: '5 points', inputs: [], run: () => tf.linspace(-1, 2, 5) });

// ---- matrix products ----
for (const [sa, sb, ta, tb] of [
  [[3, 4], [4, 5], false, false],
  [[4, 3], [4, 5], true, false],
  [[3, 4], [5, 4], false, true],
  [[2, 3, 4], [2, 4, 5], false, false],
  [[2, 4, 3], [2, 5, 4], true, true],
  [[2, 2, 3, 4], [2, 2, 4, 1], false, false],
  [[1, 4], [4, 1], false, false],
  [[0, 4], [4, 3], false, false],
] as Array<[number[], number[], boolean, boolean]>) {
  add({ kernel: 'BatchMatMul', name: `[${sa}]${ta ? 'ᵀ' : ''} · [${sb}]${tb ? 'ᵀ' : ''}`, inputs: [F(sa), F(sb)], run: (a, b) => tf.matMul(a, b, ta, tb), grad: true });
}
// 2–64 rows against a weight of ≥ 2²⁰ elements take the (W·xᵀ)ᵀ route on CPU; 65 rows do not.
// (Their gradients are ordinary products, covered above.)
for (const [m, n, k] of [[2, 2048, 512], [64, 1024, 1024], [65, 1024, 1024]]) {
  add({ kernel: 'BatchMatMul', name: `[${m},${k}] · [${n},${k}]ᵀ (few rows, large weight)`, inputs: [F([m, k]), F([n, k])], run: (a, b) => tf.matMul(a, b, false, true), tol: 1e-4 });
}
// ---- fused ops (src/backend/fused.ts): the torch kernels against the plain composition, which is
// what the cpu backend runs; their gradient kernels are checked as outputs of tf.grads and
// through the forward cases' gradients.
// Rows of 40 (two blocks of 16 and a remainder) and 300 × 128 (rows and columns split across threads on torch's CPU loops).
for (const [xs, ws] of [[[6, 16], [16]], [[2, 3, 4, 8], [8]], [[3, 40], [40]], [[300, 128], [128]]] as Array<[number[], number[]]>) {
  add({ kernel: RMS_NORM, name: `x [${xs}]`, inputs: [F(xs), F(ws)], run: (x, w) => rmsNorm(x, w as tf.Tensor1D, 1e-6), grad: true, tol: 1e-4 });
  add({ kernel: RMS_NORM_GRAD, name: `x [${xs}]`, inputs: [F(xs), F(ws), F(xs)], run: (x, w, dy) => tf.grads((a: tf.Tensor, b: tf.Tensor) => rmsNorm(a, b as tf.Tensor1D, 1e-6))([x, w], dy), tol: 1e-4 });
}
add({ kernel: SILU_MUL, name: '[5, 12]', inputs: [F([5, 12], [-4, 4]), F([5, 12])], run: (g, u) => siluMul(g, u), grad: true });
add({ kernel: SILU_MUL_GRAD, name: '[5, 12]', inputs: [F([5, 12], [-4, 4]), F([5, 12]), F([5, 12])], run: (g, u, dy) => tf.grads((a: tf.Tensor, b: tf.Tensor) => siluMul(a, b))([g, u], dy) });
for (const [xs, ts] of [[[2, 3, 5, 8], [2, 1, 5, 8]], [[2, 1, 3, 4], [2, 1, 1, 4]]] as Array<[number[], number[]]>) {
  add({ kernel: ROTARY, name: `x [${xs}], tables [${ts}]`, inputs: [F(xs), F(ts), F(ts)], run: (x, c, sn) => rotary(x, c, sn), grad: true });
}
add({ kernel: LINEAR, name: 'x [5, 6] · W [4, 6]ᵀ', inputs: [F([5, 6]), F([4, 6])], run: (x, w) => linear(x as tf.Tensor2D, w as tf.Tensor2D), grad: true });
add({ kernel: LINEAR, name: '3 rows against a large weight (the (W·xᵀ)ᵀ route)', inputs: [F([3, 1024]), F([1024, 1024])], run: (x, w) => linear(x as tf.Tensor2D, w as tf.Tensor2D), tol: 1e-4 });
// A LoRA delta scale·(x·Aᵀ)·Bᵀ: the torch kernel against the composition the cpu backend runs
// (two linears and the scaling), forward and the three gradients.
const loraDelta = (x: tf.Tensor, a: tf.Tensor, b: tf.Tensor) =>
  fusedLoraDelta(x as tf.Tensor2D, a as tf.Tensor2D, b as tf.Tensor2D, 2.5) ?? tf.mul(linear(linear(x as tf.Tensor2D, a as tf.Tensor2D), b as tf.Tensor2D), 2.5);
add({ kernel: LORA_DELTA, name: 'x [6, 10], A [3, 10], B [7, 3], scale 2.5', inputs: [F([6, 10]), F([3, 10]), F([7, 3])], run: loraDelta, grad: true });
add({ kernel: LORA_DELTA_GRAD, name: 'x [6, 10], A [3, 10], B [7, 3], scale 2.5', inputs: [F([6, 10]), F([3, 10]), F([7, 3]), F([6, 7])], run: (x, a, b, dy) => tf.grads(loraDelta)([x, a, b], dy) });
// Self-attention: GQA (4 query heads on 2 KV heads), left padding, and blocks of query rows (the
// block bound is set so that 7 queries split 3 + 3 + 1); tables random, as the op's math allows.
// Each row of `attentionCases`: batch, queries, heads, KV heads, head size, pads, block bytes.
const attentionCases: Array<[number, number, number, number, number, number[] | null, number, number]> = [
  [2, 7, 4, 2, 8, [0, 2], 2 * 4 * 7 * 4 * 16 * 3, 2],
  [1, 5, 2, 2, 4, null, 1 << 20, 1],
  // On CPU these take ATen's flash-attention kernels: left padding as a bias, and no padding (4 query heads on 1 KV head).
  [2, 7, 4, 2, 8, [0, 3], 1 << 20, 2],
  [2, 6, 4, 1, 8, [0, 0], 1 << 20, 1],
];
for (const [b, s, nh, kv, d, pads, blockBytes, tableRows] of attentionCases) {
  const ins = [F([b, s, nh, d]), F([b, s, kv, d]), F([b, s, kv, d]), F([tableRows, 1, s, d]), F([tableRows, 1, s, d])];
  const att = (q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, c: tf.Tensor, sn: tf.Tensor) =>
    selfAttention(q as tf.Tensor4D, k as tf.Tensor4D, v as tf.Tensor4D, c as tf.Tensor4D, sn as tf.Tensor4D, { pads }, blockBytes);
  const name = `b ${b}, ${s} queries, ${nh}/${kv} heads, pads ${pads === null ? 'none' : `[${pads}]`}, tables [${tableRows},1,${s},${d}]`;
  add({ kernel: ATTENTION, name, inputs: ins, run: att, grad: true, tol: 1e-4 });
  add({ kernel: ATTENTION_GRAD, name, inputs: [...ins, F([b * s, nh * d])], run: (q, k, v, c, sn, dy) => tf.grads(att)([q, k, v, c, sn], dy), tol: 1e-4 });
}
// The head's log-probs: targets inside [0, V); their gradient over a block of the vocabulary
// (columns 3..9 of 10), where targets 0, 1 and 2 fall outside and give zero one-hot rows.
add({ kernel: TOKEN_LOG_PROBS, name: 'logits [6, 10]', inputs: [F([6, 10], [-4, 4]), I([6], [0, 9])], run: (l, t) => chunkLogProbs(l as tf.Tensor2D, t as tf.Tensor1D), grad: true });
const blockTargets = [0, 4, 9, 1, 3, 2];
add({
  kernel: TOKEN_LOG_PROBS_GRAD,
  name: 'block of 7 columns from 3, rows 2.. of the targets',
  inputs: [F([4, 7], [-4, 4]), F([4], [1, 2]), F([4])],
  run: (l, lse, dy) => logitsGrad(l as tf.Tensor2D, lse, blockTargets, 2, 3, dy),
});
// The whole vocabulary in one block: the kernel takes softmax(logits) for exp(logits − lse).
add({
  kernel: TOKEN_LOG_PROBS_GRAD,
  name: 'whole rows of 10 columns',
  inputs: [F([4, 10], [-6, 6]), F([4])],
  run: (l, dy) => logitsGrad(l as tf.Tensor2D, tf.logSumExp(l, 1), blockTargets, 2, 0, dy, true),
});
// The optimizer's in-place step on torch (one `_fused_adamw_` over all parameters) against the
// composed update the cpu backend runs: two steps, decay on and off. Not a tfjs kernel, so named here.
for (const weightDecay of [0.01, 0]) {
  add({
    kernel: 'aten::_fused_adamw_ (AdamW.step)',
    name: `two AdamW steps, weight decay ${weightDecay}`,
    inputs: [F([7, 5]), F([7, 5]), F([7, 5])],
    run: (p0, g1, g2) => {
      const p = tf.variable(p0);
      const opt = new AdamW([p], { lr: 0.05, weightDecay });
      opt.step([g1]);
      opt.step([g2]);
      const state = opt.getState();
      const out = [p.clone(), tf.tensor(state.m[0], p0.shape), tf.tensor(state.v[0], p0.shape)];
      opt.dispose();
      p.dispose();
      return out;
    },
  });
}
add({ kernel: '_FusedMatMul', name: 'bias + relu', inputs: [F([3, 4]), F([5, 4]), F([5])], run: (a, b, c) => tf.fused.matMul({ a, b, bias: c, transposeB: true, activation: 'relu' }) });
add({ kernel: '_FusedMatMul', name: 'linear, no bias', inputs: [F([2, 3, 4]), F([2, 4, 2])], run: (a, b) => tf.fused.matMul({ a, b }) });

// ---- running a case ----

interface Outcome {
  outputs: Array<{ shape: number[]; dtype: string; values: number[]; torchType?: number }>;
  grads: number[][];
}

function makeInputs(c: Case, seed: number): tf.Tensor[] {
  const rng = createRng(seed);
  return c.inputs.map((inp) => {
    const size = inp.shape.reduce((a, b) => a * b, 1);
    const dtype = inp.dtype ?? 'float32';
    const [lo, hi] = inp.range ?? (dtype === 'int32' ? [-5, 5] : [-2, 2]);
    const values =
      inp.values ??
      Array.from({ length: size }, () => (dtype === 'bool' ? (rng.next() < 0.5 ? 1 : 0) : dtype === 'int32' ? lo + Math.floor(rng.next() * (hi - lo + 1)) : lo + rng.next() * (hi - lo)));
    return tf.tensor(values, inp.shape, dtype);
  });
}

const TORCH_TYPE: Record<string, number> = { float32: 6, int32: 3, bool: 11 };

function runCase(c: Case, seed: number): Outcome {
  return tf.tidy(() => {
    const xs = makeInputs(c, seed);
    const raw = c.run(...xs);
    const outs = Array.isArray(raw) ? raw : [raw];
    const backend = torchBackend();
    const outputs = outs.map((t) => ({
      shape: t.shape,
      dtype: t.dtype,
      values: Array.from(t.dataSync() as ArrayLike<number>),
      torchType: tf.getBackend() === 'torch' && backend !== null ? backend.addon.meta(backend.handle(t))[0] : undefined,
    }));
    let grads: number[][] = [];
    if (c.grad === true) {
      const floats = xs.map((x, i) => (x.dtype === 'float32' ? i : -1)).filter((i) => i >= 0);
      const wrng = createRng(seed + 1);
      const f = (...fs: tf.Tensor[]): tf.Scalar => {
        const all = xs.map((x, i) => (floats.includes(i) ? fs[floats.indexOf(i)] : x));
        const r = c.run(...all);
        const list = Array.isArray(r) ? r : [r];
        // A random weighting, so that each output element's gradient path counts on its own.
        return tf.addN(list.map((t) => tf.sum(tf.mul(t, tf.tensor(Array.from({ length: t.size }, () => wrng.next() - 0.5), t.shape))))) as tf.Scalar;
      };
      grads = tf.grads(f)(floats.map((i) => xs[i])).map((g) => Array.from(g.dataSync()));
    }
    return { outputs, grads } as unknown as tf.TensorContainer;
  }) as unknown as Outcome;
}

function close(got: number[], want: number[], tol: number): string | null {
  if (got.length !== want.length) return `length ${got.length} vs ${want.length}`;
  for (let i = 0; i < got.length; i++) {
    const [g, w] = [got[i], want[i]];
    if (Number.isNaN(w) ? !Number.isNaN(g) : !(Math.abs(g - w) <= tol * (1 + Math.abs(w)) || g === w)) return `element ${i}: ${g} vs ${w}`;
  }
  return null;
}

describe('torch kernel conformance (vs the cpu backend)', () => {
  beforeAll(async () => {
    setBackendLogger(null);
    await initBackend('torch');
  });

  it('every registered kernel has cases here', () => {
    const covered = new Set(cases.map((c) => c.kernel));
    expect(TORCH_KERNEL_NAMES.filter((k) => !covered.has(k))).toEqual([]);
    expect(new Set(TORCH_KERNEL_NAMES).size).toBe(TORCH_KERNEL_NAMES.length);
  });

  it.each(cases.map((c, i) => [`${c.kernel} ${c.name}`, c, i] as const))('%s', async (_label, c, i) => {
    await initBackend('cpu');
    const want = runCase(c, 100 + i);
    await initBackend('torch');
    const before = tf.memory().numTensors;
    const got = runCase(c, 100 + i);
    expect(tf.memory().numTensors).toBe(before);
    const tol = c.tol ?? 2e-5;
    expect(got.outputs.length).toBe(want.outputs.length);
    got.outputs.forEach((o, k) => {
      const w = want.outputs[k];
      expect(o.shape, `output ${k} shape`).toEqual(w.shape);
      expect(o.dtype, `output ${k} dtype`).toBe(w.dtype);
      expect(o.torchType, `output ${k}: torch holds ${w.dtype} as scalar type ${o.torchType}`).toBe(TORCH_TYPE[w.dtype]);
      expect(close(o.values, w.values, tol), `output ${k} values`).toBeNull();
    });
    expect(got.grads.length).toBe(want.grads.length);
    got.grads.forEach((g, k) => expect(close(g, want.grads[k], tol * 5), `gradient ${k}`).toBeNull());
  });

  it('runs each fused op as one kernel on torch (the decoder reaches them through src/backend/fused.ts)', async () => {
    await initBackend('torch');
    const x = tf.randomNormal<tf.Rank.R4>([2, 3, 4, 8]);
    const w = tf.ones([8]) as tf.Tensor1D;
    const [x2, w2] = [tf.reshape(x, [6, 32]) as tf.Tensor2D, tf.ones([5, 32]) as tf.Tensor2D];
    const table = tf.ones([1, 1, 3, 8]) as tf.Tensor4D;
    const [la, lb] = [tf.ones([3, 32]) as tf.Tensor2D, tf.ones([5, 3]) as tf.Tensor2D];
    for (const [name, f] of [
      [RMS_NORM, () => rmsNorm(x, w, 1e-6)],
      [SILU_MUL, () => siluMul(x, x)],
      [ROTARY, () => rotary(x, x, x)],
      [LINEAR, () => linear(x2, w2)],
      [ATTENTION, () => selfAttention(x, x, x, table, table, { pads: null })],
      [LORA_DELTA, () => fusedLoraDelta(x2, la, lb, 2) as tf.Tensor],
    ] as Array<[string, () => tf.Tensor]>) {
      const info = await tf.profile(f);
      expect(info.kernelNames, name).toEqual([name]);
      tf.dispose(info.result as tf.Tensor);
    }
    tf.dispose([x, w, x2, w2, table, la, lb]);
    // An AdamW step runs no tfjs kernel once the moments exist: the parameters and moments are
    // updated in place by one ATen call, so the variable keeps its data id.
    const p = tf.variable(tf.ones([3, 4]));
    const opt = new AdamW([p], { lr: 0.1 });
    const g = tf.onesLike(p);
    opt.step([g]);
    const dataId = p.dataId;
    const info = await tf.profile(() => opt.step([g]));
    expect(info.kernelNames).toEqual([]);
    expect(p.dataId).toBe(dataId);
    opt.dispose();
    tf.dispose([p, g]);
  });

  it('saves tensors for a gradient as references, with no Identity kernel, under one tape; a gradient of a gradient keeps its second-order path', async () => {
    await initBackend('torch');
    const x = tf.tensor2d([0.5, -1.5, 2, 3, -0.25, 1], [2, 3]);
    const w = tf.tensor1d([1.5, -0.5, 2]);
    const f = (a: tf.Tensor) => tf.sum(tf.mul(rmsNorm(a, w, 1e-6), a));
    const info = await tf.profile(() => tf.grad(f)(x));
    expect(info.kernelNames).not.toContain('Identity');
    tf.dispose(info.result as tf.Tensor);
    // d/dx Σ d/dx Σ x³ = d/dx Σ 3x² = 6x: the inner gradient's saved inputs must stay on the outer tape.
    const second = tf.grad((a: tf.Tensor) => tf.sum(tf.grad((b: tf.Tensor) => tf.sum(tf.mul(tf.mul(b, b), b)))(a)))(x);
    expect(close(Array.from(second.dataSync()), Array.from(x.dataSync(), (v) => 6 * v), 1e-6)).toBeNull();
    tf.dispose([x, w, second]);
  });

  it('keeps RMSNorm\'s rstd = 1/sqrt(mean(x²) + eps) per row for the gradient', async () => {
    await initBackend('torch');
    const rng = createRng(3);
    for (const shape of [[4, 40], [2, 3, 2, 8], [1, 256]]) {
      const h = shape[shape.length - 1];
      const xv = Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.next() * 4 - 2);
      const [x, w] = [tf.tensor(xv, shape), tf.ones([h])];
      const [y, rstd] = tf.engine().runKernel(RMS_NORM, { x, weight: w }, { eps: 1e-6 } as unknown as tf.NamedAttrMap) as tf.Tensor[];
      expect(rstd.shape).toEqual([...shape.slice(0, -1), 1]);
      // By hand, in doubles: each row's mean square.
      const want = Array.from({ length: xv.length / h }, (_, r) => 1 / Math.sqrt(xv.slice(r * h, (r + 1) * h).reduce((a, v) => a + v * v, 0) / h + 1e-6));
      expect(close(Array.from(rstd.dataSync()), want, 1e-6)).toBeNull();
      // With a weight of ones, y = x·rstd.
      expect(close(Array.from(y.dataSync()), xv.map((v, i) => v * want[Math.floor(i / h)]), 1e-6)).toBeNull();
      tf.dispose([x, w, y, rstd]);
    }
  });

  it("keeps each query row's log-sum-exp from the flash kernel for the gradient (CPU), and nothing on the blocked path", async () => {
    // lse[b, h, i] = log Σ_j exp(scale·rot(q)_i·rot(k)_j + bias_ij), with query head h on KV head
    // ⌊h / 2⌋: composed from tfjs ops on the cpu backend, against the torch kernel's second output.
    const [b, s, nh, kv, d] = [2, 6, 4, 2, 8];
    const pads = [0, 2];
    const rng = createRng(7);
    const vals = (n: number) => Array.from({ length: n }, () => rng.next() * 4 - 2);
    const [qv, kvv, vv, cv, sv] = [vals(b * s * nh * d), vals(b * s * kv * d), vals(b * s * kv * d), vals(s * d), vals(s * d)];
    const lseOf = (bias: boolean) =>
      tf.tidy(() => {
        const rot = (x: tf.Tensor, heads: number) => rotary(tf.transpose(tf.tensor4d(x.dataSync(), [b, s, heads, d]), [0, 2, 1, 3]), tf.tensor4d(cv, [1, 1, s, d]), tf.tensor4d(sv, [1, 1, s, d]));
        const q = rot(tf.tensor(qv), nh);
        const k = tf.gather(rot(tf.tensor(kvv), kv), [0, 0, 1, 1], 1);
        let scores = tf.mul(tf.matMul(q, k, false, true), 1 / Math.sqrt(d));
        const mask = Array.from({ length: b * s * s }, (_, n) => {
          const [r, i, j] = [Math.floor(n / (s * s)), Math.floor(n / s) % s, n % s];
          return j <= i && (!bias || j >= pads[r] || j === i) ? 0 : -1e9;
        });
        scores = tf.add(scores, tf.tensor4d(mask, [b, 1, s, s]));
        return Array.from(tf.logSumExp(scores, -1).dataSync());
      });
    const kernel = (p: number[], blockBytes: number) =>
      tf.tidy(() => {
        const ins = { q: tf.tensor4d(qv, [b, s, nh, d]), k: tf.tensor4d(kvv, [b, s, kv, d]), v: tf.tensor4d(vv, [b, s, kv, d]), cos: tf.tensor4d(cv, [1, 1, s, d]), sin: tf.tensor4d(sv, [1, 1, s, d]) };
        const blockRows = blockBytes >= 1 << 20 ? s : 2;
        const [, lse] = tf.engine().runKernel(ATTENTION, ins, { scale: 1 / Math.sqrt(d), pads: p, blockRows } as unknown as tf.NamedAttrMap) as tf.Tensor[];
        return { shape: lse.shape, values: Array.from(lse.dataSync()) };
      });
    await initBackend('cpu');
    const want = [lseOf(false), lseOf(true)];
    await initBackend('torch');
    const got = [kernel([], 1 << 20), kernel(pads, 1 << 20)];
    got.forEach((g, i) => {
      expect(g.shape).toEqual([b, nh, s]);
      expect(close(g.values, want[i], 1e-5)).toBeNull();
    });
    // Padded rows in blocks smaller than the pass (its bias would not fit the bound): the blocked path, which keeps nothing.
    expect(kernel(pads, 0).shape).toEqual([0]);
  });

  it('AdamW on torch leaves a tensor that shares a parameter\'s data alone, and steps that parameter exactly as an unshared one', async () => {
    await initBackend('torch');
    const r = createRng('shared-adamw');
    const init = Array.from({ length: 24 }, () => r.normal());
    const grads = [0, 1, 2].map(() => tf.tensor(Array.from({ length: 24 }, () => r.normal()), [4, 6]));
    const own = tf.variable(tf.tensor(init, [4, 6]));
    const sharedSource = tf.tensor(init, [4, 6]);
    const shared = tf.variable(sharedSource); // shares sharedSource's data: refCount 2
    const backend = torchBackend();
    expect(backend?.refCount(shared.dataId)).toBe(2);
    const optOwn = new AdamW([own], { lr: 0.05, weightDecay: 0.1 });
    const optShared = new AdamW([shared], { lr: 0.05, weightDecay: 0.1 });
    for (const g of grads) {
      optOwn.step([g]);
      optShared.step([g]);
    }
    expect(Array.from(sharedSource.dataSync())).toEqual(Array.from(Float32Array.from(init)));
    expect(Array.from(shared.dataSync())).toEqual(Array.from(own.dataSync()));
    expect(Array.from(shared.dataSync())).not.toEqual(Array.from(sharedSource.dataSync()));
    optOwn.dispose();
    optShared.dispose();
    tf.dispose([own, shared, sharedSource, ...grads]);
  });

  it('leaves no torch tensor behind: live handles equal the tensors tfjs holds', () => {
    const backend = torchBackend();
    expect(backend).not.toBeNull();
    if (backend === null) return;
    expect(Number(backend.addon.runtime('live', 0))).toBe(backend.numDataIds());
  });
});
