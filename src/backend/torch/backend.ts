import * as tf from '@tensorflow/tfjs';
import type { AdamWParamUpdate, AdamWStepScalars, InPlaceAdamWBackend } from '../fused.js';
import type { TorchAddon, TorchArg, TorchResult } from './native.js';

/** What the backend keeps per tfjs data id: the addon's tensor handle. */
interface TorchData {
  handle: number;
  refCount: number;
  /** Held as bfloat16 on the torch side (a frozen base's weight); tfjs sees float32. */
  bf16: boolean;
  /** Elements of a bfloat16-held tensor (2 bytes each, where tfjs counts 4). */
  bf16Elements?: number;
}

/** c10::MemoryFormat::Contiguous (clone's default keeps the source's strides). */
const MEMORY_FORMAT_CONTIGUOUS = 0;

/** torch's scalar type codes (c10::ScalarType) for the dtypes tfjs has. */
export const SCALAR_TYPE = { float32: 6, int32: 3, bool: 11, int64: 4, bfloat16: 15 } as const;

const TFJS_SCALAR_TYPE: Partial<Record<tf.DataType, number>> = { float32: SCALAR_TYPE.float32, int32: SCALAR_TYPE.int32, bool: SCALAR_TYPE.bool };

/** The torch scalar type code for a tfjs dtype; strings and complex numbers have none. */
export function scalarTypeOf(dtype: tf.DataType): number {
  const code = TFJS_SCALAR_TYPE[dtype];
  if (code === undefined) throw new Error(`backend 'torch': tensors of dtype ${dtype} are not supported (float32, int32 and bool are)`);
  return code;
}

/**
 * tfjs's `KernelBackend` over torch: tensors are `at::Tensor` handles owned by the addon, and each
 * kernel (kernels.ts) is one or a few ATen calls. tfjs keeps the op API and autodiff.
 */
export class TorchBackend extends tf.KernelBackend implements InPlaceAdamWBackend {
  private readonly store: tf.DataStorage<TorchData>;
  private readonly ops = new Map<string, number>();
  // Float32 copies of bfloat16-held inputs made for the kernel in flight; freed when it returns.
  private temps: number[] = [];

  constructor(
    readonly addon: TorchAddon,
    /** `cpu` or `cuda:N`: where every tensor of this backend lives. */
    readonly device: string,
    /**
     * Whether products in bfloat16 run at matrix-unit speed here: on CUDA, and on CPUs with
     * AVX512-BF16 or AMX (see `cpuHasBf16Units`).
     */
    readonly bf16Units: boolean = device !== 'cpu',
  ) {
    super();
    this.store = new tf.DataStorage<TorchData>(this, tf.engine());
  }

  /** The operator index of `name.overload`, resolved once. */
  op(name: string, overload = ''): number {
    const key = `${name}.${overload}`;
    let index = this.ops.get(key);
    if (index === undefined) {
      index = this.addon.resolve(name, overload);
      this.ops.set(key, index);
    }
    return index;
  }

  /** Calls ATen's `name.overload` with schema-converted arguments. */
  call(name: string, overload: string, args: readonly TorchArg[]): TorchResult {
    return this.addon.call(this.op(name, overload), args);
  }

  /** {@link call} for an operator with one tensor result: its handle. */
  call1(name: string, overload: string, args: readonly TorchArg[]): number {
    const r = this.call(name, overload, args);
    if (typeof r !== 'number') throw new Error(`backend 'torch': ${name}.${overload} did not return one tensor`);
    return r;
  }

  /** {@link call} for an operator with a list (or several) tensor results: their handles. */
  callN(name: string, overload: string, args: readonly TorchArg[]): number[] {
    const r = this.call(name, overload, args);
    if (!Array.isArray(r) || r.some((h) => typeof h !== 'number')) throw new Error(`backend 'torch': ${name}.${overload} did not return tensors`);
    return r as number[];
  }

