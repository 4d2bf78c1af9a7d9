/**
 * The byte-to-character table of byte-level BPE (GPT-2, Qwen2, Llama 3): every byte maps to one
 * printable Unicode character, so any UTF-8 text becomes a string over a 256-symbol alphabet.
 */

function buildByteTable(): string[] {
  // Printable Latin-1 bytes keep their own code point; the rest are shifted past U+0100, in order.
  const printable = (b: number): boolean =>
    (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const table = new Array<string>(256);
  let shifted = 0;
  for (let b = 0; b < 256; b++) {
    table[b] = printable(b) ? String.fromCharCode(b) : String.fromCharCode(256 + shifted++);
  }
  return table;
}

/** `BYTE_TO_CHAR[b]` is the byte-level symbol of byte `b`. */
export const BYTE_TO_CHAR: readonly string[] = buildByteTable();

/**
 * The 256 byte symbols in the order byte-level vocabularies list them: printable bytes first
 * (by byte value), then the remapped ones.
 */
export const BYTE_ALPHABET: readonly string[] = (() => {
  const order: number[] = [];
  for (let b = 0; b < 256; b++) if (BYTE_TO_CHAR[b].charCodeAt(0) < 256) order.push(b);
  for (let b = 0; b < 256; b++) if (BYTE_TO_CHAR[b].charCodeAt(0) >= 256) order.push(b);
  return order.map((b) => BYTE_TO_CHAR[b]);
})();

const encoder = new TextEncoder();

/** Maps UTF-8 text to its byte-level symbol string. */
export function toByteLevel(text: string): string {
  let out = '';
  for (const b of encoder.encode(text)) out += BYTE_TO_CHAR[b];
  return out;
}
