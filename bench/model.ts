import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { activeBackend, initBackend, torchBackend } from '../src/backend/index.js';
import type { MemorySettings } from '../src/memory/settings.js';
import { loraSectionSchema, loraSettings } from '../src/model/lora/config.js';
import { loadCausalLM, writeRandomCheckpoint, type TfCausalLM } from '../src/model/index.js';
import { AdamW } from '../src/optim/index.js';
import { createRng } from '../src/util/rng.js';

/** Shapes of the benchmark (issue 2): a ~4 M-parameter Qwen3, batch 4 × 128 tokens. */
export const BENCH_SHAPE = { vocab: 4096, hidden: 256, layers: 4, heads: 4, kvHeads: 2, headDim: 64, intermediate: 768, batch: 4, seq: 128, newTokens: 32 };

/** config.json of the benchmark model (also what ../shared/reference/torch_bench.py reads). */
export function benchConfig(): Record<string, unknown> {
  const s = BENCH_SHAPE;
  return {
    architectures: ['Qwen3ForCausalLM'],
    model_type: 'qwen3',
    vocab_size: s.vocab,
    hidden_size: s.hidden,
    intermediate_size: s.intermediate,
    num_hidden_layers: s.layers,
    num_attention_heads: s.heads,
    num_key_value_heads: s.kvHeads,
    head_dim: s.headDim,
    hidden_act: 'silu',
    rms_norm_eps: 1e-6,
    rope_theta: 1000000,
    max_position_embeddings: 4096,
    // Tied, as the small Qwen3 checkpoints (0.6B-4B) are: 4.2 M parameters.
    tie_word_embeddings: true,
    attention_bias: false,
    torch_dtype: 'float32',
    eos_token_id: 1,
  };
}

/** Writes the benchmark checkpoint to `dir` (seeded, float32). */
export function writeBenchModel(dir: string, seed = 0): void {
  writeRandomCheckpoint(dir, benchConfig(), seed);
}

/** LoRA of the bench's LoRA rows: r = 16 on q, k, v, o (as bench/offload.ts and profile-lora.ts). */
export const BENCH_LORA = { r: 16, lora_alpha: 32, target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj'] };

/** Loads the bench checkpoint in `dir` as a LoRA model ({@link BENCH_LORA}) on a frozen base, with `memory` settings. */
export function loadBenchLora(dir: string, memory: Partial<MemorySettings> = {}): Promise<TfCausalLM> {
  return loadCausalLM(dir, { lora: { settings: loraSettings(loraSectionSchema.parse(BENCH_LORA)), seed: 'bench-lora' }, memory });
}

/** The bench's token ids: `batch` rows of `seq` seeded random tokens. */
export function benchIds(): number[][] {
  const s = BENCH_SHAPE;
  const rng = createRng(0);
  return Array.from({ length: s.batch }, () => Array.from({ length: s.seq }, () => rng.int(s.vocab)));
}

/** The mean next-token NLL of `ids` after their first token: what fwd+bwd and the AdamW step train. */
export function benchLoss(model: TfCausalLM, ids: number[][]): () => tf.Scalar {
  const prompts = ids.map((r) => r.slice(0, 1));
  const completions = ids.map((r) => r.slice(1));
  return () =>
    tf.tidy((): tf.Scalar => {
      const { tokenLogProbs, mask } = model.scoreCompletions(prompts, completions);
      return tf.neg(tf.div(tf.sum(tokenLogProbs), tf.sum(mask))) as tf.Scalar;
    });
}

/**
 * Waits until `t` and everything queued before it are computed, reading back one value: PyTorch's
 * side keeps its logits and gradients where they are (and synchronizes a GPU), so reading whole
 * tensors back would charge comlrl for a copy PyTorch does not make.
 */
export async function syncOn(t: tf.Tensor): Promise<void> {
  const one = tf.tidy(() => tf.slice(tf.reshape(t, [-1]), 0, 1));
  await one.data();
  one.dispose();
}

/** One forward + backward of `loss` over the model's trainable variables, synchronized on one gradient value (kernels run in order). */
export async function benchFwdBwd(model: TfCausalLM, loss: () => tf.Scalar): Promise<void> {
  const { value, grads } = tf.variableGrads(loss, model.trainableVariables());
  await value.data();
  const made = Object.values(grads);
  await syncOn(made[made.length - 1]);
  tf.dispose([value, ...made]);
}

/**
 * Untimed calls before a figure's timed ones. V8 compiles tfjs's op and gradient code over the
 * first few passes: the bench model's forward + backward on torch took 231, 235 and 220 ms
 * (medians of passes 2–6, three fresh processes) against 225, 214 and 214 ms for passes 4–8, so
 * with one warm-up call the figure measured part of the compilation. torch_bench.py's PyTorch
 * side has no JIT and keeps its one.
 */
const WARMUP_CALLS = 3;

async function timed(fn: () => Promise<void> | void, reps: number): Promise<number> {
  for (let i = 0; i < WARMUP_CALLS; i++) await fn();
  const ts: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t = performance.now();
    await fn();
    ts.push(performance.now() - t);
  }
  ts.sort((a, b) => a - b);
  return ts[Math.floor(ts.length / 2)];
}

/** Which figures {@link benchModel} measures: the full model's and the LoRA model's, or the LoRA ones only. */
export type BenchModelParts = 'all' | 'lora';