  /**
   * The handle of an input. A bfloat16-held tensor is given as a float32 copy (freed after the
   * kernel) unless `bf16` allows the kernel to take it as it is.
   */
  handle(info: tf.TensorInfo, bf16 = false): number {
    const d = this.store.get(info.dataId);
    if (d === undefined) throw new Error("backend 'torch': a kernel input is not a torch tensor (disposed, or made on another backend)");
    if (!d.bf16 || bf16) return d.handle;
    const copy = this.call1('aten::_to_copy', '', [d.handle, SCALAR_TYPE.float32]);
    this.temps.push(copy);
    return copy;
  }

  /** Whether an input is held in bfloat16. */
  isBf16(info: tf.TensorInfo): boolean {
    return this.store.get(info.dataId)?.bf16 === true;
  }

  /** Frees the float32 copies made for the kernel that just ran. */
  releaseTemps(): void {
    for (const h of this.temps) this.addon.free(h);
    this.temps = [];
  }

  /** A tfjs output for a handle that a kernel made. */
  out(handle: number, shape: readonly number[], dtype: tf.DataType): tf.TensorInfo {
    const dataId = {};
    this.store.set(dataId, { handle, refCount: 1, bf16: false });
    return { dataId, shape: [...shape], dtype };
  }

  /** The same data under another id holder: Identity's answer (no copy). */
  alias(info: tf.TensorInfo): tf.TensorInfo {
    this.incRef(info.dataId);
    return { dataId: info.dataId, shape: [...info.shape], dtype: info.dtype };
  }

  /** The shape torch reports for a handle (for kernels whose output shape tfjs does not give). */
  shapeOf(handle: number): number[] {
    return this.addon.meta(handle).slice(2) as number[];
  }

  /**
   * Keeps a float32 tensor's values as bfloat16 on the torch side (half the memory); kernels see
   * float32 copies, and matrix products run in bfloat16 with float32 results.
   */
  holdInBfloat16(dataId: tf.DataId, elements: number): void {
    const d = this.store.get(dataId);
    if (d === undefined || d.bf16) return;
    const h = this.call1('aten::_to_copy', '', [d.handle, SCALAR_TYPE.bfloat16]);
    this.addon.free(d.handle);
    d.handle = h;
    d.bf16 = true;
    d.bf16Elements = elements;
    this.bf16Elements += elements;
  }

  /**
   * AdamW over all parameters in one `_fused_adamw_` call (see InPlaceAdamWBackend in ../fused.ts).
   * A parameter or moment that no other tfjs tensor shares (refCount 1), held in float32 and
   * contiguous, is updated in place; any other is updated on a contiguous copy that its variable
   * then takes, so every parameter gets the same arithmetic whichever way it is held (a resumed run
   * matches bit for bit). Each step count travels as a float32 scalar tensor, as torch keeps it.
   */
  adamwInPlace(updates: readonly AdamWParamUpdate[], s: AdamWStepScalars): boolean {
    if (updates.some((u) => u.grad.dtype !== 'float32' || u.param.dtype !== 'float32')) return false;
    const made: number[] = [];
    const copies: Array<{ variable: tf.Variable; handle: number }> = [];
    const target = (variable: tf.Variable): number => {
      const h = this.handle(variable);
      if (this.refCount(variable.dataId) === 1 && !this.isBf16(variable) && this.call('aten::is_contiguous', '', [h]) === true) return h;
      const copy = this.call1('aten::clone', '', [h, MEMORY_FORMAT_CONTIGUOUS]);
      copies.push({ variable, handle: copy });
      return copy;
    };
    try {
      const params = updates.map((u) => target(u.param));
      const ms = updates.map((u) => target(u.m));
      const vs = updates.map((u) => target(u.v));
      const grads = updates.map((u) => {
        const h = this.call1('aten::contiguous', '', [this.handle(u.grad)]);
        made.push(h);
        return h;
      });
      const stepsAll = this.addon.upload(Float32Array.from(updates, (u) => u.step), [updates.length], this.device);
      made.push(stepsAll);
      const steps = this.callN('aten::unbind', 'int', [stepsAll, 0]);
      made.push(...steps);
      this.call('aten::_fused_adamw_', '', [params, grads, ms, vs, [], steps, s.lr, s.beta1, s.beta2, s.weightDecay, s.eps, false, false]);
    } catch (err) {
      for (const c of copies) this.addon.free(c.handle);
      throw err;
    } finally {
      for (const h of made) this.addon.free(h);
      this.releaseTemps();
    }
    for (const { variable, handle } of copies) {
      const t = tf.engine().makeTensorFromTensorInfo(this.out(handle, variable.shape, 'float32'));
      variable.assign(t);
      t.dispose();
    }
    return true;
  }

