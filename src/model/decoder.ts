import * as tf from '@tensorflow/tfjs';
import { embeddingRows, linear, tidyKeep } from '../backend/index.js';
import { rmsNorm, siluMul } from '../backend/fused.js';
import { blockedAttention, headsFirst, mergeHeads, selfAttention, stepAttention, type AttentionMask } from './attention.js';
import type { HeadWeight } from './lm-head.js';
import type { DecoderConfig } from './config.js';
import { frozenEmbedding } from './lora/frozen-embedding.js';
import { frozenLinear, matMulAgainstFrozen } from './lora/frozen-linear.js';
import { recomputed } from './recompute.js';
import { applyRotary } from './rope.js';

/** Keys (pre-transposed, [B, KV, headDim, T]) and values ([B, KV, T, headDim]) of one layer. */
export interface LayerCache {
  kT: tf.Tensor4D;
  v: tf.Tensor4D;
}

/** Inputs shared by every layer of one forward pass. */
export interface ForwardContext {
  batch: number;
  /** New positions per row in this pass. */
  seqLen: number;
  /** RoPE tables [B or 1, 1, S, headDim]. */
  cos: tf.Tensor4D;
  sin: tf.Tensor4D;
  /** Which keys each query sees (causal, with optional left padding). */
  mask: AttentionMask;
  /** Memory bound of one attention block's score buffers (bytes); default 64 MiB. */
  attentionBlockBytes?: number;
  /**
   * Recompute each layer's activations in the backward pass instead of keeping them (gradient
   * checkpointing): the tape then holds one [B·S, hidden] input per layer. Ignored without a tape.
   */
  recompute?: boolean;
  /** Earlier keys/values per layer (generation), or undefined. */
  past?: LayerCache[];
  /** Whether to return the updated caches. */
  keepCache?: boolean;
  /** Weights fixed for a run of tape-free passes (see {@link Decoder.freeze}). */
  frozen?: FrozenWeights;
}

/** Linear weights and the head in HF layout [out, in], keyed by HF name, read in place by tape-free passes. */
export type FrozenWeights = ReadonlyMap<string, tf.Tensor2D>;

/**
 * A frozen LoRA base's linear weights and head (`FrozenLinears` in lora/base.ts): `get` returns a
 * resident tensor, or uploads an offloaded one into the caller's tidy scope.
 */
export interface FrozenLinearSource {
  get(name: string): tf.Tensor2D | undefined;
  readonly size: number;
  /** Some weights are uploaded per use and freed with the scope that ran their layer. */
  readonly uploadsPerUse: boolean;
  /** Keeps layer `l`'s uploaded weights alive until the returned function is called. */
  holdLayer(l: number): () => void;
}

const NO_FROZEN_BASE: FrozenLinearSource = { get: () => undefined, size: 0, uploadsPerUse: false, holdLayer: () => () => {} };

const HEAD = 'lm_head.weight';

/** What the decoder needs from a LoRA adapter (see `lora/adapter.ts`). */
export interface LoraDelta {
  /** scale·B·A·dropout(x) for the linear `weightName`, or null when it has no adapter. */
  delta(weightName: string, x: tf.Tensor2D): tf.Tensor2D | null;
  /** The adapter variables of layer `l`. */
  layerVariables(l: number): tf.Variable[];
  /** Called once at the start of every forward pass (dropout masks are per pass and module). */
  beginPass(): void;
  /** Training passes begun so far: which dropout masks a pass uses (recomputation replays one). */
  dropoutPasses: number;
}

/**
 * The decoder stack (Qwen2 / Qwen3 / Llama) over weights held as tfjs variables in Hugging Face
 * layout. Activations are kept 2-D ([B·S, hidden]) except inside attention.
 */
export class Decoder {
  /** A frozen LoRA base's linear weights and head, [out, in]; empty under full fine-tuning. */
  private readonly base: FrozenLinearSource;
  private readonly lora: LoraDelta | null;

  /**
   * @param cfg - the normalised config
   * @param w - weights in HF layout: every weight (full fine-tuning, variables), or the frozen
   *   base's embedding / norms / biases (LoRA)
   * @param options - `frozenLinear`: a frozen base's linear weights and head ([out, in]), read in
   *   place of `w`'s; `lora`: the adapter whose delta is added to every linear it targets
   */
  constructor(
    readonly cfg: DecoderConfig,
    private readonly w: ReadonlyMap<string, tf.Tensor>,
    options: { frozenLinear?: FrozenLinearSource; lora?: LoraDelta } = {},
  ) {
    this.base = options.frozenLinear ?? NO_FROZEN_BASE;
    this.lora = options.lora ?? null;
  }

  /**
   * False while a LoRA model runs as its frozen base alone (`TfCausalLM.withAdaptersOff`): no
   * adapter delta is added and no dropout pass begins. Always true without LoRA.
   */
  adaptersOn = true;

  private t<T extends tf.Tensor>(name: string): T {
    const v = this.w.get(name);
    if (!v) throw new Error(`decoder: weight '${name}' not loaded`);
    return v as unknown as T;
  }

