import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/index.js';
import {
  assertLittleEndian,
  createTinyModel,
  f32ToBf16,
  f32ToF16,
  loadCausalLM,
  parseDecoderConfig,
  readSafetensors,
  readSafetensorsHeader,
  writeSafetensors,
} from '../src/model/index.js';

const FIXTURES = path.join(import.meta.dirname, 'fixtures', 'model');
let root: string;
let tiny: string;

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend('wasm');
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-io-'));
  tiny = path.join(root, 'tiny');
  await createTinyModel({ dir: tiny, arch: 'qwen3', seed: 2, tokenizer: 'word', hiddenSize: 16, numLayers: 1 });
});
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

/** A copy of the tiny checkpoint whose config.json and/or tensors a test then edits. */
function copyTiny(name: string): string {
  const d = path.join(root, name);
  fs.cpSync(tiny, d, { recursive: true });
  return d;
}

function editConfig(dir: string, edit: (c: Record<string, unknown>) => void): void {
  const f = path.join(dir, 'config.json');
  const c = JSON.parse(fs.readFileSync(f, 'utf8')) as Record<string, unknown>;
  edit(c);
  fs.writeFileSync(f, JSON.stringify(c));
}

function editTensors(dir: string, edit: (t: { name: string; shape: number[]; data: Float32Array }[]) => void): void {
  const f = path.join(dir, 'model.safetensors');
  const list = [...readSafetensors(f)].map(([name, t]) => ({ name, shape: t.shape, data: t.data }));
  edit(list);
  writeSafetensors(f, list, 'F32');
}

describe('dtype conversion (hand-derived bit patterns)', () => {
  it('float32 -> bfloat16 rounds to nearest even', () => {
    // 1 = 0x3f800000 -> 0x3f80; 1 + 2^-8 is exactly halfway (0x3f808000) -> even 0x3f80;
    // 1 + 3·2^-8 = 0x3f818000 halfway -> even 0x3f82; 1 + 2^-8 + 2^-20 is above halfway -> 0x3f81.
    const x = new Float32Array([1, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20, -2, NaN]);
    const b = f32ToBf16(x);
    expect(Array.from(b.slice(0, 5))).toEqual([0x3f80, 0x3f80, 0x3f82, 0x3f81, 0xc000]);
    expect((b[5] & 0x7f80) === 0x7f80 && (b[5] & 0x7f) !== 0).toBe(true);
  });

  it('float32 -> float16: normal, max, overflow, subnormal, rounding', () => {
    // 1 -> 0x3c00; 65504 (max half) -> 0x7bff; 1e5 -> +inf 0x7c00; 2^-24 (smallest subnormal) -> 0x0001;
    // 0.1 -> 0x2e66 (0.0999755859375); -0.5 -> 0xb800; 2^-26 rounds to 0.
    const h = f32ToF16(new Float32Array([1, 65504, 1e5, 2 ** -24, 0.1, -0.5, 2 ** -26]));
    expect(Array.from(h)).toEqual([0x3c00, 0x7bff, 0x7c00, 0x0001, 0x2e66, 0xb800, 0x0000]);
  });

  it('writes and reads F32 / BF16 / F16 files', () => {
    const data = new Float32Array([0.1, -3.25, 1e-3, 7]);
    for (const dtype of ['F32', 'BF16', 'F16'] as const) {
      const f = path.join(root, `t-${dtype}.safetensors`);
      writeSafetensors(f, [{ name: 'w', shape: [2, 2], data }], dtype);
      const back = readSafetensors(f).get('w')!;
      expect(back.shape).toEqual([2, 2]);
      if (dtype === 'F32') expect(Array.from(back.data)).toEqual(Array.from(data));
      // 0.1 in bf16 is 0x3dcd = 0.10009765625; in f16 0x2e66 = 0.0999755859375 (hand-derived above).
      if (dtype === 'BF16') expect(back.data[0]).toBe(0.10009765625);
      if (dtype === 'F16') expect(back.data[0]).toBe(0.0999755859375);
      expect(back.data[1]).toBe(-3.25);
      expect(back.data[3]).toBe(7);
      // The data section starts 8-byte aligned.
      expect(readSafetensorsHeader(f).dataStart % 8).toBe(0);
    }
  });
});