  /** Elements held in bfloat16 now: tf.memory() counts them at 4 bytes, torch holds 2. */
  bf16Elements = 0;

  override write(values: tf.backend_util.BackendValues, shape: number[], dtype: tf.DataType): tf.DataId {
    const dataId = {};
    this.move(dataId, values, shape, dtype, 1);
    return dataId;
  }

  override move(dataId: tf.DataId, values: tf.backend_util.BackendValues, shape: number[], dtype: tf.DataType, refCount: number): void {
    scalarTypeOf(dtype);
    const typed = toTyped(values, dtype);
    const handle = this.addon.upload(typed, shape, this.device);
    this.store.set(dataId, { handle, refCount, bf16: false });
  }

  override readSync(dataId: tf.DataId): tf.backend_util.BackendValues {
    const d = this.store.get(dataId);
    if (d === undefined) throw new Error("backend 'torch': read of a tensor that is not on this backend (disposed?)");
    return this.addon.download(d.handle);
  }

  override read(dataId: tf.DataId): Promise<tf.backend_util.BackendValues> {
    return Promise.resolve(this.readSync(dataId));
  }

  override disposeData(dataId: tf.DataId, force = false): boolean {
    const d = this.store.get(dataId);
    if (d === undefined) return true;
    d.refCount--;
    if (!force && d.refCount > 0) return false;
    this.bf16Elements -= d.bf16Elements ?? 0;
    this.addon.free(d.handle);
    this.store.delete(dataId);
    return true;
  }

  override refCount(dataId: tf.DataId): number {
    return this.store.get(dataId)?.refCount ?? 0;
  }

  override incRef(dataId: tf.DataId): void {
    const d = this.store.get(dataId);
    if (d !== undefined) d.refCount++;
  }

  override numDataIds(): number {
    return this.store.numDataIds();
  }

  override memory(): { unreliable: boolean } {
    return { unreliable: false };
  }

  override async time(f: () => void): Promise<tf.BackendTimingInfo> {
    const start = process.hrtime.bigint();
    f();
    this.synchronize();
    return { kernelMs: Number(process.hrtime.bigint() - start) / 1e6 };
  }

  /** Waits for the device's queued work (a no-op on CPU). */
  synchronize(): void {
    if (this.device.startsWith('cuda')) this.addon.runtime('sync', deviceIndex(this.device));
  }

  override floatPrecision(): 16 | 32 {
    return 32;
  }

  override dispose(): void {
    // Handles are freed with their tensors; the addon's table goes with the process.
  }
}

/** The CUDA device index of `cuda` / `cuda:N` (0 for `cuda`). */
export function deviceIndex(device: string): number {
  const m = /^cuda(?::(\d+))?$/.exec(device);
  return m?.[1] !== undefined ? Number(m[1]) : 0;
}

function toTyped(values: tf.backend_util.BackendValues, dtype: tf.DataType): Float32Array | Int32Array | Uint8Array {
  if (dtype === 'float32') return values instanceof Float32Array ? values : Float32Array.from(values as ArrayLike<number>);
  if (dtype === 'int32') return values instanceof Int32Array ? values : Int32Array.from(values as ArrayLike<number>);
  if (values instanceof Uint8Array) return values;
  return Uint8Array.from(values as ArrayLike<number>, (v) => (v ? 1 : 0));
}
