import type * as tf from '@tensorflow/tfjs';
import type { MicroBatchOptions, MicroBatchPlan, RowSize } from '../memory/plan.js';
import type { MemorySettings, PassMemory } from '../memory/settings.js';
import type { CheckpointSampling } from '../sampling/defaults.js';
import type { Rng } from '../util/rng.js';

export type { MemorySettings, PassMemory } from '../memory/settings.js';
export type { MicroBatchPlan, RowSize } from '../memory/plan.js';

/** Options of {@link CausalLM.planPasses}: the planner's, less the settings (the model's own). */
export type PassPlanOptions = Omit<MicroBatchOptions, 'memory'>;

/** Architectures comlrl implements; `model_type` values of config.json map onto these. */
export type Architecture = 'qwen2' | 'qwen3' | 'llama';

/** Sampling settings for {@link CausalLM.generate}. */
export interface SamplingOptions {
  /** Maximum number of generated tokens per sequence. */
  maxNewTokens: number;
  /** Softmax temperature; ignored when `greedy`. Default 1. */
  temperature?: number;
  /** Nucleus sampling mass; 1 (default) turns it off. */
  topP?: number;
  /**
   * Keep only the k most likely tokens; 0, null or undefined turns it off. (A run config's
   * `top_k: null` means the checkpoint's value or 50 instead; trainers resolve it before calling
   * generate: see `resolveSampling`.)
   */
  topK?: number | null;
  /** Samples per prompt; outputs are prompt-major (prompt p, sample j at index p·n + j). Default 1. */
  numReturnSequences?: number;
  /** Argmax decoding (temperature, top-p and top-k are then ignored). */
  greedy?: boolean;
  /** Token ids that end a sequence (the EOS is kept in the output). Defaults to the model's eos ids. */
  eosTokenIds?: number[];
  /** Extra ids that end a sequence, kept in the output like EOS. */
  stopTokenIds?: number[];
  /** The seeded stream that draws tokens; required unless `greedy`. */
  rng?: Rng;
  /**
   * Let the event loop run after a token whenever this many milliseconds passed since it last ran
   * (default {@link GENERATION_YIELD_MS}): the tensor work never yields by itself, so a Ctrl-C
   * would otherwise be heard only after the whole generation. The tokens drawn are the same.
   */
  yieldEveryMs?: number;
}

/** Default of {@link SamplingOptions.yieldEveryMs}. */
export const GENERATION_YIELD_MS = 200;

/** What {@link CausalLM.generate} returns. */
export interface GenerationOutput {
  /** Generated ids per sequence, prompt-major; includes the stop/EOS token when one ended it; no padding. */
  sequences: number[][];
  /** Log-probability of each generated token under the distribution it was sampled from (after temperature, top-k, top-p). */
  logProbs: number[][];
  /** Whether the sequence ended on an EOS/stop id (false: ran into `maxNewTokens`). */
  finished: boolean[];
}

/** Differentiable teacher-forced scores of a batch of completions. */
export interface CompletionScores {
  /** log p(token) per completion position, [B, Tmax]; 0 where `mask` is 0. */
  tokenLogProbs: tf.Tensor2D;
  /** 1 for real completion tokens, 0 for padding, [B, Tmax]. Built outside the tape. */
  mask: tf.Tensor2D;
}

/** What a LoRA model tells about its adapter. */
export interface LoraInfo {
  /** The frozen base's directory (shared by every LoRA model loaded from it). */
  readonly baseDir: string;
  readonly r: number;
  readonly loraAlpha: number;
  /** Module paths with adapters (`model.layers.0.self_attn.q_proj`, ...). */
  readonly modules: readonly string[];
  /** Trainable adapter parameters. */
  readonly parameters: number;
}

/** A decoder-only causal LM whose weights are tfjs variables. */
export interface CausalLM {
  readonly architecture: Architecture;
  /** The parsed config.json (raw object as read, validated). */
  readonly config: Readonly<Record<string, unknown>>;
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly numLayers: number;
  /** End-of-sequence ids from config.json / generation_config.json. */
  readonly eosTokenIds: readonly number[];
  /**
   * temperature / top_k / top_p of the checkpoint's generation_config.json: what a run config's
   * unset sampling values take, as in transformers (see `resolveSampling`). Null or absent: the
   * checkpoint has no generation_config.json. {@link CausalLM.generate} itself does not read them.
   */
  readonly samplingDefaults?: CheckpointSampling | null;

  /** Trainable weights in checkpoint order (HF names via {@link CausalLM.weightNames}). */
  trainableVariables(): tf.Variable[];
  /** HF tensor names, aligned with {@link CausalLM.trainableVariables}. */
  weightNames(): string[];

  /**
   * The memory settings every pass of this model is planned with, given when it was loaded
   * (`loadCausalLM(dir, { memory })`; defaults otherwise). Two models may carry different ones.
   */
  readonly memory: Readonly<MemorySettings>;
  /**
   * Splits `rows` (kept in order) into micro-batches whose passes over this model fit its memory
   * budget, and chooses how those passes bound their memory. The model is not changed: hand
   * `pass` to {@link CausalLM.scoreCompletions} / {@link CausalLM.hiddenStates} for each batch.
   * @throws MemoryBudgetError, before anything is allocated, when one row alone does not fit.
   */
  planPasses<R>(rows: readonly R[], sizeOf: (row: R) => RowSize, options: PassPlanOptions): MicroBatchPlan<R>;

  /**
   * Teacher-forced log p of every completion token given its prompt (batched, padded, masked).
   * One value per completion token, EOS included when present; never padding.
   */
  tokenLogProbs(promptIds: number[][], completionIds: number[][]): Promise<number[][]>;
  /**
   * The differentiable form for use under `tf.variableGrads` / `tf.tidy`. `pass`: a plan's (see
   * {@link CausalLM.planPasses}); default: the blocks of {@link CausalLM.memory}, recomputation
   * only when it says `true`.
   */
  scoreCompletions(promptIds: number[][], completionIds: number[][], pass?: PassMemory): CompletionScores;
  /**
   * Final-norm hidden states, [B, Smax, hidden], right-padded (differentiable). Critic heads read
   * positions out of it. `pass` as for {@link CausalLM.scoreCompletions}.
   */
  hiddenStates(inputIds: number[][], pass?: PassMemory): tf.Tensor3D;

  /** Samples continuations with a KV cache. */
  generate(promptIds: number[][], options: SamplingOptions): Promise<GenerationOutput>;

  /**
   * Writes config.json + model.safetensors (HF layout); a LoRA model writes its adapter instead
   * (PEFT's adapter_config.json + adapter_model.safetensors). dtype defaults to float32.
   */
  save(dir: string, options?: { dtype?: 'float32' | 'bfloat16' | 'float16' }): Promise<void>;
  /** Writes the full model with any LoRA update merged into the base weights (same files as a full save). */
  saveMerged?(dir: string, options?: { dtype?: 'float32' | 'bfloat16' | 'float16' }): Promise<void>;
  /** LoRA models: the adapter's settings and the shared base's directory; null or absent under full fine-tuning. */
  readonly loraInfo?: LoraInfo | null;
  /**
   * LoRA models: runs `fn` with the adapter switched off, so the model's passes are those of its
   * frozen base alone (the reference policy of a KL penalty, with no second copy of the weights).
   * Absent (or throwing) under full fine-tuning.
   */
  withAdaptersOff?<R>(fn: () => Promise<R> | R): Promise<R>;
  /** Frees every tensor the model owns. */
  dispose(): void;
}
