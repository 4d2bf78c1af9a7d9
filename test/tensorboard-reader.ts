/**
 * A small reader of TensorBoard event files for the tests, written apart from the writer
 * (src/logging/tensorboard.ts, tfrecord.ts): a generic protobuf field walker, a bitwise CRC32C and
 * the TFRecord framing, so the tests check the writer's bytes against the format, not against itself.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** One protobuf field: its number, wire type and raw value. */
export interface ProtoField {
  readonly field: number;
  readonly wire: number;
  /** varint (as bigint), fixed64/fixed32 (as their bytes), length-delimited (as their bytes). */
  readonly value: bigint | Uint8Array;
}

function readVarint(b: Uint8Array, at: number): [bigint, number] {
  let v = 0n;
  let shift = 0n;
  for (;;) {
    if (at >= b.length) throw new Error('varint runs past the end');
    const byte = b[at++];
    v |= BigInt(byte & 0x7f) << shift;
    if ((byte & 0x80) === 0) return [v, at];
    shift += 7n;
  }
}

/** Every field of a protobuf message, in order. */
export function protoFields(b: Uint8Array): ProtoField[] {
  const out: ProtoField[] = [];
  let at = 0;
  while (at < b.length) {
    const [key, next] = readVarint(b, at);
    at = next;
    const field = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (wire === 0) {
      const [v, n] = readVarint(b, at);
      out.push({ field, wire, value: v });
      at = n;
    } else if (wire === 1 || wire === 5) {
      const size = wire === 1 ? 8 : 4;
      if (at + size > b.length) throw new Error('fixed field runs past the end');
      out.push({ field, wire, value: b.subarray(at, at + size) });
      at += size;
    } else if (wire === 2) {
      const [len, n] = readVarint(b, at);
      const end = n + Number(len);
      if (end > b.length) throw new Error('length-delimited field runs past the end');
      out.push({ field, wire, value: b.subarray(n, end) });
      at = end;
    } else {
      throw new Error(`unexpected wire type ${wire}`);
    }
  }
  return out;
}

/** A decoded `Event` (the fields comlrl writes). */
export interface DecodedEvent {
  readonly wallTime: number;
  readonly step: number;
  readonly fileVersion?: string;
  readonly scalars?: readonly { tag: string; value: number }[];
}

const bytesOf = (f: ProtoField): Uint8Array => {
  if (!(f.value instanceof Uint8Array)) throw new Error(`field ${f.field} is not bytes`);
  return f.value;
};

const viewOf = (b: Uint8Array): DataView => new DataView(b.buffer, b.byteOffset, b.byteLength);

/** Decodes an `Event` (wall_time = 1, step = 2, file_version = 3, summary = 5 of Value{tag = 1, simple_value = 2}). */
export function decodeEvent(b: Uint8Array): DecodedEvent {
  let wallTime = 0;
  let step = 0;
  let fileVersion: string | undefined;
  let scalars: { tag: string; value: number }[] | undefined;
  for (const f of protoFields(b)) {
    if (f.field === 1 && f.wire === 1) wallTime = viewOf(bytesOf(f)).getFloat64(0, true);
    else if (f.field === 2 && f.wire === 0) step = Number(BigInt.asIntN(64, f.value as bigint));
    else if (f.field === 3 && f.wire === 2) fileVersion = new TextDecoder().decode(bytesOf(f));
    else if (f.field === 5 && f.wire === 2) {
      scalars = [];
      for (const v of protoFields(bytesOf(f))) {
        if (v.field !== 1 || v.wire !== 2) throw new Error(`unexpected Summary field ${v.field}`);
        let tag = '';
        let value: number | undefined;
        for (const x of protoFields(bytesOf(v))) {
          if (x.field === 1 && x.wire === 2) tag = new TextDecoder().decode(bytesOf(x));
          else if (x.field === 2 && x.wire === 5) value = viewOf(bytesOf(x)).getFloat32(0, true);
          else throw new Error(`unexpected Summary.Value field ${x.field}`);
        }
        if (value === undefined) throw new Error(`Summary.Value ${tag} has no simple_value`);
        scalars.push({ tag, value });
      }
    } else throw new Error(`unexpected Event field ${f.field} (wire ${f.wire})`);
  }
  return { wallTime, step, ...(fileVersion !== undefined ? { fileVersion } : {}), ...(scalars ? { scalars } : {}) };
}

/** TFRecord's masked CRC32C, bit by bit (no table), apart from the writer's. */
export function maskedCrc32c(b: Uint8Array): number {
  let crc = 0xffffffff;
  for (const byte of b) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0x82f63b78 : crc >>> 1;
  }
  crc = (crc ^ 0xffffffff) >>> 0;
  return (((crc >>> 15) | (crc << 17)) + 0xa282ead8) >>> 0;
}

/** The records of a TFRecord file, checking lengths and both CRCs; throws on any flaw. */
export function splitRecords(bytes: Uint8Array): Uint8Array[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: Uint8Array[] = [];
  let at = 0;
  while (at < bytes.length) {
    if (at + 12 > bytes.length) throw new Error(`record header cut short at byte ${at}`);
    if (view.getUint32(at + 8, true) !== maskedCrc32c(bytes.subarray(at, at + 8))) throw new Error(`length CRC mismatch at byte ${at}`);
    const n = Number(view.getBigUint64(at, true));
    if (at + 16 + n > bytes.length) throw new Error(`record cut short at byte ${at}`);
    const data = bytes.subarray(at + 12, at + 12 + n);
    if (view.getUint32(at + 12 + n, true) !== maskedCrc32c(data)) throw new Error(`data CRC mismatch at byte ${at}`);
    out.push(data);
    at += 16 + n;
  }
  return out;
}

/** The events of the only event file in `dir` (there must be exactly one). */
export function readEventDir(dir: string): { file: string; events: DecodedEvent[] } {
  const files = readdirSync(dir).filter((f) => f.startsWith('events.out.tfevents.'));
  if (files.length !== 1) throw new Error(`expected one event file in ${dir}, found ${files.length}: ${files.join(', ')}`);
  const file = join(dir, files[0]);
  return { file, events: splitRecords(readFileSync(file)).map(decodeEvent) };
}
