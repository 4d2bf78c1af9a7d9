import * as fs from 'node:fs';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { activeBackend, initBackend } from '../backend/index.js';
import { TfCausalLM } from './causal-lm.js';
import { parseDecoderConfig, parseGenerationEos, type DecoderConfig } from './config.js';
import { parseGenerationSampling } from '../sampling/defaults.js';
import { LoraAdapter } from './lora/adapter.js';
import { acquireFrozenBase, baseKey, EMBED_KEY, FrozenBase, HEAD_KEY, isLayerLinear } from './lora/base.js';
import type { LoraSettings } from './lora/config.js';
import { isAdapterDir, readAdapterDir } from './lora/peft-io.js';
import { numel, type F32Tensor } from './safetensors.js';
import { loadCheckpointWeights } from './weights.js';
import { MemoryBudgetError } from '../memory/errors.js';
import { freeTensorMemoryFor } from '../memory/plan.js';
import { DEFAULT_MEMORY_SETTINGS, offloadsFrozenLayers, type MemorySettings } from '../memory/settings.js';

/**
 * Refuses, before any tensor is made, weights that alone would not fit the memory budget next to
 * the tensors already held (on wasm the allocation would otherwise abort the process).
 */
function checkWeightsFit(
  dir: string,
  weights: ReadonlyMap<string, F32Tensor>,
  what: string,
  memory: Readonly<MemorySettings>,
  resident: (name: string) => boolean = () => true,
  bytesPerElement: (name: string) => 2 | 4 = () => 4,
): void {
  let floats = 0;
  let need = 0;
  // From the shapes: reading `data` would read the file.
  for (const [name, w] of weights) {
    if (!resident(name)) continue;
    floats += numel(w.shape);
    need += numel(w.shape) * bytesPerElement(name);
  }
  const held = need === floats * 4 ? 'as float32' : 'with the matrix weights in bfloat16';
  const free = freeTensorMemoryFor(need, memory);
  if (need > free.bytes) throw new MemoryBudgetError(`loading ${what} ${dir} (${(floats / 1e6).toFixed(0)} M parameters ${held})`, need, free.bytes, free.budget, free.ram);
}

/** Options of {@link loadCausalLM}. */
export interface LoadCausalLMOptions {
  /** Ignore tensors the decoder does not use instead of failing. Default false. */
  allowExtraTensors?: boolean;
  /**
   * A PEFT LoRA adapter directory (adapter_config.json + adapter_model.safetensors) to put on the
   * model: the base is then frozen and shared with every other LoRA model of the same directory,
   * and only the adapter trains.
   */
  adapter?: string;
  /**
   * A fresh LoRA adapter with these settings (A seeded from `seed`, B zeros), on the shared frozen
   * base. Ignored when `adapter` is given.
   */
  lora?: { readonly settings: LoraSettings; readonly seed: string };
  /**
   * Memory settings (defaults for what is left out): the budget the weights must fit, whether a
   * frozen LoRA base offloads its layers and in which dtype it is held (read when the base is
   * first loaded), and what the model then plans every pass with (`CausalLM.memory`).
   */
  memory?: Partial<MemorySettings>;
}

function readJson(file: string): unknown {
  if (!fs.existsSync(file)) throw new Error(`${file}: not found`);
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`${file}: not valid JSON (${(err as Error).message})`);
  }
}

interface Checkpoint {
  cfg: DecoderConfig;
  raw: Record<string, unknown>;
  genRaw: Record<string, unknown> | null;
  weights: Map<string, F32Tensor>;
}

function readCheckpoint(dir: string, options: LoadCausalLMOptions): Checkpoint {
  if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) throw new Error(`${dir}: model directory not found`);
  const configFile = path.join(dir, 'config.json');
  const raw = readJson(configFile);
  const genFile = path.join(dir, 'generation_config.json');
  const genRaw = fs.existsSync(genFile) ? readJson(genFile) : null;
  const genEos = genRaw ? parseGenerationEos(genRaw, genFile) : undefined;
  // Its sampling fields are read again by the model; checked now, before any weight is read.
  if (genRaw) parseGenerationSampling(genRaw, genFile);
  const cfg = parseDecoderConfig(raw, configFile, genEos);
  const weights = loadCheckpointWeights(dir, cfg, { allowExtraTensors: options.allowExtraTensors });
  return { cfg, raw: raw as Record<string, unknown>, genRaw: genRaw as Record<string, unknown> | null, weights };
}

