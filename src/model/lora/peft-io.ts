/**
 * PEFT's adapter directory: `adapter_config.json` + `adapter_model.safetensors` with keys
 * `base_model.model.<module path>.lora_A.weight` ([r, in]) / `.lora_B.weight` ([out, r]), which
 * PEFT's `PeftModel.from_pretrained` and vLLM's LoRA loader read.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import type { F32Tensor, SafetensorsDtype } from '../safetensors.js';
import { readSafetensors, writeSafetensors } from '../safetensors.js';
import type { LoraAdapter } from './adapter.js';
import { adapterConfigJson, parseAdapterConfig, type LoraSettings } from './config.js';

/** PEFT's file names. */
export const ADAPTER_CONFIG = 'adapter_config.json';
export const ADAPTER_WEIGHTS = 'adapter_model.safetensors';
/** comlrl's own state beside the PEFT files (the dropout stream position, for exact resume); PEFT ignores it. */
export const ADAPTER_STATE = 'comlrl_adapter_state.json';

const count = z.number().int().min(0);
const stateSchema = z.object({ dropout_seed: count, dropout_passes: count });

/** Whether `dir` holds a PEFT adapter. */
export function isAdapterDir(dir: string): boolean {
  return fs.existsSync(path.join(dir, ADAPTER_CONFIG));
}

/** A saved adapter read back. */
export interface AdapterFiles {
  readonly settings: LoraSettings;
  /** Tensors by PEFT key, float32. */
  readonly tensors: Map<string, F32Tensor>;
  /** The safetensors file (for error messages). */
  readonly file: string;
  /** The dropout stream at the save (comlrl's state file); null when the file is absent. */
  readonly dropout: { readonly seed: number; readonly passes: number } | null;
}

/** Reads an adapter directory; errors name the file at fault. */
export function readAdapterDir(dir: string): AdapterFiles {
  if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) throw new Error(`${dir}: adapter directory not found`);
  const cfgFile = path.join(dir, ADAPTER_CONFIG);
  if (!fs.existsSync(cfgFile)) throw new Error(`${dir}: no ${ADAPTER_CONFIG} (not a PEFT adapter directory)`);
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(cfgFile, 'utf8'));
  } catch (err) {
    throw new Error(`${cfgFile}: not valid JSON (${(err as Error).message})`);
  }
  const settings = parseAdapterConfig(raw, cfgFile);
  const file = path.join(dir, ADAPTER_WEIGHTS);
  if (!fs.existsSync(file)) {
    const bin = fs.existsSync(path.join(dir, 'adapter_model.bin'));
    throw new Error(`${dir}: no ${ADAPTER_WEIGHTS}${bin ? ' (adapter_model.bin is a pickle; convert it to safetensors with PEFT: model.save_pretrained(dir, safe_serialization=True))' : ''}`);
  }
  const read = readSafetensors(file);
  // PEFT strips the adapter name ('default') when saving; accept an unstripped file too.
  const tensors = new Map<string, F32Tensor>();
  for (const [k, v] of read) tensors.set(k.replace(/\.lora_([AB])\.default\.weight$/, '.lora_$1.weight'), v);
  let dropout: AdapterFiles['dropout'] = null;
  const stateFile = path.join(dir, ADAPTER_STATE);
  if (fs.existsSync(stateFile)) {
    let raw: unknown;
    try {
      raw = JSON.parse(fs.readFileSync(stateFile, 'utf8'));
    } catch (err) {
      throw new Error(`${stateFile}: not valid JSON (${(err as Error).message})`);
    }
    const p = stateSchema.safeParse(raw);
    if (!p.success) throw new Error(`${stateFile}: dropout_seed and dropout_passes must be integers >= 0`);
    dropout = { seed: p.data.dropout_seed, passes: p.data.dropout_passes };
  }
  return { settings, tensors, file, dropout };
}

/**
 * Writes `adapter_config.json` and `adapter_model.safetensors` (PEFT's names and layout) into
 * `dir`, plus comlrl's small state file when dropout is on.
 */
export async function writeAdapterDir(
  dir: string,
  adapter: LoraAdapter,
  baseModelNameOrPath: string,
  dtype: SafetensorsDtype = 'F32',
): Promise<void> {
  fs.mkdirSync(dir, { recursive: true });
  const settings: LoraSettings = { ...adapter.settings, baseModelNameOrPath: adapter.settings.baseModelNameOrPath ?? baseModelNameOrPath };
  const leaves = [...new Set(adapter.modules.map((m) => m.slice(m.lastIndexOf('.') + 1)))];
  writeSafetensors(path.join(dir, ADAPTER_WEIGHTS), await adapter.namedTensors(), dtype);
  fs.writeFileSync(path.join(dir, ADAPTER_CONFIG), JSON.stringify(adapterConfigJson(settings, leaves), null, 2) + '\n');
  const stateFile = path.join(dir, ADAPTER_STATE);
  if (adapter.settings.loraDropout > 0) {
    fs.writeFileSync(stateFile, JSON.stringify({ dropout_seed: adapter.dropoutSeed, dropout_passes: adapter.dropoutPasses }) + '\n');
  }
  else if (fs.existsSync(stateFile)) fs.rmSync(stateFile);
  // A full model saved here before would shadow the adapter for loaders that look for config.json first.
  for (const stale of ['model.safetensors', 'model.safetensors.index.json']) {
    const f = path.join(dir, stale);
    if (fs.existsSync(f)) fs.rmSync(f);
  }
}
