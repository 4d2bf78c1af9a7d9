/**
 * A deterministic byte-level BPE trainer, small enough for the tiny test tokenizers: it learns merges
 * from a corpus split with the Qwen2 pre-tokenizer rule, always taking the most frequent adjacent
 * pair (ties broken by the pair's text) so the same corpus gives the same vocabulary everywhere.
 */
import { BYTE_ALPHABET, toByteLevel } from './bytes.js';

/**
 * Qwen2's pre-tokenizer split, as stored in tokenizer.json (Oniguruma syntax, read by the HF
 * tokenizers libraries).
 */
export const QWEN2_SPLIT_PATTERN =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// The same rule as a JS RegExp: JS has no inline `(?i:...)` group, so the contractions spell out both cases.
const QWEN2_SPLIT_JS =
  /'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu;

/** Splits text into pre-tokens with the Qwen2 rule. */
export function qwen2Split(text: string): string[] {
  return text.match(QWEN2_SPLIT_JS) ?? [];
}

/** A trained byte-level BPE: token → id, and the merges in rank order. */
export interface TrainedBPE {
  vocab: Map<string, number>;
  merges: [string, string][];
}

/**
 * Learns up to `numMerges` merges from `corpus` (pairs seen fewer than twice are not merged).
 * Ids 0–255 are the byte alphabet; each merge that makes a new string takes the next id.
 */
export function trainByteLevelBPE(corpus: string, numMerges: number): TrainedBPE {
  const vocab = new Map<string, number>();
  for (const sym of BYTE_ALPHABET) vocab.set(sym, vocab.size);

  const counts = new Map<string, number>();
  for (const piece of qwen2Split(corpus.normalize('NFC'))) {
    const word = toByteLevel(piece);
    counts.set(word, (counts.get(word) ?? 0) + 1);
  }
  // Words as symbol arrays; every byte-level symbol is one UTF-16 unit.
  const words: { symbols: string[]; count: number }[] = [...counts.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([w, count]) => ({ symbols: [...w], count }));

  const merges: [string, string][] = [];
  while (merges.length < numMerges) {
    const pairCounts = new Map<string, number>();
    for (const { symbols, count } of words) {
      for (let i = 0; i + 1 < symbols.length; i++) {
        // Byte-level symbols never contain a space, so a space joins a pair unambiguously.
        const key = `${symbols[i]} ${symbols[i + 1]}`;
        pairCounts.set(key, (pairCounts.get(key) ?? 0) + count);
      }
    }
    let best: string | null = null;
    let bestCount = 1;
    for (const [key, c] of pairCounts) {
      if (c > bestCount || (c === bestCount && best !== null && key < best)) {
        best = key;
        bestCount = c;
      }
    }
    if (best === null) break;
    const [left, right] = best.split(' ') as [string, string];
    const merged = left + right;
    merges.push([left, right]);
    if (!vocab.has(merged)) vocab.set(merged, vocab.size);
    for (const w of words) {
      const out: string[] = [];
      for (let i = 0; i < w.symbols.length; i++) {
        if (i + 1 < w.symbols.length && w.symbols[i] === left && w.symbols[i + 1] === right) {
          out.push(merged);
          i++;
        } else {
          out.push(w.symbols[i]);
        }
      }
      w.symbols = out;
    }
  }
  return { vocab, merges };
}
