/**
 * Tokenizer loading, encoding and chat templates against fixtures made independently by
 * scripts/tokenizer_fixtures.py (a hand-written Python BPE encoder and Python jinja2 renders).
 */
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadTokenizer, writeTinyTokenizer, type ChatMessage, type Tokenizer } from '../src/tokenizer/index.js';

const FIX = join(import.meta.dirname, 'fixtures', 'tokenizer');

interface TextCase {
  text: string;
  ids: number[];
  decoded: string;
  decodedSkipSpecial: string;
}
interface ChatCase {
  name: string;
  messages: ChatMessage[];
  add_generation_prompt: boolean;
  enable_thinking?: boolean;
  tools?: unknown[];
  rendered: string;
  ids: number[];
}
interface Expected {
  bpe: TextCase[];
  bpePartialUtf8: { ids: number[]; decoded: string };
  word: TextCase[];
  tinyChats: ChatCase[];
  wordChats: ChatCase[];
  qwen3Chats: ChatCase[];
}

const expected = JSON.parse(await readFile(join(FIX, 'expected.json'), 'utf8')) as Expected;
const qwen3Template = await readFile(join(FIX, 'qwen3_chat_template.jinja'), 'utf8');
const fixtureWords = JSON.parse(await readFile(join(FIX, 'words.json'), 'utf8')) as string[];

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'comlrl-tok-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/** A copy of a fixture directory under the temp dir, for tests that alter files. */
async function copyFixture(name: string, to: string): Promise<string> {
  const dir = join(tmp, to);
  await cp(join(FIX, name), dir, { recursive: true });
  return dir;
}

async function editJson(path: string, edit: (o: Record<string, unknown>) => void): Promise<void> {
  const o = JSON.parse(await readFile(path, 'utf8')) as Record<string, unknown>;
  edit(o);
  await writeFile(path, JSON.stringify(o));
}

function chatOptions(c: ChatCase) {
  return {
    addGenerationPrompt: c.add_generation_prompt,
    enableThinking: c.enable_thinking,
    extra: c.tools ? { tools: c.tools } : undefined,
  };
}

describe('byte-level BPE (tiny Qwen2-style) vs the independent Python encoder', () => {
  let tok: Tokenizer;
  beforeAll(async () => {
    tok = await loadTokenizer(join(FIX, 'tiny-bpe'));
  });

  it.each(expected.bpe.map((c) => [JSON.stringify(c.text).slice(0, 40), c] as const))('encode/decode %s', (_, c) => {
    expect(tok.encode(c.text)).toEqual(c.ids);
    expect(tok.decode(c.ids)).toBe(c.decoded);
    expect(tok.decode(c.ids, { skipSpecialTokens: true })).toBe(c.decodedSkipSpecial);
  });

  it('decodes a cut multi-byte character to U+FFFD as Python does', () => {
    expect(tok.decode(expected.bpePartialUtf8.ids)).toBe(expected.bpePartialUtf8.decoded);
  });

  it('has the Qwen special tokens: eos <|im_end|>, pad <|endoftext|>, no bos', () => {
    expect(tok.eosToken).toBe('<|im_end|>');
    expect(tok.eosTokenId).toBe(tok.tokenToId('<|im_end|>'));
    expect(tok.padToken).toBe('<|endoftext|>');
    expect(tok.padTokenId).toBe(tok.tokenToId('<|endoftext|>'));
    expect(tok.bosTokenId).toBeNull();
    expect(tok.idToToken(tok.eosTokenId)).toBe('<|im_end|>');
    // <think> is an added token but not special in Qwen3, so skipping specials keeps it.
    const think = tok.tokenToId('<think>') as number;
    expect(tok.specialTokenIds.has(think)).toBe(false);
    for (const t of ['<|endoftext|>', '<|im_start|>', '<|im_end|>']) {
      expect(tok.specialTokenIds.has(tok.tokenToId(t) as number)).toBe(true);
    }
    expect(tok.hasChatTemplate).toBe(true);
  });

  it('encodes with and without special tokens alike (Qwen has no post-processor tokens)', () => {
    const text = expected.bpe[0].text;
    expect(tok.encode(text, { addSpecialTokens: false })).toEqual(tok.encode(text));
  });
});

