import * as tf from '@tensorflow/tfjs';
import { SCALAR_TYPE, scalarTypeOf, type TorchBackend } from './backend.js';
import { FUSED_KERNELS } from './fused-kernels.js';
import { batchMatMul } from './products.js';
import type { KernelAttrs, TorchKernel } from './kernel.js';

export { BF16_ROWS_WITHOUT_UNITS } from './products.js';

// tfjs kernels as ATen calls. Each kernel keeps tfjs's semantics (attrs, broadcasting, output
// dtypes: torch's integer results are int64 and are cast back to int32); the ATen operator
// behind it is named by its schema name and overload. Gradients are tfjs's own, composed of these
// forward kernels.

type Info = tf.TensorInfo;
type Attrs = KernelAttrs;

const { broadcast_util, util, slice_util, backend_util } = tf;

function n(v: unknown): number {
  return v as number;
}

function i64(v: number): bigint {
  return BigInt(v);
}

/** A torch result cast to the given tfjs dtype (torch's int64 answers become int32). */
function cast(b: TorchBackend, handle: number, dtype: tf.DataType): number {
  const h = b.call1('aten::_to_copy', '', [handle, scalarTypeOf(dtype)]);
  b.addon.free(handle);
  return h;
}

// ---- element-wise ------------------------------------------------------------------------------

function unary(name: string, op: string, overload = '', outDtype?: tf.DataType): TorchKernel {
  return { name, inputs: ['x'], impl: ([x], _a, b) => b.out(b.call1(op, overload, [b.handle(x)]), x.shape, outDtype ?? x.dtype) };
}

function binary(name: string, op: string, overload: string, outDtype?: tf.DataType): TorchKernel {
  return {
    name,
    inputs: ['a', 'b'],
    impl: ([a, x], _a, b) => b.out(b.call1(op, overload, [b.handle(a), b.handle(x)]), broadcast_util.assertAndGetBroadcastShape(a.shape, x.shape), outDtype ?? a.dtype),
  };
}

