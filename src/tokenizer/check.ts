/**
 * Checks of a loaded tokenizer against the model it drives, made at load so that a mismatch is
 * named with its token and file before a run starts instead of failing mid-generation.
 */
import type { Tokenizer } from './types.js';

/**
 * The special tokens a model reads (EOS ends and pads every completion, BOS may open a prompt)
 * must have rows in its embedding: each id below `modelVocabSize` (config.json `vocab_size`).
 * @param dir the folder both were loaded from, for the message
 * @throws Error naming the token, its id and the files
 */
export function checkTokenizerFitsModel(tokenizer: Tokenizer, modelVocabSize: number, dir: string): void {
  const tokens: [string, string | null, number | null][] = [
    ['EOS', tokenizer.eosToken, tokenizer.eosTokenId],
    ['pad', tokenizer.padToken, tokenizer.padTokenId],
    ['BOS', tokenizer.bosToken, tokenizer.bosTokenId],
  ];
  for (const [what, text, id] of tokens) {
    if (id === null || id < modelVocabSize) continue;
    throw new Error(
      `the ${what} token ${JSON.stringify(text)} of the tokenizer in ${dir} (tokenizer.json / tokenizer_config.json) has id ${id}, but the model's config.json vocab_size is ${modelVocabSize}: its embedding has no row for that token (a tokenizer of another model?)`,
    );
  }
}