describe('save and load', () => {
  it('save -> loadCausalLM is bit-exact in float32 and gives identical log-probs', async () => {
    const m = await loadCausalLM(path.join(FIXTURES, 'qwen3-sharded-bf16'));
    const out = path.join(root, 'saved-f32');
    await m.save(out);
    const m2 = await loadCausalLM(out);
    try {
      expect(m2.weightNames()).toEqual(m.weightNames());
      const a = m.trainableVariables();
      const b = m2.trainableVariables();
      a.forEach((v, i) => expect(b[i].dataSync()).toEqual(v.dataSync()));
      const prompts = [[1, 2, 3], [40, 41]];
      const comps = [[7, 8, 9, 10], [2]];
      expect(await m2.tokenLogProbs(prompts, comps)).toEqual(await m.tokenLogProbs(prompts, comps));
      // Same layout a Hugging Face loader expects: one file, HF names, the original config keys.
      const header = readSafetensorsHeader(path.join(out, 'model.safetensors'));
      expect([...header.entries.keys()].sort()).toEqual([...m.weightNames()].sort());
      expect([...header.entries.values()].every((e) => e.dtype === 'F32')).toBe(true);
      const cfg = JSON.parse(fs.readFileSync(path.join(out, 'config.json'), 'utf8'));
      expect(cfg.model_type).toBe('qwen3');
      expect(cfg.torch_dtype).toBe('float32');
      expect(cfg.head_dim).toBe(24);
    } finally {
      m.dispose();
      m2.dispose();
    }
  });

  it('save with dtype bfloat16 writes BF16 tensors holding the rounded values', async () => {
    const m = await loadCausalLM(tiny);
    const out = path.join(root, 'saved-bf16');
    await m.save(out, { dtype: 'bfloat16' });
    const back = readSafetensors(path.join(out, 'model.safetensors'));
    const v = m.trainableVariables()[0];
    const expected = new Uint32Array(Array.from(f32ToBf16(v.dataSync() as Float32Array), (h) => h << 16));
    expect(new Uint32Array(back.get(m.weightNames()[0])!.data.buffer)).toEqual(expected);
    expect(readSafetensorsHeader(path.join(out, 'model.safetensors')).entries.get(m.weightNames()[0])!.dtype).toBe('BF16');
    m.dispose();
  });

  it('createTinyModel is deterministic in its seed', async () => {
    const again = path.join(root, 'tiny-again');
    const other = path.join(root, 'tiny-other');
    await createTinyModel({ dir: again, arch: 'qwen3', seed: 2, tokenizer: 'word', hiddenSize: 16, numLayers: 1 });
    await createTinyModel({ dir: other, arch: 'qwen3', seed: 3, tokenizer: 'word', hiddenSize: 16, numLayers: 1 });
    const bytes = (d: string): Buffer => fs.readFileSync(path.join(d, 'model.safetensors'));
    expect(bytes(again).equals(bytes(tiny))).toBe(true);
    expect(bytes(other).equals(bytes(tiny))).toBe(false);
    const cfg = JSON.parse(fs.readFileSync(path.join(tiny, 'config.json'), 'utf8'));
    const tokJson = JSON.parse(fs.readFileSync(path.join(tiny, 'tokenizer.json'), 'utf8'));
    const ids = [...Object.values(tokJson.model.vocab as Record<string, number>), ...tokJson.added_tokens.map((t: { id: number }) => t.id)];
    expect(cfg.vocab_size).toBe(Math.max(...ids) + 1);
  });

  it('reads eos ids from generation_config.json when present', async () => {
    const d = copyTiny('gen-eos');
    fs.writeFileSync(path.join(d, 'generation_config.json'), JSON.stringify({ eos_token_id: [3, 5] }));
    const m = await loadCausalLM(d);
    expect(m.eosTokenIds).toEqual([3, 5]);
    m.dispose();
  });
});