describe('word-level tokenizer vs the independent Python encoder', () => {
  let tok: Tokenizer;
  beforeAll(async () => {
    tok = await loadTokenizer(join(FIX, 'tiny-word'));
  });

  it.each(expected.word.map((c) => [c.text, c] as const))('encode/decode %j', (_, c) => {
    expect(tok.encode(c.text)).toEqual(c.ids);
    expect(tok.decode(c.ids)).toBe(c.decoded);
    expect(tok.decode(c.ids, { skipSpecialTokens: true })).toBe(c.decodedSkipSpecial);
  });

  it('maps each listed word to one token', () => {
    for (const w of fixtureWords) {
      const ids = tok.encode(w);
      expect(ids).toHaveLength(1);
      expect(tok.decode(ids)).toBe(w);
    }
  });

  it.each(expected.wordChats.map((c) => [c.name, c] as const))('chat template + encode: %s', (_, c) => {
    const rendered = tok.applyChatTemplate(c.messages, chatOptions(c));
    expect(rendered).toBe(c.rendered);
    expect(tok.encode(rendered)).toEqual(c.ids);
  });
});

describe('chat templates vs Python jinja2', () => {
  it.each(expected.tinyChats.map((c) => [c.name, c] as const))('tiny Qwen3-style template: %s', async (_, c) => {
    const tok = await loadTokenizer(join(FIX, 'tiny-bpe'));
    const rendered = tok.applyChatTemplate(c.messages, chatOptions(c));
    expect(rendered).toBe(c.rendered);
    expect(tok.encode(rendered)).toEqual(c.ids);
  });

  describe('the real Qwen3 template (from chat_template.jinja)', () => {
    let tok: Tokenizer;
    beforeAll(async () => {
      const dir = await copyFixture('tiny-bpe', 'qwen3-jinja');
      await writeFile(join(dir, 'chat_template.jinja'), qwen3Template);
      tok = await loadTokenizer(dir);
    });
    it.each(expected.qwen3Chats.map((c) => [c.name, c] as const))('%s', (_, c) => {
      const rendered = tok.applyChatTemplate(c.messages, chatOptions(c));
      expect(rendered).toBe(c.rendered);
      expect(tok.encode(rendered)).toEqual(c.ids);
    });
  });

  it('defaults add_generation_prompt to true and leaves enable_thinking undefined', async () => {
    const tok = await loadTokenizer(join(FIX, 'tiny-bpe'));
    const c = expected.tinyChats[0];
    expect(tok.applyChatTemplate(c.messages)).toBe(c.rendered);
    expect(c.add_generation_prompt).toBe(true);
    // Hand-derived: the Qwen3 format of one user turn, then the assistant header.
    expect(tok.applyChatTemplate([{ role: 'user', content: 'hi' }], { addGenerationPrompt: false })).toBe(
      '<|im_start|>user\nhi<|im_end|>\n',
    );
  });

  it('passes the special tokens as template variables', async () => {
    const dir = await copyFixture('tiny-bpe', 'vars');
    await writeFile(join(dir, 'chat_template.jinja'), '{{ eos_token }}|{{ pad_token }}|{{ bos_token is defined }}|{{ answer }}');
    const tok = await loadTokenizer(dir);
    expect(tok.applyChatTemplate([], { extra: { answer: 42 } })).toBe('<|im_end|>|<|endoftext|>|false|42');
  });
});