const elementwise: TorchKernel[] = [
  unary('Abs', 'aten::abs'),
  unary('Neg', 'aten::neg'),
  unary('Exp', 'aten::exp'),
  unary('Expm1', 'aten::expm1'),
  unary('Log', 'aten::log'),
  unary('Log1p', 'aten::log1p'),
  unary('Sqrt', 'aten::sqrt'),
  unary('Rsqrt', 'aten::rsqrt'),
  unary('Square', 'aten::square'),
  unary('Reciprocal', 'aten::reciprocal'),
  unary('Sigmoid', 'aten::sigmoid'),
  unary('Tanh', 'aten::tanh'),
  unary('Relu', 'aten::relu'),
  unary('Elu', 'aten::elu'),
  unary('Selu', 'aten::selu'),
  unary('Sign', 'aten::sign'),
  unary('Floor', 'aten::floor'),
  unary('Ceil', 'aten::ceil'),
  unary('Round', 'aten::round'),
  unary('Sin', 'aten::sin'),
  unary('Cos', 'aten::cos'),
  unary('Tan', 'aten::tan'),
  unary('Asin', 'aten::asin'),
  unary('Acos', 'aten::acos'),
  unary('Atan', 'aten::atan'),
  unary('Sinh', 'aten::sinh'),
  unary('Cosh', 'aten::cosh'),
  unary('Asinh', 'aten::asinh'),
  unary('Acosh', 'aten::acosh'),
  unary('Atanh', 'aten::atanh'),
  unary('Erf', 'aten::erf'),
  unary('IsNan', 'aten::isnan', '', 'bool'),
  unary('IsInf', 'aten::isinf', '', 'bool'),
  unary('IsFinite', 'aten::isfinite', '', 'bool'),
  unary('LogicalNot', 'aten::logical_not', '', 'bool'),
  {
    name: 'EluGrad',
    inputs: ['dy', 'y'],
    // dy · (y < 0 ? y + 1 : 1), from the output y as tfjs's gradient passes it.
    impl: ([dy, y], _a, b) => b.out(b.call1('aten::elu_backward', '', [b.handle(dy), 1, 1, 1, true, b.handle(y)]), dy.shape, dy.dtype),
  },
  {
    name: 'Softplus',
    inputs: ['x'],
    // tfjs's softplus has no threshold: log(1 + e^x) everywhere, which torch's threshold 20 matches to float32.
    impl: ([x], _a, b) => b.out(b.call1('aten::softplus', '', [b.handle(x), 1, 20]), x.shape, x.dtype),
  },
  {
    name: 'Relu6',
    inputs: ['x'],
    impl: ([x], _a, b) => b.out(b.call1('aten::hardtanh', '', [b.handle(x), 0, 6]), x.shape, x.dtype),
  },
  {
    name: 'LeakyRelu',
    inputs: ['x'],
    impl: ([x], a, b) => b.out(b.call1('aten::leaky_relu', '', [b.handle(x), n(a.alpha)]), x.shape, x.dtype),
  },
  {
    name: 'Step',
    inputs: ['x'],
    // x > 0 ? 1 : alpha, NaN kept.
    impl: ([x], a, b) => {
      const h = b.handle(x);
      const pos = b.call1('aten::gt', 'Scalar', [h, 0]);
      const alpha = n(a.alpha);
      const ones = b.call1('aten::full_like', '', [h, 1]);
      const one = b.call1('aten::where', 'ScalarOther', [pos, ones, alpha]);
      const nan = b.call1('aten::isnan', '', [h]);
      const r = b.call1('aten::where', 'self', [nan, h, one]);
      for (const t of [pos, ones, one, nan]) b.addon.free(t);
      return b.out(r, x.shape, x.dtype);
    },
  },
  {
    name: 'ClipByValue',
    inputs: ['x'],
    impl: ([x], a, b) => b.out(b.call1('aten::clamp', '', [b.handle(x), n(a.clipValueMin), n(a.clipValueMax)]), x.shape, x.dtype),
  },
  {
    name: 'Cast',
    inputs: ['x'],
    impl: ([x], a, b) => {
      const dtype = a.dtype as tf.DataType;
      // Gradients cast float32 to float32 often: the same data then, as tfjs's cpu backend does.
      if (dtype === x.dtype) return b.alias(x);
      return b.out(b.call1('aten::_to_copy', '', [b.handle(x), scalarTypeOf(dtype)]), x.shape, dtype);
    },
  },
  { name: 'Identity', inputs: ['x'], impl: ([x], _a, b) => b.alias(x) },

  binary('Add', 'aten::add', 'Tensor'),
  binary('Sub', 'aten::sub', 'Tensor'),
  binary('Multiply', 'aten::mul', 'Tensor'),
  binary('Maximum', 'aten::maximum', ''),
  binary('Minimum', 'aten::minimum', ''),
  binary('Pow', 'aten::pow', 'Tensor_Tensor'),
  binary('Atan2', 'aten::atan2', ''),
  binary('Mod', 'aten::remainder', 'Tensor'),
  binary('Equal', 'aten::eq', 'Tensor', 'bool'),
  binary('NotEqual', 'aten::ne', 'Tensor', 'bool'),
  binary('Less', 'aten::lt', 'Tensor', 'bool'),
  binary('LessEqual', 'aten::le', 'Tensor', 'bool'),
  binary('Greater', 'aten::gt', 'Tensor', 'bool'),
  binary('GreaterEqual', 'aten::ge', 'Tensor', 'bool'),
  binary('LogicalAnd', 'aten::logical_and', '', 'bool'),
  binary('LogicalOr', 'aten::logical_or', '', 'bool'),
  binary('LogicalXor', 'aten::logical_xor', '', 'bool'),
  {
    name: 'RealDiv',
    inputs: ['a', 'b'],
    // Integer division truncates toward zero into an int32, as tfjs's kernels store it.
    impl: ([a, x], _a, b) => {
      const args = [b.handle(a), b.handle(x)];
      const h = a.dtype === 'int32' ? b.call1('aten::div', 'Tensor_mode', [...args, 'trunc']) : b.call1('aten::div', 'Tensor', args);
      return b.out(h, broadcast_util.assertAndGetBroadcastShape(a.shape, x.shape), a.dtype);
    },
  },
  {
    name: 'FloorDiv',
    inputs: ['a', 'b'],
    // tfjs answers int32 whatever the inputs.
    impl: ([a, x], _a, b) => {
      const q = b.call1('aten::div', 'Tensor_mode', [b.handle(a), b.handle(x), 'floor']);
      return b.out(a.dtype === 'int32' ? q : cast(b, q, 'int32'), broadcast_util.assertAndGetBroadcastShape(a.shape, x.shape), 'int32');
    },
  },
  {
    name: 'SquaredDifference',
    inputs: ['a', 'b'],
    impl: ([a, x], _a, b) => {
      const d = b.call1('aten::sub', 'Tensor', [b.handle(a), b.handle(x)]);
      const r = b.call1('aten::square', '', [d]);
      b.addon.free(d);
      return b.out(r, broadcast_util.assertAndGetBroadcastShape(a.shape, x.shape), a.dtype);
    },
  },
  {
    name: 'AddN',
    inputs: ['*'],
    impl: (xs, _a, b) => {
      let acc = b.call1('aten::clone', '', [b.handle(xs[0])]);
      for (const x of xs.slice(1)) {
        const next = b.call1('aten::add', 'Tensor', [acc, b.handle(x)]);
        b.addon.free(acc);
        acc = next;
      }
      return b.out(acc, xs[0].shape, xs[0].dtype);
    },
  },
  {
    name: 'Select',
    inputs: ['condition', 't', 'e'],
    impl: ([c, t, e], _a, b) => {
      let cond = b.handle(c);
      let own = false;
      // tfjs: a rank-1 condition picks whole rows of higher-rank operands.
      if (c.shape.length === 1 && t.shape.length > 1) {
        cond = b.call1('aten::reshape', '', [cond, [c.shape[0], ...t.shape.slice(1).map(() => 1)]]);
        own = true;
      }
      const r = b.call1('aten::where', 'self', [cond, b.handle(t), b.handle(e)]);
      if (own) b.addon.free(cond);
      return b.out(r, broadcast_util.assertAndGetBroadcastShape(t.shape, e.shape), t.dtype);
    },
  },
];