describe('config.json parsing', () => {
  const base = {
    model_type: 'llama',
    vocab_size: 10,
    hidden_size: 8,
    intermediate_size: 16,
    num_hidden_layers: 1,
    num_attention_heads: 2,
  };
  it('reads rope_theta from rope_parameters and llama3 scaling from either field', () => {
    expect(parseDecoderConfig({ ...base, rope_parameters: { rope_type: 'default', rope_theta: 1234 } }).ropeTheta).toBe(1234);
    const scaling = { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 };
    const a = parseDecoderConfig({ ...base, rope_theta: 5e5, rope_scaling: scaling });
    const b = parseDecoderConfig({ ...base, rope_parameters: { ...scaling, rope_theta: 5e5 } });
    expect(a.ropeScaling).toEqual({ type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 });
    expect(b).toEqual(a);
    expect(a.numKvHeads).toBe(2);
    expect(a.headDim).toBe(4);
    expect(a.tieWordEmbeddings).toBe(false);
  });
  it('qwen2 always has q/k/v bias; qwen3 has q/k norm and its own head_dim', () => {
    const q2 = parseDecoderConfig({ ...base, model_type: 'qwen2' });
    expect([q2.qkvBias, q2.outputBias, q2.qkNorm]).toEqual([true, false, false]);
    const q3 = parseDecoderConfig({ ...base, model_type: 'qwen3', head_dim: 6 });
    expect([q3.qkvBias, q3.qkNorm, q3.headDim]).toEqual([false, true, 6]);
  });
});

