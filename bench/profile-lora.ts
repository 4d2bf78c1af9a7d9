/**
 * `node dist/bench/profile-lora.js [modelDir]`: where the time of a real-size LoRA step goes. Loads
 * a `--like qwen3-0.6b` checkpoint (written to a temporary directory when none is given) as two
 * LoRA r = 16 models on one shared base and times, separately: generation of 1 and 4 sequences ×
 * 16 new tokens (ms per decode step), one scoring pass of 1 row × 300 tokens (PROFILE_WIDTH, of
 * which PROFILE_SCORED = 100 are scored), forward + backward of that row with and without layer
 * recomputation (PROFILE_PEAK=1: also the pass's peak tensor bytes, from tf.profile), and one
 * AdamW step on the adapter. PROFILE_ONLY=gen,score,bwd,bwdrc,adam picks parts. Prints figures
 * with the implied GFLOP/s (2 · parameters · tokens per forward). Figures only.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { initBackend } from '../src/backend/init.js';
import { createTinyModel } from '../src/model/tiny.js';
import { unplannedPass } from '../src/memory/plan.js';
import { loadCausalLM } from '../src/model/load.js';
import { AdamW } from '../src/optim/adamw.js';
import { rngFor } from '../src/util/rng.js';
import type { LoraSettings } from '../src/model/lora/config.js';

const LORA: LoraSettings = {
  r: 16,
  loraAlpha: 32,
  loraDropout: 0,
  targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj'],
  useRslora: false,
  layersToTransform: null,
  baseModelNameOrPath: null,
  revision: null,
};

const heapMiB = (): string => `${(tf.memory().numBytes / 2 ** 20).toFixed(0)} MiB tensors`;
const wasmHeapMiB = (): string => {
  const b = tf.backend() as unknown as { wasm?: { HEAPU8?: Uint8Array } };
  return b.wasm?.HEAPU8 ? `${(b.wasm.HEAPU8.length / 2 ** 20).toFixed(0)} MiB wasm heap` : '';
};

async function time<T>(label: string, f: () => Promise<T>): Promise<[T, number]> {
  const t0 = performance.now();
  const out = await f();
  const ms = performance.now() - t0;
  console.log(`${label}: ${ms.toFixed(0)} ms · ${heapMiB()} · ${wasmHeapMiB()}`);
  return [out, ms];
}

async function main(): Promise<void> {
  await initBackend(process.env.COMLRL_BACKEND as 'wasm' | undefined);
  let dir = process.argv[2];
  let tmp: string | null = null;
  if (!dir) {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-profile-'));
    dir = path.join(tmp, 'qwen3-0.6b');
    await createTinyModel({ dir, like: 'qwen3-0.6b', seed: 0, tokenizer: 'qwen3' });
  }
  const only = new Set((process.env.PROFILE_ONLY ?? 'gen,score,bwd,bwdrc,adam').split(','));
  try {
    const [model] = await time('load agent 0', () => loadCausalLM(dir, { lora: { settings: LORA, seed: 'a0' } }));
    const [model1] = await time('load agent 1 (shared base)', () => loadCausalLM(dir, { lora: { settings: LORA, seed: 'a1' } }));
    const cfg = model.decoderConfig;
    // Forward FLOPs per token: 2 · (linear weights + head); attention scores are small at 300 tokens.
    const layerParams = cfg.numLayers * (cfg.hiddenSize * (cfg.numHeads + 2 * cfg.numKvHeads) * cfg.headDim + cfg.numHeads * cfg.headDim * cfg.hiddenSize + 3 * cfg.hiddenSize * cfg.intermediateSize);
    const headParams = cfg.hiddenSize * cfg.vocabSize;
    console.log(`linear params ${(layerParams / 1e6).toFixed(0)} M, head ${(headParams / 1e6).toFixed(0)} M`);
    const rng = rngFor(0, 'sampling');
    const prompt = Array.from({ length: 40 }, (_, i) => 1000 + i * 7);
    if (only.has('gen')) {
      for (const n of [1, 4]) {
        const steps = 16;
        const [out, ms] = await time(`generate ${n} × ${steps} (prompt 40)`, () =>
          model.generate([prompt], { maxNewTokens: steps, numReturnSequences: n, temperature: 1, topP: 1, topK: 0, rng, eosTokenIds: [] }),
        );
        const per = ms / steps;
        const flops = 2 * (layerParams + headParams) * n;
        console.log(`  ${per.toFixed(0)} ms per step (incl. prefill), ${out.sequences[0].length} tokens; ${(flops / per / 1e6).toFixed(1)} GFLOP/s decode-equivalent`);
      }
    }
    const width = Number(process.env.PROFILE_WIDTH ?? 300);
    const scored = Math.min(width - 1, Number(process.env.PROFILE_SCORED ?? 100));
    const p = Array.from({ length: width - scored }, (_, i) => 100 + ((i * 13) % 5000));
    const c = Array.from({ length: scored }, (_, i) => 200 + ((i * 31) % 5000));
    const fwdFlops = 2 * layerParams * width + 2 * headParams * c.length;
    if (only.has('score')) {
      const [, ms] = await time(`score 1 row × ${width} tokens (${c.length} scored)`, () => model.tokenLogProbs([p], [c]));
      console.log(`  ${(fwdFlops / ms / 1e6).toFixed(1)} GFLOP/s`);
    }
    for (const rc of [true, false]) {
      if (!only.has(rc ? 'bwdrc' : 'bwd')) continue;
      const passMemory = { ...unplannedPass(model.memory), recompute: rc };
      const vars = model.trainableVariables();
      const pass = () => tf.variableGrads(() => tf.sum(model.scoreCompletions([p], [c], passMemory).tokenLogProbs) as tf.Scalar, vars);
      if (process.env.PROFILE_PEAK === '1') {
        // tfjs's own accounting of the pass (views count as buffers too); timed separately below.
        const held = tf.memory().numBytes;
        const info = await tf.profile(() => {
          const r = pass();
          tf.dispose([r.value, ...Object.values(r.grads)]);
        });
        console.log(`forward+backward 1 row × ${width}, recompute ${rc}: peak ${((info.peakBytes - held) / 2 ** 20).toFixed(0)} MiB of tensors above the ${(held / 2 ** 20).toFixed(0)} MiB held`);
      }
      const [g, ms] = await time(`forward+backward 1 row × ${width}, recompute ${rc}`, async () => {
        const r = pass();
        await r.value.data();
        return r;
      });
      console.log(`  ${((fwdFlops * (rc ? 4 : 3)) / ms / 1e6).toFixed(1)} GFLOP/s (counting ${rc ? 4 : 3}× forward)`);
      if (only.has('adam') && rc) {
        const opt = new AdamW(vars, { lr: 1e-5 });
        await time('AdamW step on the adapter', async () => {
          opt.step(g.grads);
          await vars[0].data();
        });
        opt.dispose();
      }
      g.value.dispose();
      tf.dispose(Object.values(g.grads));
    }
    model.dispose();
    model1.dispose();
    console.log(`peak RSS ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MiB`);
  } finally {
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
