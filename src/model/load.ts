import * as fs from 'node:fs';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { activeBackend, initBackend } from '../backend/index.js';
import { TfCausalLM } from './causal-lm.js';
import { parseDecoderConfig, parseGenerationEos } from './config.js';
import { loadCheckpointWeights } from './weights.js';

/** Options of {@link loadCausalLM}. */
export interface LoadCausalLMOptions {
  /** Ignore tensors the decoder does not use instead of failing. Default false. */
  allowExtraTensors?: boolean;
}

function readJson(file: string): unknown {
  if (!fs.existsSync(file)) throw new Error(`${file}: not found`);
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`${file}: not valid JSON (${(err as Error).message})`);
  }
}

/**
 * Loads a Hugging Face causal-LM directory (config.json, model.safetensors or a sharded
 * checkpoint with model.safetensors.index.json, optional generation_config.json) onto the current
 * tfjs backend. Call `initBackend()` first.
 */
export async function loadCausalLM(dir: string, options: LoadCausalLMOptions = {}): Promise<TfCausalLM> {
  if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) throw new Error(`${dir}: model directory not found`);
  const configFile = path.join(dir, 'config.json');
  const raw = readJson(configFile);
  const genFile = path.join(dir, 'generation_config.json');
  const genRaw = fs.existsSync(genFile) ? readJson(genFile) : null;
  const genEos = genRaw ? parseGenerationEos(genRaw, genFile) : undefined;
  const cfg = parseDecoderConfig(raw, configFile, genEos);
  const weights = loadCheckpointWeights(dir, cfg, options);
  // Variables are created next: when nobody chose a backend yet (initBackend or tf.setBackend),
  // start the default one rather than let tfjs pick its own with a console nag.
  if (activeBackend() === null && !backendIsSet()) await initBackend();
  return new TfCausalLM(
    cfg,
    raw as Record<string, unknown>,
    weights,
    genRaw as Record<string, unknown> | null,
  );
}

/** Whether tfjs already has a backend instance (set by initBackend or tf.setBackend directly). */
function backendIsSet(): boolean {
  return (tf.engine() as unknown as { backendInstance: unknown }).backendInstance != null;
}