  /**
   * The trainable tensors layer `l` reads: its LoRA matrices under LoRA, else the layer's own
   * variables (per-layer recomputation needs them to take gradients layer by layer).
   */
  layerTrainables(l: number): tf.Variable[] {
    if (this.lora) return this.lora.layerVariables(l);
    const p = `model.layers.${l}.`;
    const out: tf.Variable[] = [];
    for (const [name, v] of this.w) if (name.startsWith(p) && v instanceof tf.Variable) out.push(v);
    return out;
  }

  private opt(name: string): tf.Tensor1D | undefined {
    return this.w.get(name) as unknown as tf.Tensor1D | undefined;
  }

  /** Token embeddings for flat ids, [N, hidden]. */
  embed(ids: Int32Array): tf.Tensor2D {
    const table = this.w.get('model.embed_tokens.weight');
    if (table) return embeddingRows(table as tf.Tensor2D, ids, this.cfg.padTokenId);
    // A frozen tied base keeps its table as the head only (no gradient needed).
    const tied = this.base.get(HEAD);
    if (!tied) throw new Error("decoder: weight 'model.embed_tokens.weight' not loaded");
    return frozenEmbedding(tied, ids);
  }

  /** The output head's weight (the embedding table when tied). */
  headWeight(): tf.Tensor2D {
    return this.t<tf.Tensor2D>(this.cfg.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight');
  }

  /** The output head for {@link chunkedTokenLogProbs}: a frozen base's, or the model's own [V, H] weight. */
  head(): HeadWeight {
    const t = this.base.get(HEAD);
    return t ? { weight: t, frozen: true } : { weight: this.headWeight(), frozen: false };
  }

  /** Logits [N, vocab] from final hidden states [N, hidden]. */
  logits(hidden: tf.Tensor2D, frozen?: FrozenWeights): tf.Tensor2D {
    const t = frozen?.get(HEAD);
    if (t) return matMulAgainstFrozen(hidden, t);
    const base = this.base.get(HEAD);
    return base ? frozenLinear(hidden, base) : linear(hidden, this.headWeight());
  }

  /**
   * The linear weights and head of a run of tape-free passes (generation), read in place with no
   * copy and no transpose (see `matMulAgainstFrozen`): the map holds the model's own tensors, so
   * the caller must not dispose them. Empty for a frozen base, whose weights are read anyway.
   */
  freeze(): Map<string, tf.Tensor2D> {
    const out = new Map<string, tf.Tensor2D>();
    if (this.base.size > 0) return out;
    for (const [name, v] of this.w) {
      if (name.endsWith('_proj.weight')) out.set(name, v as unknown as tf.Tensor2D);
    }
    out.set(HEAD, this.headWeight());
    return out;
  }

  /** x·Wᵀ (+ bias) for the named projection, from frozen weights when given. */
  private proj(name: string, x: tf.Tensor2D, frozen: FrozenWeights | undefined): tf.Tensor2D {
    const bias = this.opt(name.replace(/\.weight$/, '.bias'));
    const t = frozen?.get(name);
    const base = t ? undefined : this.base.get(name);
    let y: tf.Tensor2D;
    if (t) y = matMulAgainstFrozen(x, t);
    else if (base) y = frozenLinear(x, base);
    else y = linear(x, this.t(name), bias);
    if (bias && (t || base)) y = tf.add(y, bias) as tf.Tensor2D;
    // LoRA: y = W·x + b + scale·B·A·dropout(x).
    const d = this.adaptersOn ? this.lora?.delta(name, x) : null;
    return d ? (tf.add(y, d) as tf.Tensor2D) : y;
  }

  /** Runs every layer and the final norm on embeddings x [B·S, hidden]. */
  forward(x: tf.Tensor2D, ctx: ForwardContext): { hidden: tf.Tensor2D; cache: LayerCache[] | null } {
    const cache: LayerCache[] = [];
    if (this.adaptersOn) this.lora?.beginPass();
    let h = x;
    // Offloaded layer weights live only as long as the scope that ran their layer, so a tape
    // cannot keep them: such a base always recomputes (without a tape this is a plain layer run).
    const recompute = (ctx.recompute || this.base.uploadsPerUse) && !ctx.keepCache && !ctx.past;
    for (let l = 0; l < this.cfg.numLayers; l++) {
      if (recompute) {
        // The backward pass may come after later forward passes (a shared actor-critic step runs
        // two): the recomputation replays this pass's dropout masks.
        const pass = this.lora?.dropoutPasses ?? 0;
        const layer = (input: tf.Tensor2D, [cos, sin]: readonly tf.Tensor[]) => {
          const lora = this.lora;
          const now = lora?.dropoutPasses ?? 0;
          if (lora) lora.dropoutPasses = pass;
          try {
            return this.layer(l, input, { ...ctx, cos: cos as tf.Tensor4D, sin: sin as tf.Tensor4D }).out;
          } finally {
            if (lora) lora.dropoutPasses = now;
          }
        };
        const hold = this.base.uploadsPerUse ? () => this.base.holdLayer(l) : undefined;
        h = recomputed(layer, h, [ctx.cos, ctx.sin], this.layerTrainables(l), hold);
      } else {
        // One scope per layer: what the tape does not keep is freed layer by layer, not at the end.
        const input = h;
        const { out, layerCache } = tidyKeep(() => this.layer(l, input, ctx));
        // A pass that keeps no cache makes none (its attention is one fused op where it can be).
        if (layerCache !== null) {
          if (ctx.keepCache) cache.push(layerCache);
          else tf.dispose([layerCache.kT, layerCache.v]);
        }
        if (l > 0) input.dispose();
        h = out;
      }
    }
    const hidden = rmsNorm(h, this.t('model.norm.weight'), this.cfg.rmsNormEps);
    return { hidden, cache: ctx.keepCache ? cache : null };
  }

  /** One decoder layer: attention and MLP blocks with pre-norm residuals. */
  private layer(l: number, h: tf.Tensor2D, ctx: ForwardContext): { out: tf.Tensor2D; layerCache: LayerCache | null } {
    const p = `model.layers.${l}.`;
    const normed = rmsNorm(h, this.t(`${p}input_layernorm.weight`), this.cfg.rmsNormEps);
    const { out, layerCache } = this.attention(p, normed, ctx, ctx.past?.[l]);
    const h1 = tf.add(h, out) as tf.Tensor2D;
    const normed2 = rmsNorm(h1, this.t(`${p}post_attention_layernorm.weight`), this.cfg.rmsNormEps);
    return { out: tf.add(h1, this.mlp(p, normed2, ctx.frozen)) as tf.Tensor2D, layerCache };
  }

  private mlp(p: string, x: tf.Tensor2D, frozen: FrozenWeights | undefined): tf.Tensor2D {
    const gate = this.proj(`${p}mlp.gate_proj.weight`, x, frozen);
    const up = this.proj(`${p}mlp.up_proj.weight`, x, frozen);
    const act = siluMul(gate, up);
    return this.proj(`${p}mlp.down_proj.weight`, act, frozen);
  }

  private attention(
    p: string,
    x: tf.Tensor2D,
    ctx: ForwardContext,
    past: LayerCache | undefined,
  ): { out: tf.Tensor2D; layerCache: LayerCache | null } {
    const { numHeads: nh, numKvHeads: kv, headDim: d, rmsNormEps: eps } = this.cfg;
    const b = ctx.batch;
    const s = ctx.seqLen;
    const proj = (n: 'q' | 'k' | 'v', heads: number): tf.Tensor4D =>
      tf.reshape(this.proj(`${p}self_attn.${n}_proj.weight`, x, ctx.frozen), [b, s, heads, d]);
    let q = proj('q', nh);
    let k = proj('k', kv);
    const v0 = proj('v', kv);
    if (this.cfg.qkNorm) {
      q = rmsNorm(q, this.t(`${p}self_attn.q_norm.weight`), eps);
      k = rmsNorm(k, this.t(`${p}self_attn.k_norm.weight`), eps);
    }
    if (past && s === 1) {
      // A decoding step: with one position per row, [b, 1, heads, d] is laid out as
      // [b, heads, 1, d], so RoPE applies in place and the new key and value join the cache by
      // reshapes, not transposes (fewer kernels per step; see stepAttention).
      const qs: tf.Tensor4D = tf.mul(applyRotary(q, ctx.cos, ctx.sin), 1 / Math.sqrt(d));
      const kT = tf.concat([past.kT, tf.reshape(applyRotary(k, ctx.cos, ctx.sin), [b, kv, d, 1])], 3) as tf.Tensor4D;
      const v = tf.concat([past.v, tf.reshape(v0, [b, kv, 1, d])], 2) as tf.Tensor4D;
      const out = this.proj(`${p}self_attn.o_proj.weight`, stepAttention(qs, kT, v, ctx.mask), ctx.frozen);
      return { out, layerCache: { kT, v } };
    }
    if (!past && !ctx.keepCache) {
      const merged = selfAttention(q, k, v0, ctx.cos, ctx.sin, ctx.mask, ctx.attentionBlockBytes);
      return { out: this.proj(`${p}self_attn.o_proj.weight`, merged, ctx.frozen), layerCache: null };
    }
    // A pass that keeps its cache (a prefill, or several new positions after a cache).
    const heads = headsFirst(q, k, v0, ctx.cos, ctx.sin);
    const kT = past ? (tf.concat([past.kT, heads.kT], 3) as tf.Tensor4D) : heads.kT;
    const v = past ? (tf.concat([past.v, heads.v], 2) as tf.Tensor4D) : heads.v;
    const merged = mergeHeads(blockedAttention(heads.q, kT, v, ctx.mask, ctx.attentionBlockBytes));
    const out = this.proj(`${p}self_attn.o_proj.weight`, merged, ctx.frozen);
    return { out, layerCache: { kT, v } };
  }
}