describe('chat template sources and selection', () => {
  it('takes a list of named templates: default, by name, tool_use with tools', async () => {
    const dir = await copyFixture('tiny-bpe', 'named');
    await editJson(join(dir, 'tokenizer_config.json'), (o) => {
      o.chat_template = [
        { name: 'default', template: 'D{{ messages | length }}' },
        { name: 'tool_use', template: 'T{{ tools | length }}' },
        { name: 'short', template: 'S' },
      ];
    });
    const tok = await loadTokenizer(dir);
    const msgs: ChatMessage[] = [{ role: 'user', content: 'x' }];
    expect(tok.applyChatTemplate(msgs)).toBe('D1');
    expect(tok.applyChatTemplate(msgs, { templateName: 'short' })).toBe('S');
    expect(tok.applyChatTemplate(msgs, { extra: { tools: [{}, {}] } })).toBe('T2');
    expect(() => tok.applyChatTemplate(msgs, { templateName: 'nope' })).toThrow(/"nope".*tokenizer_config\.json.*default, tool_use, short/);
  });

  it('errors when several templates have no default and none is named', async () => {
    const dir = await copyFixture('tiny-bpe', 'nodefault');
    await editJson(join(dir, 'tokenizer_config.json'), (o) => {
      o.chat_template = [{ name: 'a', template: 'A' }];
    });
    const tok = await loadTokenizer(dir);
    expect(() => tok.applyChatTemplate([])).toThrow(/tokenizer_config\.json.*"default".*templateName/);
  });

  it('prefers chat_template.jinja over the config field', async () => {
    const dir = await copyFixture('tiny-bpe', 'jinja-first');
    await writeFile(join(dir, 'chat_template.jinja'), 'from file');
    expect((await loadTokenizer(dir)).applyChatTemplate([])).toBe('from file');
  });

  it('reads chat_template.json when nothing else has a template', async () => {
    const dir = await copyFixture('tiny-bpe', 'processor');
    await editJson(join(dir, 'tokenizer_config.json'), (o) => {
      delete o.chat_template;
    });
    await writeFile(join(dir, 'chat_template.json'), JSON.stringify({ chat_template: 'P{{ messages[0].content }}' }));
    const tok = await loadTokenizer(dir);
    expect(tok.applyChatTemplate([{ role: 'user', content: 'q' }])).toBe('Pq');
  });
});

