/**
 * Strict UTF-8 decoding for dataset and config files: Node's `readFile(f, 'utf8')` turns invalid
 * bytes into U+FFFD silently, so a Latin-1 file would train on replacement characters (or a config
 * key would read as garbage). These helpers find the first bad byte so errors can point at it.
 */

/** Byte offset of the first byte that breaks UTF-8 (RFC 3629: no overlongs, surrogates or > U+10FFFF), or -1. */
export function firstInvalidUtf8(bytes: Uint8Array): number {
  let i = 0;
  const n = bytes.length;
  while (i < n) {
    const b = bytes[i];
    if (b < 0x80) {
      i++;
      continue;
    }
    let len: number;
    let min: number;
    if (b >= 0xc2 && b <= 0xdf) {
      len = 2;
      min = 0x80;
    } else if (b >= 0xe0 && b <= 0xef) {
      len = 3;
      min = 0x800;
    } else if (b >= 0xf0 && b <= 0xf4) {
      len = 4;
      min = 0x10000;
    } else {
      return i;
    }
    if (i + len > n) return i;
    let cp = b & (0xff >> (len + 1));
    for (let k = 1; k < len; k++) {
      const c = bytes[i + k];
      if ((c & 0xc0) !== 0x80) return i;
      cp = (cp << 6) | (c & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += len;
  }
  return -1;
}

/** Where an invalid byte sits: 1-based line and column (in bytes), and the byte itself. */
export interface Utf8Problem {
  readonly offset: number;
  readonly line: number;
  readonly column: number;
  readonly byte: number;
}

/** Decodes UTF-8 (a leading BOM is dropped) or returns where it first fails. */
export function decodeUtf8(bytes: Uint8Array): { text: string } | { problem: Utf8Problem } {
  const bad = firstInvalidUtf8(bytes);
  if (bad < 0) return { text: new TextDecoder('utf-8').decode(bytes) };
  let line = 1;
  let lineStart = 0;
  for (let i = 0; i < bad; i++) {
    if (bytes[i] === 0x0a) {
      line++;
      lineStart = i + 1;
    }
  }
  return { problem: { offset: bad, line, column: bad - lineStart + 1, byte: bytes[bad] } };
}

/** The common tail of invalid-UTF-8 messages. */
export function describeUtf8Problem(p: Utf8Problem): string {
  return `invalid UTF-8 at byte offset ${p.offset} (line ${p.line}, column ${p.column}: byte 0x${p.byte.toString(16).padStart(2, '0')}); save the file as UTF-8`;
}
