import * as fs from 'node:fs';
import { assertLittleEndian, f32ToBf16, f32ToF16, numel, type SafetensorsDtype } from './safetensors.js';

/** A tensor to stream into a safetensors file: its name and shape; values come from `fill`. */
export interface StreamedTensorSpec {
  name: string;
  shape: number[];
}

/** Options of {@link writeSafetensorsStreamed}. */
export interface StreamedWriteOptions {
  /** Values per chunk (default 2^20): peak memory is one float32 chunk plus its converted copy. */
  chunkSize?: number;
  metadata?: Record<string, string>;
  /** Called after each chunk with the data bytes written so far and the total. */
  onProgress?: (written: number, total: number) => void;
}

const WIDTH: Record<SafetensorsDtype, number> = { F32: 4, F16: 2, BF16: 2 };

/**
 * Writes a safetensors file whose values are produced chunk by chunk: `fill(tensor, chunk, start)`
 * must fill `chunk` with the values `start .. start + chunk.length` of `tensor` (chunks arrive in
 * file order, tensor after tensor). The header is the same as `writeSafetensors` writes for the
 * same tensors, so small files are byte-identical to it; files of any size need only one chunk
 * of memory. The file is written as `path.partial` and renamed when complete, so an interrupted
 * write never leaves a `path` that looks whole. Returns the file size in bytes.
 */
export function writeSafetensorsStreamed(
  path: string,
  tensors: readonly StreamedTensorSpec[],
  dtype: SafetensorsDtype,
  fill: (tensor: StreamedTensorSpec, chunk: Float32Array, start: number) => void,
  options: StreamedWriteOptions = {},
): number {
  assertLittleEndian();
  const width = WIDTH[dtype];
  const chunkSize = options.chunkSize ?? 1 << 20;
  const header: Record<string, unknown> = {};
  let offset = 0;
  for (const t of tensors) {
    const bytes = numel(t.shape) * width;
    header[t.name] = { dtype, shape: t.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  const total = offset;
  header.__metadata__ = options.metadata ?? { format: 'pt' };
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (Buffer.byteLength(json) % 8)) % 8); // keep the data section 8-byte aligned
  const jsonBytes = Buffer.from(json, 'utf8');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(jsonBytes.length));
  const buffer = new Float32Array(chunkSize);
  let written = 0;
  const partial = `${path}.partial`;
  const fd = fs.openSync(partial, 'w');
  let done = false;
  try {
    writeAll(fd, len);
    writeAll(fd, jsonBytes);
    for (const t of tensors) {
      const count = numel(t.shape);
      for (let start = 0; start < count; start += chunkSize) {
        const chunk = buffer.subarray(0, Math.min(chunkSize, count - start));
        fill(t, chunk, start);
        const bytes =
          dtype === 'F32'
            ? new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength)
            : new Uint8Array((dtype === 'BF16' ? f32ToBf16(chunk) : f32ToF16(chunk)).buffer);
        writeAll(fd, bytes);
        written += bytes.length;
        options.onProgress?.(written, total);
      }
    }
    done = true;
  } finally {
    fs.closeSync(fd);
    if (!done) fs.rmSync(partial, { force: true });
  }
  fs.renameSync(partial, path);
  return 8 + jsonBytes.length + total;
}

function writeAll(fd: number, bytes: Uint8Array): void {
  let done = 0;
  while (done < bytes.length) done += fs.writeSync(fd, bytes, done, bytes.length - done);
}