describe('special-token fallbacks', () => {
  it('pad falls back to eos when the tokenizer has none (CoMLRL ensure_pad_token)', async () => {
    const dir = await copyFixture('tiny-bpe', 'nopad');
    await editJson(join(dir, 'tokenizer_config.json'), (o) => {
      delete o.pad_token;
    });
    await editJson(join(dir, 'special_tokens_map.json'), (o) => {
      delete o.pad_token;
    });
    const tok = await loadTokenizer(dir);
    expect(tok.padTokenId).toBe(tok.eosTokenId);
    expect(tok.padToken).toBe('<|im_end|>');
  });

  it('reads eos from special_tokens_map.json, then from generation_config.json', async () => {
    const dir = await copyFixture('tiny-bpe', 'eosmap');
    await editJson(join(dir, 'tokenizer_config.json'), (o) => {
      delete o.eos_token;
    });
    await editJson(join(dir, 'special_tokens_map.json'), (o) => {
      o.eos_token = { content: '<|endoftext|>', lstrip: false };
    });
    expect((await loadTokenizer(dir)).eosToken).toBe('<|endoftext|>');

    await rm(join(dir, 'special_tokens_map.json'));
    const imStart = (await loadTokenizer(join(FIX, 'tiny-bpe'))).tokenToId('<|im_start|>') as number;
    await writeFile(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: [imStart, 0] }));
    const tok = await loadTokenizer(dir);
    expect(tok.eosTokenId).toBe(imStart);
    expect(tok.eosToken).toBe('<|im_start|>');
  });

  it('loads without tokenizer_config.json, from special_tokens_map.json', async () => {
    const dir = await copyFixture('tiny-bpe', 'noconfig');
    await rm(join(dir, 'tokenizer_config.json'));
    const tok = await loadTokenizer(dir);
    expect(tok.eosToken).toBe('<|im_end|>');
    expect(tok.padToken).toBe('<|endoftext|>');
    expect(tok.hasChatTemplate).toBe(false);
    expect(tok.encode(expected.bpe[1].text)).toEqual(expected.bpe[1].ids);
  });

  it('accepts AddedToken objects in tokenizer_config.json', async () => {
    const dir = await copyFixture('tiny-bpe', 'objtokens');
    await editJson(join(dir, 'tokenizer_config.json'), (o) => {
      o.eos_token = { __type: 'AddedToken', content: '<|im_end|>', special: true };
    });
    expect((await loadTokenizer(dir)).eosToken).toBe('<|im_end|>');
  });

  it('adds a BOS through the post-processor only when addSpecialTokens is on (Llama style)', async () => {
    const dir = await copyFixture('tiny-bpe', 'bos');
    let bosId = -1;
    await editJson(join(dir, 'tokenizer.json'), (o) => {
      const added = o.added_tokens as { id: number }[];
      bosId = Math.max(...added.map((t) => t.id)) + 1;
      added.push({ id: bosId, content: '<s>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true } as never);
      o.post_processor = {
        type: 'TemplateProcessing',
        single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
        pair: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
        special_tokens: { '<s>': { id: '<s>', ids: [bosId], tokens: ['<s>'] } },
      };
    });
    await editJson(join(dir, 'tokenizer_config.json'), (o) => {
      o.bos_token = '<s>';
    });
    const tok = await loadTokenizer(dir);
    const plain = expected.bpe[0];
    expect(tok.bosTokenId).toBe(bosId);
    expect(tok.encode(plain.text)).toEqual([bosId, ...plain.ids]);
    expect(tok.encode(plain.text, { addSpecialTokens: false })).toEqual(plain.ids);
    expect(tok.decode([bosId, ...plain.ids], { skipSpecialTokens: true })).toBe(plain.text);
  });

  it('decodes an empty list to the empty string', async () => {
    const tok = await loadTokenizer(join(FIX, 'tiny-bpe'));
    expect(tok.decode([])).toBe('');
    expect(tok.decode([tok.eosTokenId], { skipSpecialTokens: true })).toBe('');
  });

  it('drops ids outside the vocabulary when decoding (model vocab larger than the tokenizer)', async () => {
    const tok = await loadTokenizer(join(FIX, 'tiny-bpe'));
    const c = expected.bpe[0];
    expect(tok.idToToken(tok.vocabSize)).toBeUndefined();
    expect(tok.decode([tok.vocabSize, ...c.ids, tok.vocabSize + 7, -1])).toBe(c.decoded);
  });
});

