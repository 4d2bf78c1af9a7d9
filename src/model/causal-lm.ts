import * as fs from 'node:fs';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { gatherRows, lengthMask, uploadNow } from '../backend/index.js';
import { planGeneration, planMicroBatches, unplannedPass, type GenerationPlan, type MicroBatchPlan, type RowSize } from '../memory/plan.js';
import { DEFAULT_MEMORY_SETTINGS, type MemorySettings, type PassMemory } from '../memory/settings.js';
import { parseGenerationSampling, type CheckpointSampling } from '../sampling/defaults.js';
import type { DecoderConfig } from './config.js';
import { Decoder } from './decoder.js';
import { generateSequences, type GenerationMode } from './generate.js';
import { chunkedTokenLogProbs } from './lm-head.js';
import { RotaryTables, ropeInverseFrequencies } from './rope.js';
import { writeSafetensors, type DeferredNamedTensor, type NamedTensor, type SafetensorsDtype } from './safetensors.js';
import type { Architecture, CausalLM, CompletionScores, GenerationOutput, LoraInfo, PassPlanOptions, SamplingOptions } from './types.js';
import { expectedWeights, type WeightSpec } from './weights.js';
import type { LoraAdapter } from './lora/adapter.js';
import type { FrozenBase } from './lora/base.js';
import { ADAPTER_CONFIG, ADAPTER_STATE, ADAPTER_WEIGHTS, writeAdapterDir } from './lora/peft-io.js';

/** A LoRA model's parts: the shared frozen base (one reference held by the model) and its own adapter. */
export interface LoraParts {
  readonly base: FrozenBase;
  readonly adapter: LoraAdapter;
}

let modelCounter = 0;


const DTYPES: Record<'float32' | 'bfloat16' | 'float16', SafetensorsDtype> = {
  float32: 'F32',
  bfloat16: 'BF16',
  float16: 'F16',
};

/** A Qwen2 / Qwen3 / Llama causal LM whose weights are tfjs variables. */
export class TfCausalLM implements CausalLM {
  readonly architecture: Architecture;
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly numLayers: number;
  readonly eosTokenIds: readonly number[];
  readonly samplingDefaults: CheckpointSampling | null;
  readonly decoder: Decoder;
  readonly rope: RotaryTables;
  private readonly specs: WeightSpec[];
  private readonly vars: Map<string, tf.Variable>;
  private disposed = false;

  /**
   * @param decoderConfig - the normalised config.
   * @param config - the raw config.json object (written back by {@link TfCausalLM.save}).
   * @param weights - float32 values for every name of {@link expectedWeights}.
   * @param generationConfig - raw generation_config.json, written back on save when present.
   */
  /** Under LoRA: the shared frozen base and this model's adapter; null under full fine-tuning. */
  readonly lora: LoraParts | null;

