import * as fs from 'node:fs';
import * as os from 'node:os';

/** Element types comlrl reads from / writes to safetensors files. */
export type SafetensorsDtype = 'F32' | 'F16' | 'BF16';

/** One tensor's entry in a safetensors header. */
export interface SafetensorsEntry {
  dtype: string;
  shape: number[];
  /** Byte range relative to the start of the data section. */
  dataOffsets: [number, number];
}

/** A parsed safetensors header. */
export interface SafetensorsHeader {
  path: string;
  /** Absolute file offset where the data section starts (8 + header length). */
  dataStart: number;
  entries: Map<string, SafetensorsEntry>;
  metadata: Record<string, string>;
}

/** A float32 tensor in row-major order. */
export interface F32Tensor {
  shape: number[];
  data: Float32Array;
}

const BYTES: Record<string, number> = { F32: 4, F16: 2, BF16: 2, F64: 8, I64: 8, I32: 4, I16: 2, I8: 1, U8: 1, BOOL: 1 };

/** Elements of a tensor of `shape` (1 for a scalar). */
export function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** Throws unless the host is little-endian (the file format and our typed-array views both assume it). */
export function assertLittleEndian(endianness: 'LE' | 'BE' = os.endianness()): void {
  if (endianness !== 'LE') {
    throw new Error('safetensors: this host is big-endian; comlrl reads and writes little-endian tensors only');
  }
}

function readExactly(fd: number, buf: Uint8Array, position: number, path: string, what: string): void {
  let done = 0;
  while (done < buf.length) {
    const n = fs.readSync(fd, buf, done, buf.length - done, position + done);
    if (n === 0) throw new Error(`${path}: truncated file (${what} needs bytes ${position}..${position + buf.length}, file ends at ${position + done})`);
    done += n;
  }
}

/** Reads and validates the header of a safetensors file. */
export function readSafetensorsHeader(path: string, fd?: number): SafetensorsHeader {
  assertLittleEndian();
  const own = fd === undefined;
  if (own && !fs.existsSync(path)) throw new Error(`${path}: safetensors file not found`);
  const handle = fd ?? fs.openSync(path, 'r');
  try {
    const size = fs.fstatSync(handle).size;
    if (size < 8) throw new Error(`${path}: truncated file (${size} bytes, no header length)`);
    const lenBuf = new Uint8Array(8);
    readExactly(handle, lenBuf, 0, path, 'header length');
    const headerLen = Number(new DataView(lenBuf.buffer).getBigUint64(0, true));
    if (headerLen > size - 8 || headerLen > 100_000_000) {
      throw new Error(`${path}: bad header length ${headerLen} (file is ${size} bytes; truncated or not safetensors)`);
    }
    const hbuf = new Uint8Array(headerLen);
    readExactly(handle, hbuf, 8, path, 'header');
    let raw: unknown;
    try {
      raw = JSON.parse(new TextDecoder().decode(hbuf));
    } catch (err) {
      throw new Error(`${path}: header is not valid JSON (${(err as Error).message})`);
    }
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new Error(`${path}: header is not a JSON object`);
    const dataStart = 8 + headerLen;
    const dataSize = size - dataStart;
    const entries = new Map<string, SafetensorsEntry>();
    let metadata: Record<string, string> = {};
    for (const [name, value] of Object.entries(raw as Record<string, unknown>)) {
      if (name === '__metadata__') {
        metadata = (value ?? {}) as Record<string, string>;
        continue;
      }
      const v = value as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
      const where = `${path}: tensor '${name}'`;
      if (typeof v?.dtype !== 'string') throw new Error(`${where}: missing dtype`);
      if (!Array.isArray(v.shape) || !v.shape.every((d) => Number.isInteger(d) && d >= 0)) throw new Error(`${where}: bad shape`);
      const off = v.data_offsets;
      if (!Array.isArray(off) || off.length !== 2 || !off.every((d) => Number.isInteger(d) && d >= 0) || off[0] > off[1]) {
        throw new Error(`${where}: bad data_offsets`);
      }
      const shape = v.shape as number[];
      const width = BYTES[v.dtype];
      if (width !== undefined && (off[1] - off[0]) !== numel(shape) * width) {
        throw new Error(`${where}: data_offsets span ${off[1] - off[0]} bytes but ${v.dtype}[${shape.join(',')}] needs ${numel(shape) * width}`);
      }
      if (off[1] > dataSize) {
        throw new Error(`${path}: truncated file (tensor '${name}' ends at byte ${dataStart + off[1]}, file has ${size})`);
      }
      entries.set(name, { dtype: v.dtype, shape, dataOffsets: [off[0], off[1]] });
    }
    return { path, dataStart, entries, metadata };
  } finally {
    if (own) fs.closeSync(handle);
  }
}