describe('errors name the file and the field', () => {
  it('missing tokenizer.json', async () => {
    const dir = await copyFixture('tiny-bpe', 'e-missing');
    await rm(join(dir, 'tokenizer.json'));
    await expect(loadTokenizer(dir)).rejects.toThrow(/tokenizer\.json not found in .*e-missing/);
  });

  it('malformed JSON', async () => {
    const dir = await copyFixture('tiny-bpe', 'e-json');
    await writeFile(join(dir, 'tokenizer_config.json'), '{"eos_token": "<|im_end|>",');
    await expect(loadTokenizer(dir)).rejects.toThrow(/tokenizer_config\.json in .* is not valid JSON/);
  });

  it('a field of the wrong type', async () => {
    const dir = await copyFixture('tiny-bpe', 'e-type');
    await editJson(join(dir, 'tokenizer_config.json'), (o) => {
      o.eos_token = 7;
    });
    await expect(loadTokenizer(dir)).rejects.toThrow(/tokenizer_config\.json: field "eos_token"/);
  });

  it('tokenizer.json without a model vocabulary', async () => {
    const dir = await copyFixture('tiny-bpe', 'e-model');
    await editJson(join(dir, 'tokenizer.json'), (o) => {
      delete (o.model as Record<string, unknown>).vocab;
    });
    await expect(loadTokenizer(dir)).rejects.toThrow(/tokenizer\.json: field "model\.vocab"/);
  });

  it('eos / pad tokens that are not in the vocabulary', async () => {
    const dir = await copyFixture('tiny-bpe', 'e-eos');
    await editJson(join(dir, 'tokenizer_config.json'), (o) => {
      o.eos_token = '</s>';
    });
    await expect(loadTokenizer(dir)).rejects.toThrow(/tokenizer_config\.json field "eos_token": "<\/s>" is not in the vocabulary/);
    await editJson(join(dir, 'tokenizer_config.json'), (o) => {
      o.eos_token = '<|im_end|>';
      o.pad_token = '<pad>';
    });
    await expect(loadTokenizer(dir)).rejects.toThrow(/tokenizer_config\.json field "pad_token": "<pad>"/);
  });

  it('a word-level vocabulary without its unknown token, or a word-level model without one', async () => {
    const dir = await copyFixture('tiny-word', 'e-unk');
    // [UNK] stays an added token (so the config's unk_token resolves), but the WordLevel model cannot map unknown words to it.
    await editJson(join(dir, 'tokenizer.json'), (o) => {
      delete (o.model as { vocab: Record<string, number> }).vocab['[UNK]'];
    });
    await expect(loadTokenizer(dir)).rejects.toThrow(`tokenizer.json in ${dir}: the unknown token "[UNK]" (field "model.unk_token") is not in the vocabulary`);
    await editJson(join(dir, 'tokenizer.json'), (o) => {
      delete (o.model as { unk_token?: string }).unk_token;
    });
    await expect(loadTokenizer(dir)).rejects.toThrow(/tokenizer\.json in .*: field "model\.unk_token" is missing: a WordLevel model needs an unknown token/);
  });

  it('no EOS anywhere', async () => {
    const dir = await copyFixture('tiny-bpe', 'e-noeos');
    await editJson(join(dir, 'tokenizer_config.json'), (o) => {
      delete o.eos_token;
    });
    await rm(join(dir, 'special_tokens_map.json'));
    await expect(loadTokenizer(dir)).rejects.toThrow(/no EOS token .*"eos_token" in tokenizer_config\.json/);
  });

  it('an eos_token_id outside the vocabulary', async () => {
    const dir = await copyFixture('tiny-bpe', 'e-eosid');
    await editJson(join(dir, 'tokenizer_config.json'), (o) => {
      delete o.eos_token;
    });
    await rm(join(dir, 'special_tokens_map.json'));
    await writeFile(join(dir, 'config.json'), JSON.stringify({ eos_token_id: 99999 }));
    await expect(loadTokenizer(dir)).rejects.toThrow(/config\.json field "eos_token_id": 99999/);
  });

  it('asking for a chat template the checkpoint does not have', async () => {
    const dir = await copyFixture('tiny-bpe', 'e-notemplate');
    await editJson(join(dir, 'tokenizer_config.json'), (o) => {
      delete o.chat_template;
    });
    const tok = await loadTokenizer(dir);
    expect(tok.hasChatTemplate).toBe(false);
    expect(() => tok.applyChatTemplate([{ role: 'user', content: 'hi' }])).toThrow(
      /no chat template in .*tokenizer_config\.json has no "chat_template" field/,
    );
  });

  it('a template that does not parse, and one that raises', async () => {
    const dir = await copyFixture('tiny-bpe', 'e-bad-template');
    await writeFile(join(dir, 'chat_template.jinja'), '{% for m in messages %}');
    const tok = await loadTokenizer(dir);
    expect(() => tok.applyChatTemplate([])).toThrow(/chat_template\.jinja: chat_template does not parse/);
    const good = await loadTokenizer(join(FIX, 'tiny-bpe'));
    const bad = [{ role: 'narrator', content: 'x' }] as unknown as ChatMessage[];
    expect(() => good.applyChatTemplate(bad)).toThrow(/tokenizer_config\.json failed to render: Unknown message role: narrator/);
  });

  it('writeTinyTokenizer rejects words the pre-tokenizer would split', async () => {
    await expect(writeTinyTokenizer(join(tmp, 'e-words'), { kind: 'word', words: ['ok', 'two words'] })).rejects.toThrow(
      /options\.words\[1\]: each word must be/,
    );
  });
});

