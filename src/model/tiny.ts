import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import { writeTinyTokenizer } from '../tokenizer/tiny.js';
import { rngFor } from '../util/rng.js';
import { parseDecoderConfig } from './config.js';
import { writeSafetensors } from './safetensors.js';
import { expectedWeights } from './weights.js';

/** Options of {@link createTinyModel}. */
export interface TinyModelOptions {
  /** Output directory (created if missing). */
  dir: string;
  arch: 'qwen3' | 'qwen2' | 'llama';
  /** Seeds the weight init stream (`rngFor(seed, 'init')`). */
  seed: number;
  /** Tokenizer kind (default `bpe`). */
  tokenizer?: 'bpe' | 'word';
  /** Vocabulary of the `word` tokenizer. */
  words?: string[];
  hiddenSize?: number;
  numLayers?: number;
  numHeads?: number;
  numKvHeads?: number;
  intermediateSize?: number;
  /** Default: true for qwen2 (as the small Qwen2.5 checkpoints), false otherwise. */
  tieWordEmbeddings?: boolean;
}

const optionsSchema = z.object({
  dir: z.string().min(1, 'createTinyModel: dir must be a non-empty path'),
  arch: z.enum(['qwen3', 'qwen2', 'llama'], { error: "createTinyModel: arch must be 'qwen3', 'qwen2' or 'llama'" }),
  seed: z.number({ error: 'createTinyModel: seed must be a number' }).int('createTinyModel: seed must be an integer'),
  tokenizer: z.enum(['bpe', 'word'], { error: "createTinyModel: tokenizer must be 'bpe' or 'word'" }).optional(),
  words: z.array(z.string()).optional(),
  hiddenSize: z.number().int().positive('createTinyModel: hiddenSize must be a positive integer').optional(),
  numLayers: z.number().int().positive('createTinyModel: numLayers must be a positive integer').optional(),
  numHeads: z.number().int().positive('createTinyModel: numHeads must be a positive integer').optional(),
  numKvHeads: z.number().int().positive('createTinyModel: numKvHeads must be a positive integer').optional(),
  intermediateSize: z.number().int().positive('createTinyModel: intermediateSize must be a positive integer').optional(),
  tieWordEmbeddings: z.boolean().optional(),
});

const ARCH_CONFIG: Record<TinyModelOptions['arch'], Record<string, unknown>> = {
  qwen3: { architectures: ['Qwen3ForCausalLM'], model_type: 'qwen3', attention_bias: false, rope_theta: 1000000 },
  qwen2: { architectures: ['Qwen2ForCausalLM'], model_type: 'qwen2', rope_theta: 1000000, use_sliding_window: false },
  llama: { architectures: ['LlamaForCausalLM'], model_type: 'llama', attention_bias: false, mlp_bias: false, rope_theta: 10000 },
};

/**
 * Writes a complete, tiny Hugging Face causal-LM directory: tokenizer files (from
 * `writeTinyTokenizer`), config.json with the tokenizer's vocab size and eos id, and
 * model.safetensors (float32) with N(0, 0.02) matrices, unit norms and zero biases drawn from
 * `rngFor(seed, 'init')`. Same options, same bytes.
 */
export async function createTinyModel(options: TinyModelOptions): Promise<void> {
  const parsed = optionsSchema.safeParse(options);
  if (!parsed.success) throw new Error(parsed.error.issues.map((i) => i.message).join('; '));
  const o = parsed.data;
  const hidden = o.hiddenSize ?? 64;
  const heads = o.numHeads ?? 4;
  const kvHeads = o.numKvHeads ?? Math.max(1, heads / 2);
  if (hidden % heads !== 0) throw new Error(`createTinyModel: hiddenSize ${hidden} must be divisible by numHeads ${heads}`);
  if (heads % kvHeads !== 0) throw new Error(`createTinyModel: numKvHeads ${kvHeads} must divide numHeads ${heads}`);
  const tok = await writeTinyTokenizer(o.dir, { kind: o.tokenizer ?? 'bpe', words: o.words });
  const config: Record<string, unknown> = {
    ...ARCH_CONFIG[o.arch],
    vocab_size: tok.vocabSize,
    hidden_size: hidden,
    intermediate_size: o.intermediateSize ?? 2 * hidden,
    num_hidden_layers: o.numLayers ?? 2,
    num_attention_heads: heads,
    num_key_value_heads: kvHeads,
    head_dim: hidden / heads,
    hidden_act: 'silu',
    max_position_embeddings: 4096,
    rms_norm_eps: 1e-6,
    tie_word_embeddings: o.tieWordEmbeddings ?? o.arch === 'qwen2',
    torch_dtype: 'float32',
    bos_token_id: tok.bosTokenId,
    eos_token_id: tok.eosTokenId,
    pad_token_id: tok.padTokenId,
    use_cache: true,
  };
  writeRandomCheckpoint(o.dir, config, o.seed);
}

/**
 * Writes config.json and a float32 model.safetensors with the weights `config` implies:
 * N(0, 0.02) matrices and embeddings, unit norm weights, zero biases, drawn in checkpoint order
 * from `rngFor(seed, 'init')`.
 */
export function writeRandomCheckpoint(dir: string, config: Record<string, unknown>, seed: number): void {
  const cfg = parseDecoderConfig(config, path.join(dir, 'config.json'));
  const rng = rngFor(seed, 'init');
  const tensors = expectedWeights(cfg).map((s) => {
    const n = s.shape.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    if (/norm\.weight$/.test(s.name)) data.fill(1);
    else if (!s.name.endsWith('.bias')) for (let i = 0; i < n; i++) data[i] = 0.02 * rng.normal();
    return { name: s.name, shape: s.shape, data };
  });
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config, null, 2) + '\n');
  writeSafetensors(path.join(dir, 'model.safetensors'), tensors, 'F32');
}
