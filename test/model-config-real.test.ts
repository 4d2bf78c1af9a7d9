/**
 * The config parser on config.json files as published checkpoints ship them (the papers' agents
 * and the Llama-family models users bring). Expected values are read off the files by hand:
 * head_dim = hidden_size / num_attention_heads where the file has no head_dim; Qwen2 always has
 * q/k/v biases; Qwen3 has per-head q/k RMSNorm.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseDecoderConfig } from '../src/model/config.js';

const dir = join(__dirname, 'fixtures/model/real-configs');
const parse = (name: string) => parseDecoderConfig(JSON.parse(readFileSync(join(dir, name), 'utf8')), name);

describe('real checkpoint configs', () => {
  it('Qwen3-1.7B: head_dim 128 independent of hidden 2048 / 16 heads, q/k norm, tied, no bias', () => {
    expect(parse('qwen3-1.7b.json')).toMatchObject({
      architecture: 'qwen3', vocabSize: 151936, hiddenSize: 2048, numLayers: 28, numHeads: 16, numKvHeads: 8,
      headDim: 128, qkNorm: true, qkvBias: false, tieWordEmbeddings: true, ropeTheta: 1000000, ropeScaling: null, eosTokenIds: [151645],
    });
  });

  it('Qwen3-4B-Instruct-2507 (layer_types, rope_theta 5e6)', () => {
    expect(parse('qwen3-4b-2507.json')).toMatchObject({ architecture: 'qwen3', hiddenSize: 2560, numHeads: 32, headDim: 128, numLayers: 36, ropeTheta: 5000000 });
  });

  it('Qwen2.5-3B: q/k/v bias without an attention_bias key, head_dim 2048 / 16 = 128, sliding window off', () => {
    expect(parse('qwen2.5-3b.json')).toMatchObject({
      architecture: 'qwen2', hiddenSize: 2048, numHeads: 16, numKvHeads: 2, headDim: 128, qkvBias: true, qkNorm: false, tieWordEmbeddings: true,
    });
  });

  it('Llama-3.2-1B: llama3 rope scaling, eos list, head_dim 64', () => {
    expect(parse('llama-3.2-1b.json')).toMatchObject({
      architecture: 'llama', vocabSize: 128256, headDim: 64, numHeads: 32, numKvHeads: 8, mlpBias: false, qkvBias: false,
      ropeTheta: 500000, eosTokenIds: [128001, 128008, 128009],
      ropeScaling: { type: 'llama3', factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 },
    });
  });

  it('SmolLM2-135M: 9 heads of 576 / 9 = 64, 3 KV heads, rope_scaling null', () => {
    expect(parse('smollm2-135m.json')).toMatchObject({ architecture: 'llama', hiddenSize: 576, numHeads: 9, numKvHeads: 3, headDim: 64, ropeScaling: null, eosTokenIds: [2] });
  });
});