let f16Table: Float32Array | null = null;
function halfToFloatTable(): Float32Array {
  if (f16Table) return f16Table;
  const t = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const s = h & 0x8000 ? -1 : 1;
    const e = (h >> 10) & 0x1f;
    const m = h & 0x3ff;
    if (e === 0) t[h] = s * m * 2 ** -24;
    else if (e === 31) t[h] = m ? NaN : s * Infinity;
    else t[h] = s * (1 + m / 1024) * 2 ** (e - 15);
  }
  f16Table = t;
  return t;
}

/** Converts raw little-endian bytes of a float tensor to float32. */
export function decodeToF32(bytes: Uint8Array, dtype: string, where: string): Float32Array {
  // bytes always sits at offset 0 of its own aligned buffer (see readTensor).
  switch (dtype) {
    case 'F32':
      return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
    case 'BF16': {
      const src = new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2);
      const out = new Uint32Array(src.length);
      for (let i = 0; i < src.length; i++) out[i] = src[i] << 16;
      return new Float32Array(out.buffer);
    }
    case 'F16': {
      const src = new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2);
      const table = halfToFloatTable();
      const out = new Float32Array(src.length);
      for (let i = 0; i < src.length; i++) out[i] = table[src[i]];
      return out;
    }
    default:
      throw new Error(`${where}: unsupported dtype ${dtype} (expected F32, F16 or BF16)`);
  }
}

/**
 * Reads one tensor as float32 with a positioned read into a fresh buffer (works for files over
 * 2 GB, where a whole-file Buffer is impossible).
 */
export function readTensor(header: SafetensorsHeader, name: string, fd: number): F32Tensor {
  const entry = header.entries.get(name);
  if (!entry) throw new Error(`${header.path}: no tensor '${name}'`);
  const [a, b] = entry.dataOffsets;
  const bytes = new Uint8Array(new ArrayBuffer(b - a));
  readExactly(fd, bytes, header.dataStart + a, header.path, `tensor '${name}'`);
  return { shape: entry.shape.slice(), data: decodeToF32(bytes, entry.dtype, `${header.path}: tensor '${name}'`) };
}

/**
 * Reads one tensor of a file whose header was read earlier, opening the file for this read only
 * (streamed loading and resuming read each tensor when it is needed, never the whole file).
 */