// ---- reductions --------------------------------------------------------------------------------

function reduceShape(shape: readonly number[], axes: readonly number[], keepDims: boolean): number[] {
  return keepDims ? shape.map((d, i) => (axes.includes(i) ? 1 : d)) : shape.filter((_, i) => !axes.includes(i));
}

/** A reduction over `axis`; no axes means no reduction (torch would reduce all of them). */
function reduction(name: string, run: (b: TorchBackend, x: Info, axes: number[], keepDims: boolean) => number, outDtype?: (x: Info) => tf.DataType): TorchKernel {
  return {
    name,
    inputs: ['x'],
    impl: ([x], a, b) => {
      // Max alone names its axes `reductionIndices`.
      const axes = util.parseAxisParam((name === 'Max' ? a.reductionIndices : a.axis) as number | number[], x.shape);
      const keepDims = a.keepDims === true;
      const dtype = outDtype ? outDtype(x) : x.dtype;
      if (axes.length === 0 || x.shape.length === 0) return b.out(b.call1('aten::_to_copy', '', [b.handle(x), scalarTypeOf(dtype)]), x.shape, dtype);
      return b.out(run(b, x, axes, keepDims), reduceShape(x.shape, axes, keepDims), dtype);
    },
  };
}

const reductions: TorchKernel[] = [
  reduction('Sum', (b, x, axes, keep) => b.call1('aten::sum', 'dim_IntList', [b.handle(x), axes, keep, scalarTypeOf(x.dtype === 'bool' ? 'int32' : x.dtype)]), (x) => (x.dtype === 'bool' ? 'int32' : x.dtype)),
  reduction('Mean', (b, x, axes, keep) => b.call1('aten::mean', 'dim', [b.handle(x), axes, keep, SCALAR_TYPE.float32]), () => 'float32'),
  reduction('Max', (b, x, axes, keep) => b.call1('aten::amax', '', [b.handle(x), axes, keep])),
  reduction('Min', (b, x, axes, keep) => b.call1('aten::amin', '', [b.handle(x), axes, keep])),
  reduction('Any', (b, x, axes, keep) => b.call1('aten::any', 'dims', [b.handle(x), axes, keep]), () => 'bool'),
  reduction('All', (b, x, axes, keep) => b.call1('aten::all', 'dims', [b.handle(x), axes, keep]), () => 'bool'),
  reduction('Prod', (b, x, axes, keep) => {
    // torch's prod takes one axis at a time; highest axis first keeps the lower indices valid.
    let h = b.handle(x);
    let owned = false;
    for (const axis of [...axes].sort((p, q) => q - p)) {
      const next = b.call1('aten::prod', 'dim_int', [h, axis, keep, scalarTypeOf(x.dtype === 'bool' ? 'int32' : x.dtype)]);
      if (owned) b.addon.free(h);
      h = next;
      owned = true;
    }
    return h;
  }, (x) => (x.dtype === 'bool' ? 'int32' : x.dtype)),
  ...(['ArgMax', 'ArgMin'] as const).map(
    (name): TorchKernel => ({
      name,
      inputs: ['x'],
      impl: ([x], a, b) => {
        const [axis] = util.parseAxisParam(a.axis as number, x.shape);
        const r = b.call1(name === 'ArgMax' ? 'aten::argmax' : 'aten::argmin', '', [b.handle(x), axis, false]);
        return b.out(cast(b, r, 'int32'), reduceShape(x.shape, [axis], false), 'int32');
      },
    }),
  ),
  ...(['Cumsum', 'Cumprod'] as const).map((name): TorchKernel => ({
    name,
    inputs: ['x'],
    impl: ([x], a, b) => {
      const axis = n(a.axis);
      const dim = axis < 0 ? axis + x.shape.length : axis;
      const len = x.shape[dim];
      let h = b.handle(x);
      const owned: number[] = [];
      const keep = (t: number): number => (owned.push(t), t);
      if (a.reverse === true) h = keep(b.call1('aten::flip', '', [h, [dim]]));
      h = keep(b.call1(name === 'Cumsum' ? 'aten::cumsum' : 'aten::cumprod', '', [h, dim, scalarTypeOf(x.dtype)]));
      if (a.exclusive === true && len > 0) {
        // Shift by one along the axis: the identity first (0 or 1), the last term dropped.
        const head = keep(b.call1('aten::narrow', '', [h, dim, 0, len - 1]));
        const pad = new Array<number>(2 * (x.shape.length - dim)).fill(0);
        pad[pad.length - 2] = 1;
        h = keep(b.call1('aten::constant_pad_nd', '', [head, pad, name === 'Cumsum' ? 0 : 1]));
      }
      if (a.reverse === true) h = keep(b.call1('aten::flip', '', [h, [dim]]));
      const result = owned.pop() ?? b.call1('aten::clone', '', [h]);
      for (const t of owned) b.addon.free(t);
      return b.out(result, x.shape, x.dtype);
    },
  })),
  {
    name: 'Softmax',
    inputs: ['logits'],
    impl: ([x], a, b) => b.out(b.call1('aten::softmax', 'int', [b.handle(x), n(a.dim)]), x.shape, x.dtype),
  },
  {
    name: 'TopK',
    inputs: ['x'],
    impl: ([x], a, b) => {
      const k = n(a.k);
      const [values, indices] = b.callN('aten::topk', '', [b.handle(x), k, -1, true, a.sorted !== false]);
      const shape = [...x.shape.slice(0, -1), k];
      return [b.out(values, shape, x.dtype), b.out(cast(b, indices, 'int32'), shape, 'int32')];
    },
  },
];

