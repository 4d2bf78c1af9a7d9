/**
 * Writes small but real Hugging Face tokenizers (tokenizer.json + tokenizer_config.json) for tiny
 * test checkpoints, so tests and examples load them through the same code as a user's checkpoint.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { QWEN2_SPLIT_PATTERN, trainByteLevelBPE } from './bpe-train.js';
import { QWEN3_STYLE_CHAT_TEMPLATE } from './qwen3-style-template.js';
import { TINY_BPE_CORPUS } from './tiny-corpus.js';

/** Options of {@link writeTinyTokenizer}. */
export interface TinyTokenizerOptions {
  /**
   * `bpe`: a Qwen2-style byte-level BPE (about 500 tokens) trained on a built-in corpus.
   * `word`: one token per word of `words` (ASCII words or ASCII punctuation runs), split on
   * whitespace and punctuation; anything else is `[UNK]`.
   */
  kind: 'bpe' | 'word';
  /**
   * Vocabulary of the `word` kind (default: the digits 0–9 and the letters a–z). The tokenizer
   * also gets `[UNK]` (id 0) and the words the chat template prints: system, user, assistant,
   * tool_response.
   */
  words?: readonly string[];
}

/** What {@link writeTinyTokenizer} wrote. */
export interface TinyTokenizerInfo {
  vocabSize: number;
  eosTokenId: number;
  padTokenId: number;
  bosTokenId: number | null;
}

/** Merges learned for the `bpe` kind (fewer when the corpus runs out of repeated pairs). */
export const TINY_BPE_MERGES = 300;

const EOS = '<|im_end|>';
const PAD = '<|endoftext|>';
const UNK = '[UNK]';

/** The added tokens of Qwen3, in its order; `<think>`/`</think>` are added but not special there. */
const QWEN_ADDED: { content: string; special: boolean }[] = [
  { content: '<|endoftext|>', special: true },
  { content: '<|im_start|>', special: true },
  { content: '<|im_end|>', special: true },
  { content: '<think>', special: false },
  { content: '</think>', special: false },
];

/** Roles the chat template prints as plain text: the word kind needs them as words. */
const ROLE_WORDS = ['system', 'user', 'assistant', 'tool_response'];

