import { z } from 'zod';
import type { Architecture } from './types.js';

/** RoPE frequency scaling; `null` means plain RoPE. */
export type RopeScaling =
  | { type: 'linear'; factor: number }
  | {
      type: 'llama3';
      factor: number;
      lowFreqFactor: number;
      highFreqFactor: number;
      originalMaxPositionEmbeddings: number;
    };

/** The decoder hyper-parameters comlrl needs, normalised from a config.json of any supported family. */
export interface DecoderConfig {
  architecture: Architecture;
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  rmsNormEps: number;
  ropeTheta: number;
  ropeScaling: RopeScaling | null;
  tieWordEmbeddings: boolean;
  /** Bias on q/k/v projections. */
  qkvBias: boolean;
  /** Bias on the attention output projection. */
  outputBias: boolean;
  /** Bias on gate/up/down projections (Llama `mlp_bias`). */
  mlpBias: boolean;
  /** Qwen3 per-head RMSNorm on queries and keys. */
  qkNorm: boolean;
  eosTokenIds: number[];
  /**
   * config.json's `pad_token_id`: the embedding's `padding_idx` in transformers, whose row gets no
   * gradient from the positions where it is looked up (the tied head still trains it). null: none.
   */
  padTokenId: number | null;
  maxPositionEmbeddings: number | null;
}

const SUPPORTED: readonly Architecture[] = ['qwen2', 'qwen3', 'llama'];

const posInt = z.number().int().positive();
const tokenIds = z.union([z.number().int().nonnegative(), z.array(z.number().int().nonnegative())]).nullable().optional();

const ropeObject = z.looseObject({
  rope_type: z.string().optional(),
  type: z.string().optional(),
  rope_theta: z.number().positive().optional(),
  factor: z.number().positive().optional(),
  low_freq_factor: z.number().positive().optional(),
  high_freq_factor: z.number().positive().optional(),
  original_max_position_embeddings: posInt.optional(),
});

const configSchema = z.looseObject({
  model_type: z.string(),
  vocab_size: posInt,
  hidden_size: posInt,
  intermediate_size: posInt,
  num_hidden_layers: posInt,
  num_attention_heads: posInt,
  num_key_value_heads: posInt.nullable().optional(),
  head_dim: posInt.nullable().optional(),
  hidden_act: z.string().optional(),
  rms_norm_eps: z.number().positive().optional(),
  rope_theta: z.number().positive().nullable().optional(),
  rope_scaling: ropeObject.nullable().optional(),
  rope_parameters: ropeObject.nullable().optional(),
  tie_word_embeddings: z.boolean().optional(),
  attention_bias: z.boolean().optional(),
  mlp_bias: z.boolean().optional(),
  max_position_embeddings: posInt.nullable().optional(),
  eos_token_id: tokenIds,
  pad_token_id: tokenIds,
});

function formatIssues(file: string, error: z.ZodError): string {
  return error.issues
    .map((i) => `${file}: field '${i.path.map(String).join('.') || '(root)'}': ${i.message}`)
    .join('; ');
}

function idList(v: number | number[] | null | undefined): number[] {
  if (v === null || v === undefined) return [];
  return Array.isArray(v) ? v : [v];
}

function parseRope(
  file: string,
  field: 'rope_scaling' | 'rope_parameters',
  raw: z.infer<typeof ropeObject> | null | undefined,
): RopeScaling | null {
  if (!raw) return null;
  const kind = raw.rope_type ?? raw.type ?? 'default';
  const need = (key: keyof typeof raw): number => {
    const v = raw[key];
    if (typeof v !== 'number') throw new Error(`${file}: field '${field}.${String(key)}' is required for rope type '${kind}'`);
    return v;
  };
  switch (kind) {
    case 'default':
      return null;
    case 'linear':
      return { type: 'linear', factor: need('factor') };
    case 'llama3':
      return {
        type: 'llama3',
        factor: need('factor'),
        lowFreqFactor: need('low_freq_factor'),
        highFreqFactor: need('high_freq_factor'),
        originalMaxPositionEmbeddings: need('original_max_position_embeddings'),
      };
    default:
      throw new Error(`${file}: field '${field}.rope_type': unsupported rope type '${kind}' (supported: default, linear, llama3)`);
  }
}

