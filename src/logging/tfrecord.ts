/**
 * TFRecord framing, the container of TensorBoard event files: each record is its data length as a
 * little-endian uint64, the masked CRC32C of those 8 bytes, the data, and the masked CRC32C of the
 * data. Readers check both CRCs, so a record cut short by a crash is detected and dropped.
 */

/** CRC32C (Castagnoli) lookup table, reflected polynomial 0x82F63B78. */
const TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** CRC32C of `bytes` (e.g. "123456789" → 0xE3069283). */
export function crc32c(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) crc = TABLE[(crc ^ bytes[i]) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

/** TFRecord's masked CRC: rotated right by 15 bits plus a constant, so CRCs of CRCs stay strong. */
export function maskCrc(crc: number): number {
  return (((crc >>> 15) | (crc << 17)) + 0xa282ead8) >>> 0;
}

/** Bytes of a record's header and footer around its data. */
export const RECORD_OVERHEAD = 16;

/** One framed record around `data`. */
export function frameRecord(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(data.length + RECORD_OVERHEAD);
  const view = new DataView(out.buffer);
  view.setBigUint64(0, BigInt(data.length), true);
  view.setUint32(8, maskCrc(crc32c(out.subarray(0, 8))), true);
  out.set(data, 12);
  view.setUint32(12 + data.length, maskCrc(crc32c(data)), true);
  return out;
}

/** A record read back: its data and where it ends in the file. */
export interface TFRecord {
  readonly data: Uint8Array;
  /** Byte offset just past the record (where the next one starts). */
  readonly end: number;
}

/**
 * The records of a TFRecord file, in order, up to the first one that is cut short or fails a CRC
 * (what a crash mid-write leaves); `end` of the last one returned is the length of the sound prefix.
 */
export function readRecords(bytes: Uint8Array): TFRecord[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const records: TFRecord[] = [];
  let at = 0;
  while (at + 12 <= bytes.length) {
    if (view.getUint32(at + 8, true) !== maskCrc(crc32c(bytes.subarray(at, at + 8)))) break;
    const length = view.getBigUint64(at, true);
    if (length > BigInt(bytes.length - at - RECORD_OVERHEAD)) break;
    const n = Number(length);
    const data = bytes.subarray(at + 12, at + 12 + n);
    if (view.getUint32(at + 12 + n, true) !== maskCrc(crc32c(data))) break;
    at += n + RECORD_OVERHEAD;
    records.push({ data, end: at });
  }
  return records;
}