export function readTensorNow(header: SafetensorsHeader, name: string): F32Tensor {
  const fd = fs.openSync(header.path, 'r');
  try {
    return readTensor(header, name, fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** Reads every tensor of a safetensors file as float32. */
export function readSafetensors(path: string): Map<string, F32Tensor> {
  if (!fs.existsSync(path)) throw new Error(`${path}: safetensors file not found`);
  const fd = fs.openSync(path, 'r');
  try {
    const header = readSafetensorsHeader(path, fd);
    const out = new Map<string, F32Tensor>();
    for (const name of header.entries.keys()) out.set(name, readTensor(header, name, fd));
    return out;
  } finally {
    fs.closeSync(fd);
  }
}

/** float32 → bfloat16 bits, round to nearest even (as torch's `.to(torch.bfloat16)`). */
export function f32ToBf16(data: Float32Array): Uint16Array {
  const u = new Uint32Array(data.buffer, data.byteOffset, data.length);
  const out = new Uint16Array(data.length);
  for (let i = 0; i < u.length; i++) {
    const x = u[i];
    if ((x & 0x7fffffff) > 0x7f800000) out[i] = (x >>> 16) | 0x40; // NaN stays a quiet NaN
    else out[i] = ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
  }
  return out;
}

/** float32 → IEEE half bits, round to nearest even, overflow to ±Inf. */
export function f32ToF16(data: Float32Array): Uint16Array {
  const u = new Uint32Array(data.buffer, data.byteOffset, data.length);
  const out = new Uint16Array(data.length);
  for (let i = 0; i < u.length; i++) {
    const x = u[i];
    const sign = (x >>> 16) & 0x8000;
    const exp = (x >>> 23) & 0xff;
    let mant = x & 0x7fffff;
    if (exp === 0xff) {
      out[i] = sign | 0x7c00 | (mant ? 0x200 : 0);
      continue;
    }
    const e = exp - 127 + 15;
    if (e >= 31) {
      out[i] = sign | 0x7c00;
      continue;
    }
    if (e <= 0) {
      // Subnormal half: shift the implicit-1 mantissa right, rounding to nearest even.
      if (e < -10) {
        out[i] = sign;
        continue;
      }
      mant |= 0x800000;
      const shift = 14 - e;
      const half = 1 << (shift - 1);
      let v = mant >>> shift;
      const rest = mant & ((1 << shift) - 1);
      if (rest > half || (rest === half && (v & 1))) v++;
      out[i] = sign | v;
      continue;
    }
    let v = (e << 10) | (mant >>> 13);
    const rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest === 0x1000 && (v & 1))) v++; // may carry into the exponent: still correct
    out[i] = sign | v;
  }
  return out;
}

/** A tensor to write: HF name, shape and float32 values. */
export interface NamedTensor {
  name: string;
  shape: number[];
  data: Float32Array;
}

/** A tensor to write whose values are read only when it is written (e.g. copied from a backend). */
export interface DeferredNamedTensor {
  name: string;
  shape: number[];
  read: () => Float32Array;
}

/**
 * Writes tensors (in the given order) as a safetensors file with dtype F32, F16 or BF16.
 * Each tensor is converted and written on its own; a {@link DeferredNamedTensor} is read just
 * before it is written and dropped after, so with deferred tensors peak memory is one tensor.
 */
export function writeSafetensors(
  path: string,
  tensors: readonly (NamedTensor | DeferredNamedTensor)[],
  dtype: SafetensorsDtype = 'F32',
  metadata: Record<string, string> = { format: 'pt' },
): void {
  assertLittleEndian();
  const width = BYTES[dtype];
  const header: Record<string, unknown> = {};
  let offset = 0;
  const checked = (t: { name: string; shape: number[] }, data: Float32Array): Float32Array => {
    if (numel(t.shape) !== data.length) throw new Error(`writeSafetensors ${path}: tensor '${t.name}' has ${data.length} values for shape [${t.shape.join(',')}]`);
    return data;
  };
  for (const t of tensors) {
    const bytes = numel(t.shape) * width;
    if ('data' in t) checked(t, t.data);
    header[t.name] = { dtype, shape: t.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  header.__metadata__ = metadata;
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (Buffer.byteLength(json) % 8)) % 8); // keep the data section 8-byte aligned
  const jsonBytes = Buffer.from(json, 'utf8');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(jsonBytes.length));
  const fd = fs.openSync(path, 'w');
  try {
    fs.writeSync(fd, len);
    fs.writeSync(fd, jsonBytes);
    for (const t of tensors) {
      const data = 'data' in t ? t.data : checked(t, t.read());
      const view =
        dtype === 'F32'
          ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
          : new Uint8Array((dtype === 'BF16' ? f32ToBf16(data) : f32ToF16(data)).buffer);
      let done = 0;
      while (done < view.length) done += fs.writeSync(fd, view, done, view.length - done);
    }
  } finally {
    fs.closeSync(fd);
  }
}