/** The base directory an adapter names (`base_model_name_or_path`), as a local directory. */
function adapterBaseDir(adapterDir: string): string {
  const { settings } = readAdapterDir(adapterDir);
  const name = settings.baseModelNameOrPath;
  const file = path.join(adapterDir, 'adapter_config.json');
  if (!name) throw new Error(`${file}: base_model_name_or_path is empty; load the base with loadCausalLM(baseDir, { adapter: '${adapterDir}' })`);
  for (const cand of [name, path.resolve(adapterDir, name)]) {
    if (fs.existsSync(path.join(cand, 'config.json'))) return cand;
  }
  throw new Error(`${file}: base model '${name}' is not a local model directory (comlrl does not download); load it with loadCausalLM(baseDir, { adapter: '${adapterDir}' })`);
}

/**
 * Loads a Hugging Face causal-LM directory (config.json, model.safetensors or a sharded
 * checkpoint with model.safetensors.index.json, optional generation_config.json) onto the current
 * tfjs backend. Call `initBackend()` first.
 *
 * With `adapter` or `lora` the model is a LoRA model: its base weights are frozen and shared by
 * every LoRA model loaded from the same directory (loaded once, freed with the last model), and
 * only the adapter trains. A directory holding only a PEFT adapter loads onto the base its
 * `adapter_config.json` names. Whether that base keeps its decoder layers' weights in host memory
 * (uploaded one layer at a time per pass) follows `options.memory.offloadFrozenLayers`, read when
 * the base is first loaded.
 */
export async function loadCausalLM(dir: string, options: LoadCausalLMOptions = {}): Promise<TfCausalLM> {
  if (options.adapter === undefined && !fs.existsSync(path.join(dir, 'config.json')) && isAdapterDir(dir)) {
    return loadCausalLM(adapterBaseDir(dir), { ...options, adapter: dir });
  }
  const memory: Readonly<MemorySettings> = { ...DEFAULT_MEMORY_SETTINGS, ...options.memory };
  if (options.adapter !== undefined || options.lora !== undefined) return loadLora(dir, options, memory);
  const { cfg, raw, weights, genRaw } = readCheckpoint(dir, options);
  // Variables are created next: when nobody chose a backend yet (initBackend or tf.setBackend),
  // start the default one rather than let tfjs pick its own with a console nag.
  await ensureBackend();
  checkWeightsFit(dir, weights, 'the model', memory);
  return new TfCausalLM(cfg, raw, weights, genRaw, memory, path.join(dir, 'generation_config.json'));
}

async function ensureBackend(): Promise<void> {
  if (activeBackend() === null && !backendIsSet()) await initBackend();
}

async function loadLora(dir: string, options: LoadCausalLMOptions, memory: Readonly<MemorySettings>): Promise<TfCausalLM> {
  // Read the adapter first: a bad adapter should fail before a large base is loaded.
  const saved = options.adapter !== undefined ? readAdapterDir(options.adapter) : null;
  await ensureBackend();
  const bfloat16 = memory.frozenBaseDtype === 'bfloat16' && activeBackend() === 'torch';
  const key = baseKey(dir, { allowExtraTensors: options.allowExtraTensors ?? false, ...(bfloat16 ? { dtype: 'bfloat16' } : {}) });
  const base = await acquireFrozenBase(key, async () => {
    const c = readCheckpoint(dir, options);
    // Held in bfloat16: the layers' linear weights and the head (a tied head is the embedding).
    const halved = (name: string): boolean => bfloat16 && (isLayerLinear(name) || name === HEAD_KEY || (c.cfg.tieWordEmbeddings && name === EMBED_KEY));
    let layerBytes = 0;
    for (const [name, w] of c.weights) if (isLayerLinear(name)) layerBytes += (halved(name) ? 2 : 4) * numel(w.shape);
    const offloadLayers = offloadsFrozenLayers(layerBytes, memory);
    checkWeightsFit(dir, c.weights, 'the frozen LoRA base', memory, (name) => !(offloadLayers && isLayerLinear(name)), (name) => (halved(name) ? 2 : 4));
    return new FrozenBase(key, dir, c.cfg, c.raw, c.genRaw, c.weights, { offloadLayers, bfloat16 });
  });
  let adapter: LoraAdapter;
  try {
    if (saved) {
      adapter = new LoraAdapter(saved.settings, base.decoderConfig, { tensors: saved.tensors, file: saved.file, ...(saved.dropout ? { dropout: saved.dropout } : {}) });
    } else {
      adapter = new LoraAdapter(options.lora!.settings, base.decoderConfig, { seed: options.lora!.seed });
    }
  } catch (err) {
    base.release();
    throw err;
  }
  return new TfCausalLM(base.decoderConfig, base.config, { base, adapter }, base.generationConfig, memory, path.join(base.dir, 'generation_config.json'));
}

/** Whether tfjs already has a backend instance (set by initBackend or tf.setBackend directly). */
function backendIsSet(): boolean {
  return (tf.engine() as unknown as { backendInstance: unknown }).backendInstance != null;
}