/**
 * Validates a parsed config.json and normalises it. `file` names the source in error messages.
 * `generationEos` (from generation_config.json) takes precedence over config.json's eos ids.
 */
export function parseDecoderConfig(raw: unknown, file = 'config.json', generationEos?: number[]): DecoderConfig {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new Error(`${file}: expected a JSON object`);
  const mt = (raw as { model_type?: unknown }).model_type;
  if (typeof mt !== 'string') throw new Error(`${file}: field 'model_type' is missing (expected one of ${SUPPORTED.join(', ')})`);
  if (!(SUPPORTED as readonly string[]).includes(mt)) {
    throw new Error(`${file}: field 'model_type': unknown model type '${mt}' (supported: ${SUPPORTED.join(', ')})`);
  }
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) throw new Error(formatIssues(file, parsed.error));
  const c = parsed.data;
  const architecture = mt as Architecture;
  if (c.hidden_act !== undefined && c.hidden_act !== 'silu') {
    throw new Error(`${file}: field 'hidden_act': unsupported activation '${c.hidden_act}' (only 'silu')`);
  }
  const numHeads = c.num_attention_heads;
  const numKvHeads = c.num_key_value_heads ?? numHeads;
  if (numHeads % numKvHeads !== 0) {
    throw new Error(`${file}: field 'num_key_value_heads': ${numKvHeads} does not divide num_attention_heads ${numHeads}`);
  }
  const headDim = c.head_dim ?? c.hidden_size / numHeads;
  if (!Number.isInteger(headDim)) {
    throw new Error(`${file}: field 'head_dim' is missing and hidden_size ${c.hidden_size} is not divisible by num_attention_heads ${numHeads}`);
  }
  if (headDim % 2 !== 0) throw new Error(`${file}: field 'head_dim': ${headDim} must be even for RoPE`);
  const ropeTheta = c.rope_theta ?? c.rope_parameters?.rope_theta ?? 10000;
  // Newer configs put scaling inside rope_parameters; older ones use rope_scaling.
  const ropeScaling = c.rope_scaling ? parseRope(file, 'rope_scaling', c.rope_scaling) : parseRope(file, 'rope_parameters', c.rope_parameters);
  const attentionBias = c.attention_bias ?? false;
  const eos = generationEos && generationEos.length > 0 ? generationEos : idList(c.eos_token_id);
  return {
    architecture,
    vocabSize: c.vocab_size,
    hiddenSize: c.hidden_size,
    intermediateSize: c.intermediate_size,
    numLayers: c.num_hidden_layers,
    numHeads,
    numKvHeads,
    headDim,
    rmsNormEps: c.rms_norm_eps ?? 1e-6,
    ropeTheta,
    ropeScaling,
    tieWordEmbeddings: c.tie_word_embeddings ?? false,
    // Qwen2 always has q/k/v bias (its attention hard-codes it); the others follow attention_bias.
    qkvBias: architecture === 'qwen2' ? true : attentionBias,
    outputBias: architecture === 'qwen2' ? false : attentionBias,
    mlpBias: architecture === 'llama' ? (c.mlp_bias ?? false) : false,
    qkNorm: architecture === 'qwen3',
    eosTokenIds: [...new Set(eos)],
    padTokenId: typeof c.pad_token_id === 'number' && c.pad_token_id < c.vocab_size ? c.pad_token_id : null,
    maxPositionEmbeddings: c.max_position_embeddings ?? null,
  };
}

const generationSchema = z.looseObject({ eos_token_id: tokenIds });

/** Reads eos ids out of a parsed generation_config.json (empty when it has none). */
export function parseGenerationEos(raw: unknown, file = 'generation_config.json'): number[] {
  const parsed = generationSchema.safeParse(raw);
  if (!parsed.success) throw new Error(formatIssues(file, parsed.error));
  return idList(parsed.data.eos_token_id);
}