// ---- shapes and indexing -----------------------------------------------------------------------

function sliceAxes(b: TorchBackend, h: number, begin: readonly number[], size: readonly number[], shape: readonly number[]): number {
  let cur = h;
  let owned = false;
  for (let i = 0; i < shape.length; i++) {
    if (begin[i] === 0 && size[i] === shape[i]) continue;
    const next = b.call1('aten::slice', 'Tensor', [cur, i, begin[i], begin[i] + size[i], 1]);
    if (owned) b.addon.free(cur);
    cur = next;
    owned = true;
  }
  return owned ? cur : b.call1('aten::alias', '', [cur]);
}

const shapes: TorchKernel[] = [
  {
    name: 'Reshape',
    inputs: ['x'],
    impl: ([x], a, b) => {
      const shape = util.inferFromImplicitShape(a.shape as number[], util.sizeFromShape(x.shape));
      return b.out(b.call1('aten::reshape', '', [b.handle(x), shape]), shape, x.dtype);
    },
  },
  {
    name: 'ExpandDims',
    inputs: ['input'],
    impl: ([x], a, b) => {
      const rank = x.shape.length;
      const dim = n(a.dim) < 0 ? n(a.dim) + rank + 1 : n(a.dim);
      const shape = [...x.shape];
      shape.splice(dim, 0, 1);
      return b.out(b.call1('aten::reshape', '', [b.handle(x), shape]), shape, x.dtype);
    },
  },
  {
    name: 'Transpose',
    inputs: ['x'],
    impl: ([x], a, b) => {
      const perm = a.perm as number[];
      return b.out(b.call1('aten::permute', '', [b.handle(x), perm]), perm.map((p) => x.shape[p]), x.dtype);
    },
  },
  {
    name: 'Slice',
    inputs: ['x'],
    impl: ([x], a, b) => {
      const [begin, size] = slice_util.parseSliceParams(x as tf.Tensor, a.begin as number[], a.size as number[]);
      slice_util.assertParamsValid(x as tf.Tensor, begin, size);
      return b.out(sliceAxes(b, b.handle(x), begin, size, x.shape), size, x.dtype);
    },
  },
  {
    name: 'StridedSlice',
    inputs: ['x'],
    impl: ([x], a, b) => {
      const info = slice_util.sliceInfo(
        x.shape,
        a.begin as number[],
        a.end as number[],
        a.strides as number[],
        n(a.beginMask),
        n(a.endMask),
        n(a.ellipsisMask),
        n(a.newAxisMask),
        n(a.shrinkAxisMask),
      );
      let h = b.call1('aten::alias', '', [b.handle(x)]);
      for (let i = 0; i < x.shape.length; i++) {
        const stride = info.strides[i];
        let next: number;
        if (stride > 0) {
          if (info.begin[i] === 0 && info.end[i] >= x.shape[i] && stride === 1) continue;
          next = b.call1('aten::slice', 'Tensor', [h, i, info.begin[i], Math.max(info.begin[i], info.end[i]), stride]);
        } else {
          // Negative strides: pick the indices begin, begin+stride, ... (> end) explicitly.
          const picks: number[] = [];
          for (let j = info.begin[i]; j > info.end[i]; j += stride) picks.push(j);
          const idx = b.addon.upload(Int32Array.from(picks), [picks.length], b.device);
          next = b.call1('aten::index_select', '', [h, i, idx]);
          b.addon.free(idx);
        }
        b.addon.free(h);
        h = next;
      }
      const r = b.call1('aten::reshape', '', [h, info.finalShape]);
      b.addon.free(h);
      return b.out(r, info.finalShape, x.dtype);
    },
  },
  {
    name: 'Concat',
    inputs: ['*'],
    impl: (xs, a, b) => {
      const [axis] = util.parseAxisParam(a.axis as number, xs[0].shape);
      const shape = backend_util.computeOutShape(xs.map((x) => x.shape), axis);
      return b.out(b.call1('aten::cat', '', [xs.map((x) => b.handle(x)), axis]), shape, xs[0].dtype);
    },
  },
  {
    name: 'Pack',
    inputs: ['*'],
    impl: (xs, a, b) => {
      const rank = xs[0].shape.length;
      const axis = n(a.axis) < 0 ? n(a.axis) + rank + 1 : n(a.axis);
      const shape = [...xs[0].shape];
      shape.splice(axis, 0, xs.length);
      return b.out(b.call1('aten::stack', '', [xs.map((x) => b.handle(x)), axis]), shape, xs[0].dtype);
    },
  },
  {
    name: 'Unpack',
    inputs: ['value'],
    impl: ([x], a, b) => {
      const axis = n(a.axis) < 0 ? n(a.axis) + x.shape.length : n(a.axis);
      const shape = x.shape.filter((_, i) => i !== axis);
      return b.callN('aten::unbind', 'int', [b.handle(x), axis]).map((h) => b.out(h, shape, x.dtype));
    },
  },
  {
    name: 'SplitV',
    inputs: ['x'],
    impl: ([x], a, b) => {
      const [axis] = util.parseAxisParam(a.axis as number, x.shape);
      const sizes = backend_util.prepareSplitSize(x as tf.Tensor, a.numOrSizeSplits as number[] | number, axis);
      return b.callN('aten::split_with_sizes', '', [b.handle(x), sizes, axis]).map((h, i) => {
        const shape = [...x.shape];
        shape[axis] = sizes[i];
        return b.out(h, shape, x.dtype);
      });
    },
  },
  {
    name: 'Tile',
    inputs: ['x'],
    impl: ([x], a, b) => {
      const reps = a.reps as number[];
      return b.out(b.call1('aten::repeat', '', [b.handle(x), reps]), x.shape.map((d, i) => d * reps[i]), x.dtype);
    },
  },
  {
    name: 'BroadcastTo',
    inputs: ['x'],
    impl: ([x], a, b) => {
      const shape = a.shape as number[];
      let h = b.handle(x);
      let own = false;
      if (x.shape.length < shape.length) {
        h = b.call1('aten::reshape', '', [h, [...new Array<number>(shape.length - x.shape.length).fill(1), ...x.shape]]);
        own = true;
      }
      const view = b.call1('aten::expand', '', [h, shape]);
      const r = b.call1('aten::contiguous', '', [view]);
      b.addon.free(view);
      if (own) b.addon.free(h);
      return b.out(r, shape, x.dtype);
    },
  },
  {
    name: 'Reverse',
    inputs: ['x'],
    impl: ([x], a, b) => b.out(b.call1('aten::flip', '', [b.handle(x), util.parseAxisParam(a.dims as number[], x.shape)]), x.shape, x.dtype),
  },
  {
    name: 'PadV2',
    inputs: ['x'],
    impl: ([x], a, b) => {
      const paddings = a.paddings as Array<[number, number]>;
      // torch lists the last axis first.
      const pad = [...paddings].reverse().flatMap(([lo, hi]) => [lo, hi]);
      const shape = x.shape.map((d, i) => d + paddings[i][0] + paddings[i][1]);
      return b.out(b.call1('aten::constant_pad_nd', '', [b.handle(x), pad, n(a.constantValue)]), shape, x.dtype);
    },
  },
  {
    name: 'GatherV2',
    inputs: ['x', 'indices'],
    impl: ([x, idx], a, b) => {
      const [axis] = util.parseAxisParam(a.axis as number, x.shape);
      const batchDims = n(a.batchDims ?? 0);
      const info = backend_util.segment_util.collectGatherOpShapeInfo(x as tf.Tensor, idx as tf.Tensor, axis, batchDims);
      // A bfloat16-held table (a tied frozen embedding) is gathered as it is; the rows become float32.
      const bf16 = b.isBf16(x);
      const xh = b.handle(x, true);
      const ih = b.handle(idx);
      const flat = b.call1('aten::reshape', '', [ih, [-1]]);
      let r: number;
      if (batchDims === 0) {
        r = b.call1('aten::index_select', '', [xh, axis, flat]);
      } else {
        // [batch, outer, dim, slice] gathered along `dim` by [batch, 1, N, 1] indices.
        const { batchSize, outerSize, dimSize, sliceSize } = info;
        const n2 = util.sizeFromShape(idx.shape) / batchSize;
        const x4 = b.call1('aten::reshape', '', [xh, [batchSize, outerSize, dimSize, sliceSize]]);
        const i4 = b.call1('aten::reshape', '', [flat, [batchSize, 1, n2, 1]]);
        const i64t = b.call1('aten::_to_copy', '', [i4, SCALAR_TYPE.int64]);
        const ie = b.call1('aten::expand', '', [i64t, [batchSize, outerSize, n2, sliceSize]]);
        r = b.call1('aten::gather', '', [x4, 2, ie]);
        for (const t of [x4, i4, i64t, ie]) b.addon.free(t);
      }
      b.addon.free(flat);
      if (bf16) r = cast(b, r, 'float32');
      const shaped = b.call1('aten::reshape', '', [r, info.outputShape]);
      b.addon.free(r);
      return b.out(shaped, info.outputShape, x.dtype);
    },
  },
  {
    name: 'GatherNd',
    inputs: ['params', 'indices'],
    impl: ([x, idx], _a, b) => {
      const [, , sliceSize, strides] = backend_util.prepareAndValidate(x as tf.Tensor, idx as tf.Tensor);
      const depth = idx.shape[idx.shape.length - 1];
      const linear = linearIndex(b, b.handle(idx), depth, strides);
      const table = b.call1('aten::reshape', '', [b.handle(x), [util.sizeFromShape(x.shape) / sliceSize, sliceSize]]);
      const rows = b.call1('aten::index_select', '', [table, 0, linear]);
      const outShape = [...idx.shape.slice(0, -1), ...x.shape.slice(depth)];
      const r = b.call1('aten::reshape', '', [rows, outShape]);
      for (const t of [linear, table, rows]) b.addon.free(t);
      return b.out(r, outShape, x.dtype);
    },
  },
  {
    name: 'ScatterNd',
    inputs: ['indices', 'updates'],
    impl: ([idx, upd], a, b) => {
      const shape = a.shape as number[];
      const depth = idx.shape[idx.shape.length - 1];
      const { sliceSize, strides } = backend_util.calculateShapes(upd as tf.Tensor, idx as tf.Tensor, shape);
      const linear = linearIndex(b, b.handle(idx), depth, strides);
      const rows = util.sizeFromShape(shape) / sliceSize;
      const zeros = b.call1('aten::zeros', '', [[rows, sliceSize], scalarTypeOf(upd.dtype), null, b.device]);
      const src = b.call1('aten::reshape', '', [b.handle(upd), [-1, sliceSize]]);
      // In place into the fresh zeros (the out-of-place index_add copies them first).
      const sum = b.call1('aten::index_add_', '', [zeros, 0, linear, src]);
      const r = b.call1('aten::reshape', '', [sum, shape]);
      for (const t of [linear, zeros, src, sum]) b.addon.free(t);
      return b.out(r, shape, upd.dtype);
    },
  },
  {
    name: 'UnsortedSegmentSum',
    inputs: ['x', 'segmentIds'],
    impl: ([x, ids], a, b) => {
      const numSegments = n(a.numSegments);
      const inner = x.shape.slice(ids.shape.length);
      const outShape = [numSegments, ...inner];
      const flatIds = b.call1('aten::reshape', '', [b.handle(ids), [-1]]);
      const src = b.call1('aten::reshape', '', [b.handle(x), [-1, ...inner]]);
      const zeros = b.call1('aten::zeros', '', [outShape, scalarTypeOf(x.dtype), null, b.device]);
      const r = b.call1('aten::index_add_', '', [zeros, 0, flatIds, src]);
      for (const t of [flatIds, src, zeros]) b.addon.free(t);
      return b.out(r, outShape, x.dtype);
    },
  },
  {
    name: 'OneHot',
    inputs: ['indices'],
    impl: ([idx], a, b) => {
      const depth = n(a.depth);
      const dtype = (a.dtype as tf.DataType | undefined) ?? 'int32';
      const range = b.call1('aten::arange', '', [depth, SCALAR_TYPE.int32, null, b.device]);
      const col = b.call1('aten::unsqueeze', '', [b.handle(idx), -1]);
      const hit = b.call1('aten::eq', 'Tensor', [col, range]);
      const on = b.call1('aten::full', '', [[1], n(a.onValue), scalarTypeOf(dtype), null, b.device]);
      const r = b.call1('aten::where', 'ScalarOther', [hit, on, dtype === 'int32' ? i64(n(a.offValue)) : n(a.offValue)]);
      for (const t of [range, col, hit, on]) b.addon.free(t);
      return b.out(r, [...idx.shape, depth], dtype);
    },
  },
];