describe('writeTinyTokenizer', () => {
  it.each([
    ['tiny-bpe', { kind: 'bpe' as const }],
    ['tiny-word', { kind: 'word' as const, words: fixtureWords }],
  ])('reproduces the committed fixture %s byte for byte', async (name, options) => {
    const dir = join(tmp, `w-${name}`);
    const info = await writeTinyTokenizer(dir, options);
    for (const f of ['tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json']) {
      expect(await readFile(join(dir, f), 'utf8'), f).toBe(await readFile(join(FIX, name, f), 'utf8'));
    }
    const tok = await loadTokenizer(dir);
    expect(info).toEqual({ vocabSize: tok.vocabSize, eosTokenId: tok.eosTokenId, padTokenId: tok.padTokenId, bosTokenId: null });
  });

  it('word kind: vocabulary is [UNK] + unique words + role words + 5 added tokens', async () => {
    const words = ['x', 'y', 'x', 'user'];
    const info = await writeTinyTokenizer(join(tmp, 'w-count'), { kind: 'word', words });
    // [UNK]; x, y, user; system, assistant, tool_response; then the 5 Qwen added tokens.
    expect(info.vocabSize).toBe(1 + 3 + 3 + 5);
    expect(info.padTokenId).toBe(7); // <|endoftext|> comes first among the added tokens
    expect(info.eosTokenId).toBe(9); // then <|im_start|>, <|im_end|>
  });

  it('bpe kind: a vocabulary of 256 bytes + learned merges + 5 added tokens, within 300-600', async () => {
    const tok = await loadTokenizer(join(FIX, 'tiny-bpe'));
    const json = JSON.parse(await readFile(join(FIX, 'tiny-bpe', 'tokenizer.json'), 'utf8')) as {
      model: { vocab: Record<string, number>; merges: string[] };
    };
    expect(tok.vocabSize).toBe(Object.keys(json.model.vocab).length + 5);
    expect(Object.keys(json.model.vocab).length).toBeLessThanOrEqual(256 + json.model.merges.length);
    expect(tok.vocabSize).toBeGreaterThanOrEqual(300);
    expect(tok.vocabSize).toBeLessThanOrEqual(600);
  });
});

describe('save then load', () => {
  it.each(['tiny-bpe', 'tiny-word'])('%s: identical encodings, specials and renders', async (name) => {
    const a = await loadTokenizer(join(FIX, name));
    const out = join(tmp, `saved-${name}`);
    await a.save(out);
    const b = await loadTokenizer(out);
    const texts = [...expected.bpe, ...expected.word].map((c) => c.text);
    for (const t of texts) expect(b.encode(t)).toEqual(a.encode(t));
    for (const k of ['vocabSize', 'eosTokenId', 'padTokenId', 'bosTokenId', 'eosToken', 'padToken'] as const) {
      expect(b[k]).toBe(a[k]);
    }
    expect([...b.specialTokenIds].sort()).toEqual([...a.specialTokenIds].sort());
    for (const c of expected.tinyChats) expect(b.applyChatTemplate(c.messages, chatOptions(c))).toBe(a.applyChatTemplate(c.messages, chatOptions(c)));
  });

  it('keeps a chat_template.jinja template and an eos found in generation_config.json', async () => {
    const dir = await copyFixture('tiny-bpe', 'save-src');
    await writeFile(join(dir, 'chat_template.jinja'), qwen3Template);
    await editJson(join(dir, 'tokenizer_config.json'), (o) => {
      delete o.eos_token;
      delete o.chat_template;
    });
    await rm(join(dir, 'special_tokens_map.json'));
    const imEnd = (await loadTokenizer(join(FIX, 'tiny-bpe'))).eosTokenId;
    await writeFile(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: imEnd }));
    const a = await loadTokenizer(dir);
    const out = join(tmp, 'save-dst');
    await a.save(out);
    expect(await readFile(join(out, 'chat_template.jinja'), 'utf8')).toBe(qwen3Template);
    const b = await loadTokenizer(out);
    expect(b.eosTokenId).toBe(imEnd);
    const c = expected.qwen3Chats[3];
    expect(b.applyChatTemplate(c.messages, chatOptions(c))).toBe(c.rendered);
  });
});