  /**
   * @param decoderConfig - the normalised config.
   * @param config - the raw config.json object (written back by {@link TfCausalLM.save}).
   * @param weights - float32 values for every name of {@link expectedWeights} (full fine-tuning:
   *   every weight becomes a variable), or {@link LoraParts} (LoRA: the model takes ownership of
   *   the adapter and of one reference to the base, and trains only the adapter).
   * @param generationConfig - raw generation_config.json, written back on save when present.
   * @param memory - the memory settings its passes are planned with (see {@link CausalLM.memory}).
   * @param generationConfigFile - where `generationConfig` was read from, named in messages about its values.
   */
  constructor(
    readonly decoderConfig: DecoderConfig,
    readonly config: Readonly<Record<string, unknown>>,
    weights: ReadonlyMap<string, { shape: number[]; data: Float32Array }> | LoraParts,
    private readonly generationConfig: Readonly<Record<string, unknown>> | null = null,
    readonly memory: Readonly<MemorySettings> = DEFAULT_MEMORY_SETTINGS,
    private readonly generationConfigFile = 'generation_config.json',
  ) {
    this.architecture = decoderConfig.architecture;
    this.vocabSize = decoderConfig.vocabSize;
    this.hiddenSize = decoderConfig.hiddenSize;
    this.numLayers = decoderConfig.numLayers;
    this.eosTokenIds = decoderConfig.eosTokenIds;
    this.samplingDefaults = generationConfig ? parseGenerationSampling(generationConfig, generationConfigFile) : null;
    this.specs = expectedWeights(decoderConfig);
    const id = modelCounter++;
    this.vars = new Map();
    if (isLoraParts(weights)) {
      this.lora = weights;
      this.decoder = new Decoder(decoderConfig, weights.base.plain, { frozenLinear: weights.base.linear, lora: weights.adapter });
    } else {
      this.lora = null;
      for (const s of this.specs) {
        const w = weights.get(s.name);
        if (!w) throw new Error(`TfCausalLM: weight '${s.name}' missing`);
        const t = uploadNow(tf.tensor(w.data, s.shape, 'float32'));
        this.vars.set(s.name, tf.variable(t, true, `comlrl_m${id}/${s.name}`));
        t.dispose();
      }
      this.decoder = new Decoder(decoderConfig, this.vars);
    }
    this.rope = new RotaryTables(
      ropeInverseFrequencies(decoderConfig.headDim, decoderConfig.ropeTheta, decoderConfig.ropeScaling),
      decoderConfig.headDim,
    );
  }

  /**
   * Bytes the largest decoder layer uploads each time a pass runs it: a frozen base whose layers
   * are offloaded to host memory (see `FrozenBase`); 0 otherwise. The memory planner counts it.
   */
  get frozenLayerUploadBytes(): number {
    return this.lora?.base.linear.layerUploadBytes ?? 0;
  }

  /** See {@link CausalLM.loraInfo}. */
  get loraInfo(): LoraInfo | null {
    if (!this.lora) return null;
    const a = this.lora.adapter;
    return { baseDir: this.lora.base.dir, r: a.settings.r, loraAlpha: a.settings.loraAlpha, modules: a.modules, parameters: a.parameterCount() };
  }

  private live(): void {
    if (this.disposed) throw new Error('CausalLM: model was disposed');
  }

  /**
   * See {@link CausalLM.withAdaptersOff}: `fn` runs with this model's adapter switched off, so
   * every pass reads the shared frozen base alone (no copy of any weight is made).
   * @throws Error under full fine-tuning (there is no adapter to switch off).
   */
  async withAdaptersOff<R>(fn: () => Promise<R> | R): Promise<R> {
    this.live();
    if (!this.lora) throw new Error('withAdaptersOff: the model has no LoRA adapter (full fine-tuning)');
    const before = this.decoder.adaptersOn;
    this.decoder.adaptersOn = false;
    try {
      return await fn();
    } finally {
      this.decoder.adaptersOn = before;
    }
  }

  /**
   * A frozen copy of this model's current weights as a new model (full fine-tuning): what a
   * reference policy needs when there is no base to run alone. It owns its tensors (dispose it).
   * @throws Error for a LoRA model (run its base with {@link TfCausalLM.withAdaptersOff} instead).
   */
  frozenCopy(): TfCausalLM {
    this.live();
    if (this.lora) throw new Error('frozenCopy: a LoRA model shares its frozen base; use withAdaptersOff');
    const weights = new Map<string, { shape: number[]; data: Float32Array }>();
    for (const s of this.specs) weights.set(s.name, { shape: s.shape.slice(), data: this.vars.get(s.name)!.dataSync() as Float32Array });
    return new TfCausalLM(this.decoderConfig, this.config, weights, this.generationConfig, this.memory, this.generationConfigFile);
  }

  trainableVariables(): tf.Variable[] {
    this.live();
    if (this.lora) return this.lora.adapter.variables();
    return this.specs.map((s) => this.vars.get(s.name)!);
  }

  weightNames(): string[] {
    if (this.lora) return this.lora.adapter.weightNames();
    return this.specs.map((s) => s.name);
  }

