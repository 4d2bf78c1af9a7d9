import * as tf from '@tensorflow/tfjs';

// tfjs-backend-wasm 4.22's Slice kernel copies its whole input out of the wasm heap on every call
// (readSync), so N slices of one tensor cost N full copies; SplitV and Unpack are built on it.
// These replacements copy only the selected elements, from heap views taken after the output is
// allocated (allocation may grow the heap and detach older views). Values are identical.

interface WasmTensorInfo {
  dataId: object;
  shape: number[];
  dtype: tf.DataType;
}

interface WasmBackendLike {
  makeOutput(shape: number[], dtype: tf.DataType): WasmTensorInfo;
  typedArrayFromHeap(info: WasmTensorInfo): Float32Array | Int32Array | Uint8Array;
}

type KernelArgs = {
  inputs: Record<string, WasmTensorInfo>;
  attrs: Record<string, unknown>;
  backend: WasmBackendLike;
};

function strides(shape: readonly number[]): number[] {
  const s = new Array<number>(shape.length).fill(1);
  for (let i = shape.length - 2; i >= 0; i--) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

/** Copies x[begin : begin + size] into a new output, one contiguous run at a time. */
function sliceInto(backend: WasmBackendLike, x: WasmTensorInfo, begin: number[], size: number[]): WasmTensorInfo {
  const out = backend.makeOutput(size, x.dtype);
  const n = size.reduce((a, b) => a * b, 1);
  if (n === 0) return out;
  const xv = backend.typedArrayFromHeap(x);
  const ov = backend.typedArrayFromHeap(out);
  const rank = x.shape.length;
  if (rank === 0) {
    ov[0] = xv[0];
    return out;
  }
  const xs = strides(x.shape);
  // Axes after `p` are taken whole, so each run spans size[p] · stride[p] contiguous elements.
  let p = rank - 1;
  while (p > 0 && begin[p] === 0 && size[p] === x.shape[p]) p--;
  const run = size[p] * xs[p];
  const base = begin[p] * xs[p];
  const idx = new Array<number>(p).fill(0);
  let o = 0;
  for (;;) {
    let off = base;
    for (let i = 0; i < p; i++) off += (begin[i] + idx[i]) * xs[i];
    if (run < 32) for (let k = 0; k < run; k++) ov[o + k] = xv[off + k];
    else ov.set(xv.subarray(off, off + run), o);
    o += run;
    let i = p - 1;
    while (i >= 0 && ++idx[i] === size[i]) idx[i--] = 0;
    if (i < 0) break;
  }
  return out;
}

function parseSlice(x: WasmTensorInfo, begin: unknown, size: unknown): [number[], number[]] {
  const t = { shape: x.shape, rank: x.shape.length } as unknown as tf.Tensor;
  const [b, s] = tf.slice_util.parseSliceParams(t, begin as number[], size as number[]);
  return [b, s];
}

let installed = false;

/** Whether {@link installWasmKernelFixes} has replaced the wasm kernels in this process. */
export function wasmKernelFixesInstalled(): boolean {
  return installed;
}

/** Replaces the wasm Slice, SplitV and Unpack kernels with copy-only-what-is-sliced versions. */
export function installWasmKernelFixes(): void {
  if (installed) return;
  const original = tf.getKernel('Slice', 'wasm');
  if (!original) return; // the wasm backend is not loaded
  installed = true;
  const slice = (args: KernelArgs): WasmTensorInfo => {
    const x = args.inputs.x;
    if (x.dtype === 'string') return original.kernelFunc(args as never) as unknown as WasmTensorInfo;
    const [b, s] = parseSlice(x, args.attrs.begin, args.attrs.size);
    return sliceInto(args.backend, x, b, s);
  };
  const splitV = (args: KernelArgs): WasmTensorInfo[] => {
    const x = args.inputs.x;
    const axis = tf.util.parseAxisParam(args.attrs.axis as number, x.shape)[0];
    const sizes = tf.backend_util.prepareSplitSize(
      { shape: x.shape } as unknown as tf.Tensor,
      args.attrs.numOrSizeSplits as number | number[],
      axis,
    );
    const begin = new Array<number>(x.shape.length).fill(0);
    return sizes.map((s) => {
      const size = x.shape.slice();
      size[axis] = s;
      const out = sliceInto(args.backend, x, begin.slice(), size);
      begin[axis] += s;
      return out;
    });
  };
  const unpack = (args: KernelArgs): WasmTensorInfo[] => {
    const x = args.inputs.value;
    let axis = args.attrs.axis as number;
    if (axis < 0) axis += x.shape.length;
    const outShape = x.shape.filter((_, i) => i !== axis);
    const size = x.shape.slice();
    size[axis] = 1;
    return Array.from({ length: x.shape[axis] }, (_, i) => {
      const begin = new Array<number>(x.shape.length).fill(0);
      begin[axis] = i;
      const out = sliceInto(args.backend, x, begin, size);
      return { dataId: out.dataId, dtype: out.dtype, shape: outShape };
    });
  };
  for (const [kernelName, kernelFunc] of [
    ['Slice', slice],
    ['SplitV', splitV],
    ['Unpack', unpack],
  ] as const) {
    tf.unregisterKernel(kernelName, 'wasm');
    tf.registerKernel({ kernelName, backendName: 'wasm', kernelFunc: kernelFunc as unknown as tf.KernelFunc });
  }
}