// What the Whitespace pre-tokenizer keeps whole: a run of ASCII word characters or of ASCII punctuation.
const WORD_RE = /^(?:[A-Za-z0-9_]+|[!-/:-@[-^`{-~]+)$/;

const wordsSchema = z
  .array(
    z.string().regex(WORD_RE, {
      message: 'each word must be ASCII letters/digits/_ or ASCII punctuation only (no spaces)',
    }),
  )
  .min(1, { message: 'give at least one word' });

interface AddedTokenJson {
  id: number;
  content: string;
  single_word: boolean;
  lstrip: boolean;
  rstrip: boolean;
  normalized: boolean;
  special: boolean;
}

function addedToken(id: number, content: string, special: boolean): AddedTokenJson {
  return { id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special };
}

function bpeTokenizerJson(): { json: object; added: AddedTokenJson[]; size: number } {
  const { vocab, merges } = trainByteLevelBPE(TINY_BPE_CORPUS, TINY_BPE_MERGES);
  const added = QWEN_ADDED.map((t, i) => addedToken(vocab.size + i, t.content, t.special));
  const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false };
  const json = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: { type: 'NFC' },
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        { type: 'Split', pattern: { Regex: QWEN2_SPLIT_PATTERN }, behavior: 'Isolated', invert: false },
        byteLevel,
      ],
    },
    post_processor: byteLevel,
    decoder: byteLevel,
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: '',
      end_of_word_suffix: '',
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab: Object.fromEntries(vocab),
      merges: merges.map(([a, b]) => `${a} ${b}`),
    },
  };
  return { json, added, size: vocab.size + added.length };
}

function wordTokenizerJson(words: readonly string[]): { json: object; added: AddedTokenJson[]; size: number } {
  const vocab = new Map<string, number>([[UNK, 0]]);
  for (const w of [...words, ...ROLE_WORDS]) if (!vocab.has(w)) vocab.set(w, vocab.size);
  const added = [
    addedToken(0, UNK, true),
    ...QWEN_ADDED.map((t, i) => addedToken(vocab.size + i, t.content, t.special)),
  ];
  for (const t of added) vocab.set(t.content, t.id);
  const json = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: { type: 'Whitespace' },
    post_processor: null,
    // No decoder: tokens are joined with single spaces, one word per token.
    decoder: null,
    model: { type: 'WordLevel', vocab: Object.fromEntries(vocab), unk_token: UNK },
  };
  return { json, added, size: vocab.size };
}

function tokenizerConfig(added: AddedTokenJson[], kind: 'bpe' | 'word'): object {
  return {
    add_bos_token: false,
    add_prefix_space: false,
    added_tokens_decoder: Object.fromEntries(
      added.map(({ id, ...rest }) => [String(id), { content: rest.content, lstrip: false, normalized: false, rstrip: false, single_word: false, special: rest.special }]),
    ),
    additional_special_tokens: ['<|im_start|>', '<|im_end|>'],
    bos_token: null,
    chat_template: QWEN3_STYLE_CHAT_TEMPLATE,
    clean_up_tokenization_spaces: false,
    eos_token: EOS,
    errors: 'replace',
    model_max_length: 32768,
    pad_token: PAD,
    split_special_tokens: false,
    tokenizer_class: kind === 'bpe' ? 'Qwen2Tokenizer' : 'PreTrainedTokenizerFast',
    unk_token: kind === 'bpe' ? null : UNK,
  };
}

/**
 * Writes `tokenizer.json`, `tokenizer_config.json` and `special_tokens_map.json` of a tiny tokenizer
 * into `dir` (created if missing). Both kinds carry the Qwen added tokens (`<|endoftext|>`,
 * `<|im_start|>`, `<|im_end|>`, `<think>`, `</think>`), a Qwen3-format chat template, eos
 * `<|im_end|>` and pad `<|endoftext|>`, and no BOS. Deterministic: same options, same files.
 */
export async function writeTinyTokenizer(dir: string, options: TinyTokenizerOptions): Promise<TinyTokenizerInfo> {
  let built: { json: object; added: AddedTokenJson[]; size: number };
  if (options.kind === 'bpe') {
    built = bpeTokenizerJson();
  } else if (options.kind === 'word') {
    const defaults = [...'0123456789abcdefghijklmnopqrstuvwxyz'];
    const parsed = wordsSchema.safeParse(options.words ?? defaults);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new Error(`writeTinyTokenizer: options.words${issue.path.length ? `[${issue.path.join('.')}]` : ''}: ${issue.message}`);
    }
    built = wordTokenizerJson(parsed.data);
  } else {
    throw new Error(`writeTinyTokenizer: options.kind must be 'bpe' or 'word', got ${JSON.stringify((options as { kind: unknown }).kind)}`);
  }
  const idOf = (content: string): number => {
    const t = built.added.find((a) => a.content === content);
    if (!t) throw new Error(`writeTinyTokenizer: internal error, ${content} missing`);
    return t.id;
  };
  await mkdir(dir, { recursive: true });
  const specialsMap: Record<string, unknown> = {
    additional_special_tokens: ['<|im_start|>', '<|im_end|>'],
    eos_token: EOS,
    pad_token: PAD,
  };
  if (options.kind === 'word') specialsMap.unk_token = UNK;
  await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(built.json, null, 2) + '\n');
  await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify(tokenizerConfig(built.added, options.kind), null, 2) + '\n');
  await writeFile(join(dir, 'special_tokens_map.json'), JSON.stringify(specialsMap, null, 2) + '\n');
  return { vocabSize: built.size, eosTokenId: idOf(EOS), padTokenId: idOf(PAD), bosTokenId: null };
}