/** Σ_j indices[..., j] · strides[j] as a flat int64 index (GatherNd, ScatterNd). */
function linearIndex(b: TorchBackend, indices: number, depth: number, strides: readonly number[]): number {
  const s = b.addon.upload(Int32Array.from(strides.slice(0, depth)), [depth], b.device);
  const prod = b.call1('aten::mul', 'Tensor', [indices, s]);
  const flat = b.call1('aten::sum', 'dim_IntList', [prod, [-1], false, SCALAR_TYPE.int64]);
  const r = b.call1('aten::reshape', '', [flat, [-1]]);
  for (const t of [s, prod, flat]) b.addon.free(t);
  return r;
}

// ---- creation ----------------------------------------------------------------------------------

const creation: TorchKernel[] = [
  {
    name: 'Fill',
    inputs: [],
    impl: (_x, a, b) => {
      const shape = a.shape as number[];
      const dtype = a.dtype as tf.DataType;
      const value = dtype === 'bool' ? Boolean(a.value) : n(a.value);
      return b.out(b.call1('aten::full', '', [shape, value, scalarTypeOf(dtype), null, b.device]), shape, dtype);
    },
  },
  {
    name: 'ZerosLike',
    inputs: ['x'],
    impl: ([x], _a, b) => b.out(b.call1('aten::zeros_like', '', [b.handle(x, true), scalarTypeOf(x.dtype)]), x.shape, x.dtype),
  },
  {
    name: 'OnesLike',
    inputs: ['x'],
    impl: ([x], _a, b) => b.out(b.call1('aten::ones_like', '', [b.handle(x, true), scalarTypeOf(x.dtype)]), x.shape, x.dtype),
  },
  {
    name: 'Range',
    inputs: [],
    impl: (_x, a, b) => {
      const dtype = (a.dtype as tf.DataType | undefined) ?? 'float32';
      const [start, stop, step] = [n(a.start), n(a.stop), n(a.step)];
      const count = Math.max(Math.ceil((stop - start) / step), 0);
      if (count === 0) return b.out(b.call1('aten::zeros', '', [[0], scalarTypeOf(dtype), null, b.device]), [0], dtype);
      // start + i·step computed as tfjs does (in float32 for float ranges), not torch's double steps.
      const i = b.call1('aten::arange', '', [count, scalarTypeOf(dtype), null, b.device]);
      const scaled = b.call1('aten::mul', 'Scalar', [i, dtype === 'int32' ? i64(step) : step]);
      const r = b.call1('aten::add', 'Scalar', [scaled, dtype === 'int32' ? i64(start) : start]);
      b.addon.free(i);
      b.addon.free(scaled);
      return b.out(r, [count], dtype);
    },
  },
  {
    name: 'LinSpace',
    inputs: [],
    impl: (_x, a, b) => {
      const num = n(a.num);
      return b.out(b.call1('aten::linspace', '', [n(a.start), n(a.stop), num, SCALAR_TYPE.float32, null, b.device]), [num], 'float32');
    },
  },
];