  /**
   * See {@link CausalLM.planPasses}. The model is the one place that plans (value models and
   * trainers ask it): it holds what a plan rests on (its shapes, its trainable variables, its
   * offloaded layers and the settings it was loaded with), and it runs the passes the plan is for.
   */
  planPasses<R>(rows: readonly R[], sizeOf: (row: R) => RowSize, options: PassPlanOptions): MicroBatchPlan<R> {
    return planMicroBatches(this, rows, sizeOf, { ...options, memory: this.memory });
  }

  /** Final-norm hidden states [B·S, hidden] for right-padded rows (causal attention needs no pad mask). */
  private hiddenFlat(rows: number[][], width: number, pass: PassMemory): tf.Tensor2D {
    return hiddenFlatOf(this, rows, width, pass);
  }

  hiddenStates(inputIds: number[][], pass: PassMemory = unplannedPass(this.memory)): tf.Tensor3D {
    this.live();
    if (inputIds.length === 0) throw new Error('hiddenStates: inputIds is empty');
    const width = Math.max(1, ...inputIds.map((r) => r.length));
    return tf.tidy(() => tf.reshape(this.hiddenFlat(inputIds, width, pass), [inputIds.length, width, this.hiddenSize]));
  }

  /** Full logits [B, Smax, vocab] of right-padded rows (positions past a row's end are padding). */
  logits(inputIds: number[][], pass: PassMemory = unplannedPass(this.memory)): tf.Tensor3D {
    this.live();
    const width = Math.max(1, ...inputIds.map((r) => r.length));
    return tf.tidy(() =>
      tf.reshape(this.decoder.logits(this.hiddenFlat(inputIds, width, pass)), [inputIds.length, width, this.vocabSize]),
    );
  }

  scoreCompletions(promptIds: number[][], completionIds: number[][], pass: PassMemory = unplannedPass(this.memory)): CompletionScores {
    this.live();
    return scoreCompletionsOf(this, promptIds, completionIds, pass);
  }

  async tokenLogProbs(promptIds: number[][], completionIds: number[][]): Promise<number[][]> {
    if (promptIds.length !== completionIds.length) {
      throw new Error(`tokenLogProbs: ${promptIds.length} prompts but ${completionIds.length} completions`);
    }
    // Rows go in micro-batches that fit the memory budget (no tape: activations of one layer at a time).
    const order = promptIds.map((_, i) => i);
    const plan = this.planPasses(order, (i) => ({ width: promptIds[i].length + completionIds[i].length, scored: completionIds[i].length }), {
      label: 'scoring',
      backward: false,
    });
    const out: number[][] = [];
    for (const batch of plan.batches) {
      const t = tf.tidy(() => this.scoreCompletions(batch.map((i) => promptIds[i]), batch.map((i) => completionIds[i]), plan.pass).tokenLogProbs);
      const width = t.shape[1];
      const data = await t.data();
      t.dispose();
      batch.forEach((i, r) => out.push(Array.from(data.subarray(r * width, r * width + completionIds[i].length))));
    }
    return out;
  }

  /**
   * Samples with a KV cache. When all sequences at once would not fit the memory budget, the
   * samples of each prompt are generated in smaller groups (same outputs' layout; the random
   * stream is consumed group by group).
   */
  async generate(promptIds: number[][], options: SamplingOptions): Promise<GenerationOutput> {
    this.live();
    const n = options.numReturnSequences ?? 1;
    const width = Math.max(1, ...promptIds.map((p) => p.length));
    const plan = this.generationPlan(promptIds.length * n, width, options.maxNewTokens);
    const group = plan.batchSize;
    if (group >= promptIds.length * n) return generateSequences(this, promptIds, options, 'cache', plan.attentionBlockBytes);
    const out: GenerationOutput = { sequences: [], logProbs: [], finished: [] };
    for (const prompt of promptIds) {
      for (let done = 0; done < n; done += group) {
        const part = await generateSequences(this, [prompt], { ...options, numReturnSequences: Math.min(group, n - done) }, 'cache', plan.attentionBlockBytes);
        out.sequences.push(...part.sequences);
        out.logProbs.push(...part.logProbs);
        out.finished.push(...part.finished);
      }
    }
    return out;
  }