export interface BenchModelOptions {
  reps?: number;
  /** A directory holding the bench checkpoint (written there when missing); default a temporary one. */
  dir?: string;
  parts?: BenchModelParts;
  /** How the LoRA model's frozen base holds its matrix weights (only the torch backend honours bfloat16). */
  frozenBaseDtype?: MemorySettings['frozenBaseDtype'];
}

/**
 * Measures the benchmark model on the current (or `COMLRL_BACKEND`) backend: forward (all
 * logits), forward+backward of the mean next-token NLL, one AdamW step including fwd+bwd (ms,
 * medians), teacher-forced scoring tokens/s, and greedy generation tokens/s with the KV cache and
 * with whole-sequence recomputation (prompt seq − newTokens, then newTokens new tokens per row).
 * Then the same checkpoint as a LoRA model ({@link BENCH_LORA}) on a frozen base held as
 * `frozenBaseDtype`: forward+backward of the same loss over the adapter (`lora_fwd_bwd_ms`) and
 * scoring (`lora_score_tokens_per_s`); `parts: 'lora'` measures only these. On torch, `threads`
 * is its intra-op thread count.
 */
export async function benchModel(options: BenchModelOptions = {}): Promise<Record<string, number>> {
  const reps = options.reps ?? 5;
  await initBackend();
  const own = options.dir === undefined;
  const dir = options.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-bench-'));
  if (own || !fs.existsSync(path.join(dir, 'config.json'))) writeBenchModel(dir);
  const s = BENCH_SHAPE;
  const figures: Record<string, number> = { batch: s.batch, seq: s.seq, new_tokens: s.newTokens };
  const torch = torchBackend();
  if (activeBackend() === 'torch' && torch !== null) figures.threads = Number(torch.addon.runtime('get_threads', 0));
  try {
    const ids = benchIds();
    if ((options.parts ?? 'all') === 'all') Object.assign(figures, await fullModelFigures(dir, ids, reps));
    Object.assign(figures, await loraFigures(dir, ids, reps, options.frozenBaseDtype ?? 'float32'));
    return figures;
  } finally {
    if (own) fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The full model's figures (see {@link benchModel}). */
async function fullModelFigures(dir: string, ids: number[][], reps: number): Promise<Record<string, number>> {
  const s = BENCH_SHAPE;
  const model = await loadCausalLM(dir);
  try {
    const prompts = ids.map((r) => r.slice(0, 1));
    const completions = ids.map((r) => r.slice(1));
    const loss = benchLoss(model, ids);
    const vars = model.trainableVariables();
    const forwardMs = await timed(async () => {
      const l = model.logits(ids);
      await syncOn(l);
      l.dispose();
    }, reps);
    const fwdBwdMs = await timed(() => benchFwdBwd(model, loss), reps);
    const opt = new AdamW(vars, { lr: 1e-5 });
    const adamMs = await timed(async () => {
      const { value, grads } = tf.variableGrads(loss, vars);
      opt.step(grads);
      await value.data();
      await vars[vars.length - 1].data();
      tf.dispose([value, ...Object.values(grads)]);
    }, reps);
    opt.dispose();
    const scoreMs = await timed(async () => {
      await model.tokenLogProbs(prompts, completions);
    }, reps);
    const genPrompts = ids.map((r) => r.slice(0, s.seq - s.newTokens));
    const genOpts = { maxNewTokens: s.newTokens, greedy: true, eosTokenIds: [] };
    const genReps = Math.max(1, Math.floor(reps / 2));
    const genMs = await timed(async () => {
      await model.generateWith(genPrompts, genOpts, 'cache');
    }, genReps);
    const recomputeMs = await timed(async () => {
      await model.generateWith(genPrompts, genOpts, 'recompute');
    }, genReps);
    return {
      params: vars.reduce((a, v) => a + v.size, 0),
      forward_ms: forwardMs,
      fwd_bwd_ms: fwdBwdMs,
      adamw_step_ms: adamMs,
      score_tokens_per_s: (s.batch * (s.seq - 1)) / (scoreMs / 1000),
      gen_tokens_per_s: (s.batch * s.newTokens) / (genMs / 1000),
      gen_recompute_tokens_per_s: (s.batch * s.newTokens) / (recomputeMs / 1000),
      gen_cache_speedup: recomputeMs / genMs,
    };
  } finally {
    model.dispose();
  }
}

/** The LoRA model's figures (see {@link benchModel}). */
async function loraFigures(dir: string, ids: number[][], reps: number, frozenBaseDtype: MemorySettings['frozenBaseDtype']): Promise<Record<string, number>> {
  const s = BENCH_SHAPE;
  const model = await loadBenchLora(dir, { frozenBaseDtype });
  try {
    const loss = benchLoss(model, ids);
    const fwdBwdMs = await timed(() => benchFwdBwd(model, loss), reps);
    const scoreMs = await timed(async () => {
      await model.tokenLogProbs(ids.map((r) => r.slice(0, 1)), ids.map((r) => r.slice(1)));
    }, reps);
    return {
      lora_params: model.trainableVariables().reduce((a, v) => a + v.size, 0),
      lora_fwd_bwd_ms: fwdBwdMs,
      lora_score_tokens_per_s: (s.batch * (s.seq - 1)) / (scoreMs / 1000),
    };
  } finally {
    model.dispose();
  }
}