// ---- matrix products (the product itself: products.ts) ---------------------------------------

const matrix: TorchKernel[] = [
  {
    name: 'BatchMatMul',
    inputs: ['a', 'b'],
    impl: ([a, x], attrs, b) => {
      const { handle, shape } = batchMatMul(b, a, x, attrs.transposeA === true, attrs.transposeB === true);
      return b.out(handle, shape, a.dtype);
    },
  },
  {
    name: '_FusedMatMul',
    inputs: ['a', 'b', 'bias'],
    impl: ([a, x, bias], attrs, b) => {
      const { handle, shape } = batchMatMul(b, a, x, attrs.transposeA === true, attrs.transposeB === true);
      let h = handle;
      if (bias !== undefined) {
        const next = b.call1('aten::add', 'Tensor', [h, b.handle(bias)]);
        b.addon.free(h);
        h = next;
      }
      const activation = (attrs.activation as string | undefined) ?? 'linear';
      const act: Record<string, [string, unknown[]]> = {
        linear: ['', []],
        relu: ['aten::relu', []],
        relu6: ['aten::hardtanh', [0, 6]],
        sigmoid: ['aten::sigmoid', []],
        elu: ['aten::elu', []],
        leakyrelu: ['aten::leaky_relu', [n(attrs.leakyreluAlpha ?? 0.2)]],
      };
      const spec = act[activation];
      if (spec === undefined) throw new Error(`backend 'torch': fused matMul activation '${activation}' is not supported`);
      if (spec[0] !== '') {
        const next = b.call1(spec[0], '', [h, ...(spec[1] as number[])]);
        b.addon.free(h);
        h = next;
      }
      return b.out(h, shape, a.dtype);
    },
  },
];

/** Every kernel the torch backend registers. */
export const TORCH_KERNELS: readonly TorchKernel[] = [...elementwise, ...reductions, ...shapes, ...creation, ...matrix, ...FUSED_KERNELS];

/** The tfjs kernel names the torch backend implements. */
export const TORCH_KERNEL_NAMES: readonly string[] = TORCH_KERNELS.map((k) => k.name);

/** Registers every kernel under `backendName`. */
export function registerTorchKernels(backendName: string): void {
  for (const k of TORCH_KERNELS) {
    tf.registerKernel({
      kernelName: k.name,
      backendName,
      kernelFunc: ({ inputs, attrs, backend }) => {
        const b = backend as TorchBackend;
        const named = inputs as unknown as Record<string, Info | undefined>;
        const list = k.inputs[0] === '*' ? (Object.values(inputs) as Info[]) : k.inputs.map((name) => named[name]).filter((x): x is Info => x !== undefined);
        try {
          return k.impl(list, (attrs ?? {}) as Attrs, b);
        } finally {
          b.releaseTemps();
        }
      },
    });
  }
}
