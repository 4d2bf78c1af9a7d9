import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { initBackend } from '../src/backend/index.js';
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

async function timed(fn: () => Promise<void> | void, reps: number): Promise<number> {
  await fn();
  const ts: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t = performance.now();
    await fn();
    ts.push(performance.now() - t);
  }
  ts.sort((a, b) => a - b);
  return ts[Math.floor(ts.length / 2)];
}

/**
 * Measures the benchmark model on the current (or `COMLRL_BACKEND`) backend: forward (all
 * logits), forward+backward of the mean next-token NLL, one AdamW step including fwd+bwd (ms,
 * medians), teacher-forced scoring tokens/s, and greedy generation tokens/s with the KV cache and
 * with whole-sequence recomputation (prompt seq − newTokens, then newTokens new tokens per row).
 */
export async function benchModel(options: { reps?: number; dir?: string } = {}): Promise<Record<string, number>> {
  const reps = options.reps ?? 5;
  await initBackend();
  const s = BENCH_SHAPE;
  const own = options.dir === undefined;
  const dir = options.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-bench-'));
  if (own || !fs.existsSync(path.join(dir, 'config.json'))) writeBenchModel(dir);
  const model: TfCausalLM = await loadCausalLM(dir);
  try {
    const rng = createRng(0);
    const ids = Array.from({ length: s.batch }, () => Array.from({ length: s.seq }, () => rng.int(s.vocab)));
    const prompts = ids.map((r) => r.slice(0, 1));
    const completions = ids.map((r) => r.slice(1));
    const loss = (): tf.Scalar =>
      tf.tidy((): tf.Scalar => {
        const { tokenLogProbs, mask } = model.scoreCompletions(prompts, completions);
        return tf.neg(tf.div(tf.sum(tokenLogProbs), tf.sum(mask))) as tf.Scalar;
      });
    const vars = model.trainableVariables();

    const forwardMs = await timed(async () => {
      const l = model.logits(ids);
      await l.data();
      l.dispose();
    }, reps);
    const fwdBwdMs = await timed(async () => {
      const { value, grads } = tf.variableGrads(loss, vars);
      await value.data();
      await Promise.all(Object.values(grads).map((g) => g.data()));
      tf.dispose([value, ...Object.values(grads)]);
    }, reps);
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
    const params = vars.reduce((a, v) => a + v.size, 0);
    return {
      params,
      batch: s.batch,
      seq: s.seq,
      new_tokens: s.newTokens,
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
    if (own) fs.rmSync(dir, { recursive: true, force: true });
  }
}

