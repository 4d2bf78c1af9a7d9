import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import type { DecoderConfig } from './config.js';
import { readSafetensorsHeader, readTensorNow, type F32Tensor, type SafetensorsHeader } from './safetensors.js';

/** A tensor the decoder expects: its Hugging Face name and shape. */
export interface WeightSpec {
  name: string;
  shape: number[];
}

/** The tensors a config implies, in checkpoint order (embeddings, layers, final norm, lm_head). */
export function expectedWeights(cfg: DecoderConfig): WeightSpec[] {
  const { hiddenSize: h, headDim: d, numHeads: nh, numKvHeads: kv, intermediateSize: i } = cfg;
  const out: WeightSpec[] = [{ name: 'model.embed_tokens.weight', shape: [cfg.vocabSize, h] }];
  for (let l = 0; l < cfg.numLayers; l++) {
    const p = `model.layers.${l}.`;
    out.push({ name: `${p}input_layernorm.weight`, shape: [h] });
    out.push({ name: `${p}self_attn.q_proj.weight`, shape: [nh * d, h] });
    if (cfg.qkvBias) out.push({ name: `${p}self_attn.q_proj.bias`, shape: [nh * d] });
    out.push({ name: `${p}self_attn.k_proj.weight`, shape: [kv * d, h] });
    if (cfg.qkvBias) out.push({ name: `${p}self_attn.k_proj.bias`, shape: [kv * d] });
    out.push({ name: `${p}self_attn.v_proj.weight`, shape: [kv * d, h] });
    if (cfg.qkvBias) out.push({ name: `${p}self_attn.v_proj.bias`, shape: [kv * d] });
    if (cfg.qkNorm) {
      out.push({ name: `${p}self_attn.q_norm.weight`, shape: [d] });
      out.push({ name: `${p}self_attn.k_norm.weight`, shape: [d] });
    }
    out.push({ name: `${p}self_attn.o_proj.weight`, shape: [h, nh * d] });
    if (cfg.outputBias) out.push({ name: `${p}self_attn.o_proj.bias`, shape: [h] });
    out.push({ name: `${p}post_attention_layernorm.weight`, shape: [h] });
    out.push({ name: `${p}mlp.gate_proj.weight`, shape: [i, h] });
    if (cfg.mlpBias) out.push({ name: `${p}mlp.gate_proj.bias`, shape: [i] });
    out.push({ name: `${p}mlp.up_proj.weight`, shape: [i, h] });
    if (cfg.mlpBias) out.push({ name: `${p}mlp.up_proj.bias`, shape: [i] });
    out.push({ name: `${p}mlp.down_proj.weight`, shape: [h, i] });
    if (cfg.mlpBias) out.push({ name: `${p}mlp.down_proj.bias`, shape: [h] });
  }
  out.push({ name: 'model.norm.weight', shape: [h] });
  if (!cfg.tieWordEmbeddings) out.push({ name: 'lm_head.weight', shape: [cfg.vocabSize, h] });
  return out;
}

const indexSchema = z.looseObject({ weight_map: z.record(z.string(), z.string()) });

/** The safetensors files of a checkpoint directory and which file holds each tensor name. */
export function checkpointFiles(dir: string): { files: string[]; indexFile: string | null } {
  const single = path.join(dir, 'model.safetensors');
  const index = path.join(dir, 'model.safetensors.index.json');
  if (fs.existsSync(index)) {
    let raw: unknown;
    try {
      raw = JSON.parse(fs.readFileSync(index, 'utf8'));
    } catch (err) {
      throw new Error(`${index}: not valid JSON (${(err as Error).message})`);
    }
    const parsed = indexSchema.safeParse(raw);
    if (!parsed.success) throw new Error(`${index}: field 'weight_map' must map tensor names to file names`);
    const files = [...new Set(Object.values(parsed.data.weight_map))].map((f) => path.join(dir, f));
    for (const f of files) if (!fs.existsSync(f)) throw new Error(`${f}: shard listed in ${index} is missing`);
    return { files, indexFile: index };
  }
  if (fs.existsSync(single)) return { files: [single], indexFile: null };
  throw new Error(`${dir}: no model.safetensors or model.safetensors.index.json (only safetensors checkpoints are supported)`);
}

// Tensors that real checkpoints may carry but the decoder recomputes or ties.
function ignorable(name: string, cfg: DecoderConfig): boolean {
  return name.endsWith('.rotary_emb.inv_freq') || (cfg.tieWordEmbeddings && name === 'lm_head.weight');
}

/**
 * Every expected tensor of a checkpoint directory as float32, checking that none is missing,
 * none is unexpected and every shape matches; errors name the file and tensor. The values are
 * read from the files when a tensor's `data` is accessed (see `fileBackedTensor`).
 */
export function loadCheckpointWeights(
  dir: string,
  cfg: DecoderConfig,
  options: { allowExtraTensors?: boolean } = {},
): Map<string, F32Tensor> {
  const specs = expectedWeights(cfg);
  const { files } = checkpointFiles(dir);
  const headers: SafetensorsHeader[] = files.map((f) => readSafetensorsHeader(f));
  const where = new Map<string, SafetensorsHeader>();
  for (const h of headers) {
    for (const name of h.entries.keys()) {
      const prev = where.get(name);
      if (prev) throw new Error(`${h.path}: tensor '${name}' also appears in ${prev.path}`);
      where.set(name, h);
    }
  }
  const expected = new Set(specs.map((s) => s.name));
  const missing = specs.filter((s) => !where.has(s.name)).map((s) => s.name);
  if (missing.length > 0) {
    const list = missing.slice(0, 5).join(', ') + (missing.length > 5 ? `, ... (${missing.length} in all)` : '');
    throw new Error(`${files.join(', ')}: missing tensors for ${cfg.architecture} config: ${list}`);
  }
  const extra = [...where.keys()].filter((n) => !expected.has(n) && !ignorable(n, cfg));
  if (extra.length > 0 && !options.allowExtraTensors) {
    const list = extra.slice(0, 5).map((n) => `${n} (in ${where.get(n)!.path})`).join(', ');
    throw new Error(`unexpected tensors not used by a ${cfg.architecture} decoder with this config.json: ${list}${extra.length > 5 ? `, ... (${extra.length} in all)` : ''}`);
  }
  for (const s of specs) {
    const h = where.get(s.name)!;
    const got = h.entries.get(s.name)!.shape;
    if (got.length !== s.shape.length || got.some((v, i) => v !== s.shape[i])) {
      throw new Error(`${h.path}: tensor '${s.name}' has shape [${got.join(',')}], config.json implies [${s.shape.join(',')}]`);
    }
  }
  const out = new Map<string, F32Tensor>();
  for (const s of specs) out.set(s.name, fileBackedTensor(where.get(s.name)!, s.name, s.shape));
  return out;
}

/**
 * A tensor whose `data` is read from its file on every access and not kept: the model
 * constructors read each weight once, upload it and drop it, so loading holds one weight on the
 * host at a time instead of the whole checkpoint (12 GB of float32 at 3 B parameters) next to the
 * tensors made from it.
 */
function fileBackedTensor(header: SafetensorsHeader, name: string, shape: number[]): F32Tensor {
  return {
    shape,
    get data(): Float32Array {
      return readTensorNow(header, name).data;
    },
  };
}
