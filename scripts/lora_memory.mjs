#!/usr/bin/env node
// Memory of 2 agents + 1 critic on one checkpoint: full fine-tuning (3 copies + AdamW moments) vs
// LoRA (one shared frozen base + 3 adapters + moments for the adapters only), and one training
// step's time. usage: npm run build && node scripts/lora_memory.mjs [hidden] [layers]
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { createTinyModel, initBackend, loadCausalLM, loraSectionSchema, loraSettings, setBackendLogger } from '../dist/src/index.js';
import { AdamW } from '../dist/src/optim/adamw.js';

const hidden = Number(process.argv[2] ?? 512);
const layers = Number(process.argv[3] ?? 8);
setBackendLogger(null);
const backend = await initBackend(process.env.COMLRL_BACKEND ?? 'wasm');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-lora-mem-'));
await createTinyModel({ dir, arch: 'qwen3', seed: 1, hiddenSize: hidden, numLayers: layers, numHeads: hidden / 64, numKvHeads: hidden / 128, intermediateSize: 3 * hidden });
const settings = loraSettings(loraSectionSchema.parse({ r: 16, lora_alpha: 32, target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj'] }));
const MB = (b) => (b / 2 ** 20).toFixed(1);

async function measure(kind) {
  const before = tf.memory().numBytes;
  const models = [];
  for (let i = 0; i < 3; i++) models.push(await loadCausalLM(dir, kind === 'lora' ? { lora: { settings, seed: `m${i}` } } : {}));
  const weights = tf.memory().numBytes - before;
  const opts = models.map((m) => new AdamW(m.trainableVariables(), { lr: 1e-4 }));
  const prompts = Array.from({ length: 4 }, (_, i) => Array.from({ length: 32 }, (_, j) => (i * 7 + j) % 200 + 5));
  const comps = prompts.map((p) => p.slice(0, 32));
  const step = (m, o) => {
    const vars = m.trainableVariables();
    const { value, grads } = tf.variableGrads(() => tf.neg(tf.mean(m.scoreCompletions(prompts, comps).tokenLogProbs)), vars);
    o.step(vars.map((v) => grads[v.name]));
    value.dispose();
    tf.dispose(Object.values(grads));
  };
  step(models[0], opts[0]); // warm-up (moments are created on the first step)
  for (let i = 1; i < 3; i++) step(models[i], opts[i]);
  const total = tf.memory().numBytes - before;
  const t0 = performance.now();
  for (let k = 0; k < 3; k++) step(models[0], opts[0]);
  const stepMs = (performance.now() - t0) / 3;
  const params = models[0].trainableVariables().reduce((s, v) => s + v.size, 0);
  for (const o of opts) o.dispose();
  for (const m of models) m.dispose();
  return { kind, weightsMB: MB(weights), withMomentsMB: MB(total), trainableParamsPerModel: params, stepMs: stepMs.toFixed(0) };
}

const rows = [await measure('full'), await measure('lora')];
console.log(`backend ${backend}; qwen3 hidden ${hidden}, ${layers} layers; 3 models (2 agents + critic) on one checkpoint; LoRA r=16 on q,k,v,o; step = 4 rows × (32 prompt + 32 completion) tokens`);
console.table(rows);
fs.rmSync(dir, { recursive: true, force: true });
