/**
 * `npm run bench -- offload`: what keeping a frozen LoRA base's decoder layers in host memory
 * (`memory.offload_frozen_layers`) costs in time and saves in tensor memory. One `--like
 * qwen3-0.6b` checkpoint (Qwen3-0.6B's shapes and real tokenizer, random weights; `COMLRL_OFFLOAD_LIKE`
 * names another `tiny-model --like` preset), LoRA r = 16 on q, k, v, o, loaded twice in turn in
 * this process: layers on the backend, then offloaded. Each measures the tensors held after
 * loading, greedy generation of 16 tokens after a 200-token prompt (1 and 4 sequences, prefill
 * included), and forward + backward of one 300-token row (236 prompt + 64 completion tokens) with
 * layer recomputation (the offloaded base always recomputes; the resident one is made to, so the
 * two do the same arithmetic), best of 2. wasm unless COMLRL_BACKEND names another backend.
 * Figures only.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { initBackend, setBackendLogger } from '../src/backend/index.js';
import { unplannedPass } from '../src/memory/plan.js';
import { loraSectionSchema, loraSettings } from '../src/model/lora/config.js';
import { loadCausalLM } from '../src/model/load.js';
import { TINY_MODEL_PRESETS } from '../src/model/presets.js';
import { createTinyModel } from '../src/model/tiny.js';

/** One base's figures. */
export interface OffloadRun {
  offloaded: boolean;
  tensorBytes: number;
  generate1: number;
  generate4: number;
  trainRow: number;
}

const NEW_TOKENS = 16;
const PROMPT = Array.from({ length: 200 }, (_, i) => 100 + i);
const ROW_PROMPT = Array.from({ length: 236 }, (_, i) => 100 + i);
const ROW_COMPLETION = Array.from({ length: 64 }, (_, i) => 500 + i);

async function seconds(f: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await f();
  return (performance.now() - t0) / 1000;
}

async function measure(dir: string, offloaded: boolean): Promise<OffloadRun> {
  const before = tf.memory().numBytes;
  const settings = loraSettings(loraSectionSchema.parse({ r: 16, lora_alpha: 32, target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj'] }));
  const model = await loadCausalLM(dir, { lora: { settings, seed: 'bench-offload' }, memory: { offloadFrozenLayers: offloaded } });
  try {
    const tensorBytes = tf.memory().numBytes - before;
    const generate = (n: number) => seconds(() => model.generate(Array.from({ length: n }, () => PROMPT), { maxNewTokens: NEW_TOKENS, greedy: true, eosTokenIds: [] }));
    const generate1 = await generate(1);
    const generate4 = await generate(4);
    const recomputed = { ...unplannedPass(model.memory), recompute: true };
    const vars = model.trainableVariables();
    let trainRow = Infinity;
    for (let k = 0; k < 2; k++) {
      const t = await seconds(async () => {
        const { value, grads } = tf.variableGrads(() => tf.neg(tf.mean(model.scoreCompletions([ROW_PROMPT], [ROW_COMPLETION], recomputed).tokenLogProbs)) as tf.Scalar, vars);
        await value.data();
        value.dispose();
        tf.dispose(Object.values(grads));
      });
      trainRow = Math.min(trainRow, t);
    }
    return { offloaded, tensorBytes, generate1, generate4, trainRow };
  } finally {
    model.dispose();
  }
}

/** Runs both loads (see the file comment) and returns their figures, resident first. */
export async function benchOffload(): Promise<OffloadRun[]> {
  const wanted = process.env.COMLRL_OFFLOAD_LIKE ?? 'qwen3-0.6b';
  const like = TINY_MODEL_PRESETS.find((p) => p === wanted);
  if (!like) throw new Error(`COMLRL_OFFLOAD_LIKE must be one of ${TINY_MODEL_PRESETS.join(', ')}, got '${wanted}'`);
  setBackendLogger(null);
  // wasm unless COMLRL_BACKEND names another backend (initBackend reads it when given none).
  await initBackend(process.env.COMLRL_BACKEND ? undefined : 'wasm');
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-bench-offload-'));
  try {
    const dir = path.join(work, 'model');
    const info = await createTinyModel({ dir, like, seed: 0, tokenizer: 'qwen3' });
    console.error(`[bench offload] wrote a --like ${like} checkpoint (${(info.parameters / 1e9).toFixed(2)} B parameters)`);
    const out: OffloadRun[] = [];
    for (const offloaded of [false, true]) {
      const r = await measure(dir, offloaded);
      console.error(`[bench offload] layers ${offloaded ? 'in host memory' : 'on the backend'}: ${JSON.stringify(r)}`);
      out.push(r);
    }
    return out;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

/** Prints the figures and the offloaded / resident ratios as a Markdown table. */
export function printOffloadTable(runs: readonly OffloadRun[]): void {
  const [resident, offloaded] = runs;
  const gib = (b: number) => `${(b / 2 ** 30).toFixed(2)} GiB`;
  const row = (what: string, a: number, b: number, fmt: (v: number) => string) => console.log(`| ${what} | ${fmt(a)} | ${fmt(b)} | ${(b / a).toFixed(2)} |`);
  const s = (v: number) => `${v.toFixed(1)} s`;
  console.log(`\n## Frozen base layers in host memory (${process.env.COMLRL_OFFLOAD_LIKE ?? 'qwen3-0.6b'}, LoRA r=16, ${process.env.COMLRL_BACKEND ?? 'wasm'})\n`);
  console.log('| | layers on the backend | layers in host memory | ratio |');
  console.log('|---|---|---|---|');
  row('tensors held after loading', resident.tensorBytes, offloaded.tensorBytes, gib);
  row(`generate ${NEW_TOKENS} tokens, 1 sequence (200-token prompt)`, resident.generate1, offloaded.generate1, s);
  row(`generate ${NEW_TOKENS} tokens, 4 sequences`, resident.generate4, offloaded.generate4, s);
  row('forward + backward, one 300-token row, recomputation', resident.trainRow, offloaded.trainRow, s);
}