  /**
   * How many of `total` sequences (prompts up to `promptWidth` tokens, `maxNewTokens` new ones) a
   * KV-cache generation on this model's base runs together under its memory settings, and the
   * attention block of their prefill (a joint pass of several LoRA models asks the first one).
   */
  generationPlan(total: number, promptWidth: number, maxNewTokens: number): GenerationPlan {
    return planGeneration(this, { total, promptWidth, maxNewTokens, memory: this.memory });
  }

  /** Like {@link TfCausalLM.generate}, choosing the KV cache or whole-sequence recomputation (benchmarks, tests). */
  generateWith(promptIds: number[][], options: SamplingOptions, mode: GenerationMode): Promise<GenerationOutput> {
    this.live();
    return generateSequences(this, promptIds, options, mode, this.memory.attentionBlockBytes);
  }

  /**
   * Full fine-tuning: config.json + model.safetensors. LoRA: the adapter only, as PEFT writes it
   * (adapter_config.json + adapter_model.safetensors); {@link TfCausalLM.saveMerged} writes the
   * full merged model.
   */
  async save(dir: string, options: { dtype?: 'float32' | 'bfloat16' | 'float16' } = {}): Promise<void> {
    this.live();
    const dtype = options.dtype ?? 'float32';
    const st = DTYPES[dtype];
    if (!st) throw new Error(`save: dtype must be float32, bfloat16 or float16, got '${String(dtype)}'`);
    if (this.lora) {
      await writeAdapterDir(dir, this.lora.adapter, path.resolve(this.lora.base.dir), st);
      return;
    }
    // Each weight is copied to the host just before it is written: one weight at a time, not the model.
    const tensors = this.specs.map((s) => ({ name: s.name, shape: s.shape, read: () => this.vars.get(s.name)!.dataSync() as Float32Array }));
    await this.writeFull(dir, tensors, dtype);
  }

  /**
   * Writes the full model (config.json + model.safetensors) with any LoRA update merged into the
   * base weights (W + scale·B·A), loadable without PEFT. Without LoRA it is {@link TfCausalLM.save}.
   */
  async saveMerged(dir: string, options: { dtype?: 'float32' | 'bfloat16' | 'float16' } = {}): Promise<void> {
    this.live();
    if (!this.lora) return this.save(dir, options);
    const dtype = options.dtype ?? 'float32';
    if (!DTYPES[dtype]) throw new Error(`saveMerged: dtype must be float32, bfloat16 or float16, got '${String(dtype)}'`);
    await this.writeFull(dir, await this.lora.base.mergedTensors(this.lora.adapter), dtype);
  }

  private async writeFull(dir: string, tensors: readonly (NamedTensor | DeferredNamedTensor)[], dtype: 'float32' | 'bfloat16' | 'float16'): Promise<void> {
    const st = DTYPES[dtype];
    fs.mkdirSync(dir, { recursive: true });
    writeSafetensors(path.join(dir, 'model.safetensors'), tensors, st);
    // Newer transformers write `dtype`, older `torch_dtype`; keep whichever is there in step with the file.
    const config: Record<string, unknown> = { ...this.config, torch_dtype: dtype };
    if ('dtype' in this.config) config.dtype = dtype;
    fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config, null, 2) + '\n');
    if (this.generationConfig) {
      fs.writeFileSync(path.join(dir, 'generation_config.json'), JSON.stringify(this.generationConfig, null, 2) + '\n');
    }
    // A stale index would shadow the single file we just wrote.
    const index = path.join(dir, 'model.safetensors.index.json');
    if (fs.existsSync(index)) fs.rmSync(index);
    // Nor may adapter files from an earlier save: loaders would apply them on top of the full model.
    for (const f of [ADAPTER_CONFIG, ADAPTER_WEIGHTS, ADAPTER_STATE]) if (fs.existsSync(path.join(dir, f))) fs.rmSync(path.join(dir, f));
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const v of this.vars.values()) v.dispose();
    this.vars.clear();
    if (this.lora) {
      this.lora.adapter.dispose();
      // Other models may still read the base: only this model's reference goes.
      this.lora.base.release();
    }
  }
}

