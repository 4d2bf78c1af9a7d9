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

/**
 * Why tokenizers `a` and `b` do not give the same ids the same tokens, or undefined when they do.
 * Two models can only score each other's token ids (a reference model scoring an agent's
 * completions) when every id means the same token to both: the id space's size and each id's
 * token text are compared (special tokens such as EOS may differ, as between a base model and its
 * instruct variant, which share the vocabulary).
 */
export function tokenizerDifference(a: Tokenizer, b: Tokenizer): string | undefined {
  if (a.vocabSize !== b.vocabSize) return `their vocabularies have ${a.vocabSize} and ${b.vocabSize} token ids`;
  for (let id = 0; id < a.vocabSize; id++) {
    const x = a.idToToken(id);
    const y = b.idToToken(id);
    if (x !== y) return `token id ${id} is ${JSON.stringify(x ?? null)} in one and ${JSON.stringify(y ?? null)} in the other`;
  }
  return undefined;
}