describe('errors name the file or field', () => {
  it('missing directory, config.json and weights', async () => {
    await expect(loadCausalLM(path.join(root, 'nope'))).rejects.toThrow(/nope: model directory not found/);
    const d = path.join(root, 'empty');
    fs.mkdirSync(d);
    await expect(loadCausalLM(d)).rejects.toThrow(/config\.json: not found/);
    fs.copyFileSync(path.join(tiny, 'config.json'), path.join(d, 'config.json'));
    await expect(loadCausalLM(d)).rejects.toThrow(/no model\.safetensors or model\.safetensors\.index\.json/);
  });

  it('unknown model_type', async () => {
    const d = copyTiny('mt');
    editConfig(d, (c) => (c.model_type = 'mistral'));
    await expect(loadCausalLM(d)).rejects.toThrow(/config\.json: field 'model_type': unknown model type 'mistral'/);
  });

  it('invalid config fields', () => {
    expect(() => parseDecoderConfig({ model_type: 'qwen3', vocab_size: 'x' }, 'cfg.json')).toThrow(/cfg\.json: field 'vocab_size'/);
    expect(() => parseDecoderConfig({ model_type: 'llama', vocab_size: 4, hidden_size: 4, intermediate_size: 4, num_hidden_layers: 1, num_attention_heads: 1, hidden_act: 'gelu' })).toThrow(/field 'hidden_act'/);
    expect(() =>
      parseDecoderConfig({ model_type: 'llama', vocab_size: 4, hidden_size: 4, intermediate_size: 4, num_hidden_layers: 1, num_attention_heads: 1, rope_scaling: { rope_type: 'yarn', factor: 4 } }),
    ).toThrow(/field 'rope_scaling\.rope_type': unsupported rope type 'yarn'/);
    expect(() =>
      parseDecoderConfig({ model_type: 'llama', vocab_size: 4, hidden_size: 4, intermediate_size: 4, num_hidden_layers: 1, num_attention_heads: 1, rope_scaling: { rope_type: 'llama3', factor: 4 } }),
    ).toThrow(/field 'rope_scaling\.low_freq_factor' is required/);
  });

  it('missing tensor', async () => {
    const d = copyTiny('missing');
    editTensors(d, (list) => list.splice(list.findIndex((t) => t.name === 'model.norm.weight'), 1));
    await expect(loadCausalLM(d)).rejects.toThrow(/model\.safetensors: missing tensors .*model\.norm\.weight/);
  });

  it('extra tensor', async () => {
    const d = copyTiny('extra');
    editTensors(d, (list) => list.push({ name: 'model.layers.0.mystery.weight', shape: [2], data: new Float32Array(2) }));
    await expect(loadCausalLM(d)).rejects.toThrow(/unexpected tensors .*model\.layers\.0\.mystery\.weight \(in .*model\.safetensors\)/);
    const m = await loadCausalLM(d, { allowExtraTensors: true });
    m.dispose();
  });

  it('shape mismatch', async () => {
    const d = copyTiny('shape');
    editTensors(d, (list) => {
      const t = list.find((x) => x.name === 'model.layers.0.self_attn.q_norm.weight')!;
      t.shape = [t.shape[0] / 2, 2];
    });
    await expect(loadCausalLM(d)).rejects.toThrow(/model\.safetensors: tensor 'model\.layers\.0\.self_attn\.q_norm\.weight' has shape \[2,2\], config\.json implies \[4\]/);
  });

  it('truncated file and bad header', async () => {
    const d = copyTiny('trunc');
    const f = path.join(d, 'model.safetensors');
    fs.truncateSync(f, fs.statSync(f).size - 10);
    await expect(loadCausalLM(d)).rejects.toThrow(/trunc\/model\.safetensors: truncated file/);
    fs.writeFileSync(f, Buffer.from([1, 2, 3]));
    await expect(loadCausalLM(d)).rejects.toThrow(/model\.safetensors: truncated file/);
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(4n);
    fs.writeFileSync(f, Buffer.concat([len, Buffer.from('{{{{')]));
    await expect(loadCausalLM(d)).rejects.toThrow(/model\.safetensors: header is not valid JSON/);
  });

  it('unsupported dtype names the tensor', () => {
    const f = path.join(root, 'i64.safetensors');
    const header = Buffer.from(JSON.stringify({ ids: { dtype: 'I64', shape: [1], data_offsets: [0, 8] } }).padEnd(48));
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(header.length));
    fs.writeFileSync(f, Buffer.concat([len, header, Buffer.alloc(8)]));
    expect(() => readSafetensors(f)).toThrow(/i64\.safetensors: tensor 'ids': unsupported dtype I64/);
  });

  it('missing shard of an index', async () => {
    const d = path.join(root, 'shards');
    fs.cpSync(path.join(FIXTURES, 'qwen3-sharded-bf16'), d, { recursive: true });
    fs.rmSync(path.join(d, 'model-00002-of-00003.safetensors'));
    await expect(loadCausalLM(d)).rejects.toThrow(/model-00002-of-00003\.safetensors: shard listed in .*model\.safetensors\.index\.json is missing/);
  });

  it('big-endian host', () => {
    expect(() => assertLittleEndian('BE')).toThrow(/big-endian/);
    expect(() => assertLittleEndian('LE')).not.toThrow();
  });

  it('scoring input errors', async () => {
    const m = await loadCausalLM(tiny);
    expect(() => m.scoreCompletions([[1]], [[1], [2]])).toThrow(/1 prompts but 2 completions/);
    expect(() => m.scoreCompletions([[]], [[1]])).toThrow(/promptIds\[0\] is empty/);
    await expect(m.tokenLogProbs([[1]], [[m.vocabSize]])).rejects.toThrow(/token id .* outside/);
    // Empty completions give empty rows, not errors.
    expect(await m.tokenLogProbs([[1], [2]], [[], [3]])).toEqual([[], [expect.any(Number)]]);
    m.dispose();
    expect(() => m.trainableVariables()).toThrow(/disposed/);
  });
});