function isLoraParts(w: ReadonlyMap<string, unknown> | LoraParts): w is LoraParts {
  return !(w instanceof Map) && 'adapter' in w && 'base' in w;
}

/** What the shared pass functions read of a model: its decoder stack, rotary tables and sizes. */
export interface PassModel {
  readonly decoder: Decoder;
  readonly rope: RotaryTables;
  readonly vocabSize: number;
}

/** Final-norm hidden states [B·S, hidden] of right-padded `rows` (each at most `width` long) through `model`'s decoder. */
export function hiddenFlatOf(model: PassModel, rows: number[][], width: number, pass: PassMemory): tf.Tensor2D {
  const b = rows.length;
  const flat = new Int32Array(b * width);
  rows.forEach((r, i) => {
    for (const id of r) {
      if (!Number.isInteger(id) || id < 0 || id >= model.vocabSize) throw new Error(`CausalLM: token id ${id} outside [0, ${model.vocabSize})`);
    }
    flat.set(r, i * width);
  });
  const positions = [Array.from({ length: width }, (_, j) => j)];
  const { cos, sin } = model.rope.tables(positions);
  return model.decoder.forward(model.decoder.embed(flat), {
    batch: b,
    seqLen: width,
    cos,
    sin,
    mask: { pads: null },
    attentionBlockBytes: pass.attentionBlockBytes,
    recompute: pass.recompute,
  }).hidden;
}

/** {@link CausalLM.scoreCompletions} through `model`'s decoder (a single model's, or a joint pass's). */
export function scoreCompletionsOf(model: PassModel, promptIds: number[][], completionIds: number[][], pass: PassMemory): CompletionScores {
  if (promptIds.length !== completionIds.length) {
    throw new Error(`scoreCompletions: ${promptIds.length} prompts but ${completionIds.length} completions`);
  }
  const b = promptIds.length;
  promptIds.forEach((p, i) => {
    if (p.length === 0) throw new Error(`scoreCompletions: promptIds[${i}] is empty (the first completion token needs a context)`);
  });
  const lens = completionIds.map((c) => c.length);
  const cmax = Math.max(0, ...lens);
  if (b === 0 || cmax === 0) {
    return { tokenLogProbs: tf.zeros([b, cmax]) as tf.Tensor2D, mask: tf.zeros([b, cmax]) as tf.Tensor2D };
  }
  const rows = promptIds.map((p, i) => [...p, ...completionIds[i]]);
  const width = Math.max(...rows.map((r) => r.length));
  // Completion token j of row i is predicted from position P_i - 1 + j; padding reads row start.
  const pick = new Int32Array(b * cmax);
  const targets = new Int32Array(b * cmax);
  for (let i = 0; i < b; i++) {
    for (let j = 0; j < lens[i]; j++) {
      pick[i * cmax + j] = i * width + promptIds[i].length - 1 + j;
      targets[i * cmax + j] = completionIds[i][j];
    }
    for (let j = lens[i]; j < cmax; j++) pick[i * cmax + j] = i * width;
  }
  return tf.tidy(() => {
    const hidden = gatherRows(hiddenFlatOf(model, rows, width, pass), pick);
    const lp = chunkedTokenLogProbs(hidden, model.decoder.head(), targets, pass.logitsChunkBytes);
    const mask = lengthMask(lens, cmax);
    return { tokenLogProbs: tf.mul(tf.reshape(lp, [b, cmax]), mask) as tf.Tensor2D, mask };
  });
}
