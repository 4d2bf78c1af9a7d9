/**
 * One LoRA adapter: for each targeted linear W [out, in] a pair A [r, in], B [out, r] (PEFT's
 * layout) adding scale · B·A·dropout(x) to W·x. Only A and B are tfjs variables; the base stays
 * in a {@link FrozenBase}.
 */
import * as tf from '@tensorflow/tfjs';
import { fusedLoraDelta } from '../../backend/fused.js';
import { linear } from '../../backend/index.js';
import type { DecoderConfig } from '../config.js';
import type { F32Tensor, NamedTensor } from '../safetensors.js';
import { createRng } from '../../util/rng.js';
import { loraScale, targetModulePaths, type LoraSettings } from './config.js';

/** PEFT's key prefix: the PeftModel wraps the HF model as `base_model.model`. */
export const PEFT_PREFIX = 'base_model.model.';

/** PEFT's safetensors key of a module's A or B matrix. */
export function peftKey(modulePath: string, which: 'A' | 'B'): string {
  return `${PEFT_PREFIX}${modulePath}.lora_${which}.weight`;
}

/** [in, out] of a decoder linear module, from its path's last segment. */
export function moduleShape(cfg: DecoderConfig, modulePath: string): { inF: number; outF: number } {
  const { hiddenSize: h, headDim: d, numHeads: nh, numKvHeads: kv, intermediateSize: i } = cfg;
  const leaf = modulePath.slice(modulePath.lastIndexOf('.') + 1);
  switch (leaf) {
    case 'q_proj':
      return { inF: h, outF: nh * d };
    case 'k_proj':
    case 'v_proj':
      return { inF: h, outF: kv * d };
    case 'o_proj':
      return { inF: nh * d, outF: h };
    case 'gate_proj':
    case 'up_proj':
      return { inF: h, outF: i };
    case 'down_proj':
      return { inF: i, outF: h };
    default:
      throw new Error(`LoRA: '${modulePath}' is not a linear module of the decoder`);
  }
}

let adapterCounter = 0;

/** Where an adapter's initial values come from. */
export type AdapterInit =
  /** Fresh: A kaiming-uniform(a = √5) from a stream seeded by `seed`, B zeros (the model is unchanged). */
  | { readonly seed: string }
  /** Saved values keyed by PEFT names (`base_model.model.<path>.lora_A.weight`); `file` names the source in errors. */
  | {
      readonly tensors: ReadonlyMap<string, F32Tensor>;
      readonly file: string;
      /** The dropout stream to continue (saved by comlrl); default: one derived from `file`. */
      readonly dropout?: { readonly seed: number; readonly passes: number };
    };

interface Pair {
  readonly a: tf.Variable; // [r, in]
  readonly b: tf.Variable; // [out, r]
}

/**
 * LoRA matrices for the modules {@link targetModulePaths} selects. Dropout (PEFT applies it in
 * train mode only) is on exactly when the forward pass runs under a gradient tape, so behaviour
 * log-probs, evaluation and generation never drop. Each mask is a function of (seed, training pass,
 * module): repeated runs draw the same masks, a layer recomputed within the same pass (gradient
 * checkpointing) gets the same masks again, and {@link LoraAdapter.dropoutPasses} is saved for
 * resume.
 */
export class LoraAdapter {
  readonly scale: number;
  /** Module paths with adapters, in checkpoint order. */
  readonly modules: readonly string[];
  private readonly pairs = new Map<string, Pair>();
  /** Adapter pairs per decoder layer, for per-layer recomputation. */
  private readonly byLayer: tf.Variable[][];
  /** Training passes (forward passes under a tape with dropout on) begun so far. */
  dropoutPasses = 0;
  /** Seed of the dropout stream (mask k uses seed + k); saved beside the adapter for resume. */
  readonly dropoutSeed: number;
  private disposed = false;

  constructor(
    readonly settings: LoraSettings,
    readonly decoderConfig: DecoderConfig,
    init: AdapterInit,
  ) {
    this.scale = loraScale(settings);
    this.modules = targetModulePaths(settings, decoderConfig.numLayers);
    this.byLayer = Array.from({ length: decoderConfig.numLayers }, () => []);
    const id = adapterCounter++;
    if ('seed' in init) this.dropoutSeed = hashSeed(`${init.seed}:lora-dropout`);
    else {
      this.dropoutSeed = init.dropout?.seed ?? hashSeed(`${init.file}:lora-dropout`);
      this.dropoutPasses = init.dropout?.passes ?? 0;
    }
    const rng = 'seed' in init ? createRng(`${init.seed}:lora-init`) : null;
    const r = settings.r;
    try {
      if (!('seed' in init)) checkSavedKeys(init.tensors, this.modules, init.file);
      for (const m of this.modules) {
        const { inF, outF } = moduleShape(decoderConfig, m);
        let aData: Float32Array;
        let bData: Float32Array;
        if (rng) {
          // kaiming_uniform(a=√5) on [r, in]: bound = gain·√(3 / fan_in) with gain = √(2 / (1 + 5)) → 1/√in.
          const bound = 1 / Math.sqrt(inF);
          aData = new Float32Array(r * inF);
          for (let k = 0; k < aData.length; k++) aData[k] = (2 * rng.next() - 1) * bound;
          bData = new Float32Array(outF * r);
        } else {
          const saved = (init as { tensors: ReadonlyMap<string, F32Tensor>; file: string }).tensors;
          aData = savedData(saved, peftKey(m, 'A'), [r, inF], (init as { file: string }).file);
          bData = savedData(saved, peftKey(m, 'B'), [outF, r], (init as { file: string }).file);
        }
        const a = toVariable(aData, [r, inF], `comlrl_lora${id}/${m}.lora_A`);
        const b = toVariable(bData, [outF, r], `comlrl_lora${id}/${m}.lora_B`);
        this.pairs.set(`${m}.weight`, { a, b });
        this.byLayer[layerOf(m)].push(a, b);
      }
    } catch (err) {
      this.dispose();
      throw err;
    }
  }

  /**
   * scale · B·A·dropout(x) for the linear whose weight is `weightName` (HF name), or null when
   * that module has no adapter. x is [N, in]; the result [N, out].
   */
  delta(weightName: string, x: tf.Tensor2D): tf.Tensor2D | null {
    const p = this.pairs.get(weightName);
    if (!p) return null;
    let xin = x;
    const rate = this.settings.loraDropout;
    if (rate > 0 && tf.engine().state.gradientDepth > 0) {
      // tf.dropout scales kept values by 1/(1-rate), as torch's Dropout does.
      xin = tf.dropout(x, rate, undefined, hashSeed(`${this.dropoutSeed}:${this.dropoutPasses}:${weightName}`)) as tf.Tensor2D;
    }
    const [a, b] = [p.a as unknown as tf.Tensor2D, p.b as unknown as tf.Tensor2D];
    const fused = fusedLoraDelta(xin, a, b, this.scale);
    if (fused !== null) return fused;
    // A and B are small ([r, in], [out, r]), so linear's transposes cost little.
    return tf.mul(linear(linear(xin, a), b), this.scale) as tf.Tensor2D;
  }

  /**
   * Marks the start of a forward pass (the decoder calls it once per pass); a training pass
   * (under a tape, dropout on) moves the dropout masks on.
   */
  beginPass(): void {
    if (this.settings.loraDropout > 0 && tf.engine().state.gradientDepth > 0) this.dropoutPasses++;
  }

  /** A then B of every module, in module order. */
  variables(): tf.Variable[] {
    this.live();
    const out: tf.Variable[] = [];
    for (const p of this.pairs.values()) out.push(p.a, p.b);
    return out;
  }

  /** PEFT key names aligned with {@link LoraAdapter.variables}. */
  weightNames(): string[] {
    return this.modules.flatMap((m) => [peftKey(m, 'A'), peftKey(m, 'B')]);
  }

  /** The adapter variables layer `l` reads (empty when that layer has none). */
  layerVariables(l: number): tf.Variable[] {
    this.live();
    return [...(this.byLayer[l] ?? [])];
  }

  /** B·A·scale of one module as [out, in] (merging); null when the module has no adapter. */
  deltaWeight(weightName: string): tf.Tensor2D | null {
    const p = this.pairs.get(weightName);
    if (!p) return null;
    return tf.tidy(() => tf.mul(tf.matMul(p.b, p.a), this.scale) as tf.Tensor2D);
  }

  /** Current values under PEFT key names (for adapter_model.safetensors). */
  async namedTensors(): Promise<NamedTensor[]> {
    this.live();
    const out: NamedTensor[] = [];
    for (const m of this.modules) {
      const p = this.pairs.get(`${m}.weight`)!;
      out.push({ name: peftKey(m, 'A'), shape: [...p.a.shape], data: (await p.a.data()) as Float32Array });
      out.push({ name: peftKey(m, 'B'), shape: [...p.b.shape], data: (await p.b.data()) as Float32Array });
    }
    return out;
  }

  /** Adapter parameters (A and B values). */
  parameterCount(): number {
    let n = 0;
    for (const p of this.pairs.values()) n += p.a.size + p.b.size;
    return n;
  }

  private live(): void {
    if (this.disposed) throw new Error('LoRA adapter was disposed');
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const p of this.pairs.values()) {
      p.a.dispose();
      p.b.dispose();
    }
    this.pairs.clear();
  }
}

function toVariable(data: Float32Array, shape: [number, number], name: string): tf.Variable {
  const t = tf.tensor2d(data, shape, 'float32');
  const v = tf.variable(t, true, name);
  t.dispose();
  return v;
}

/** The decoder layer of a module path or weight name (`model.layers.<l>.…`). */
export function layerOf(modulePath: string): number {
  return Number(/^model\.layers\.(\d+)\./.exec(modulePath)![1]);
}

/** A 31-bit seed from a string (FNV-1a), for tf.dropout's numeric seed. */
function hashSeed(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 1) % 1_000_000_007;
}

function checkSavedKeys(tensors: ReadonlyMap<string, F32Tensor>, modules: readonly string[], file: string): void {
  const want = new Set(modules.flatMap((m) => [peftKey(m, 'A'), peftKey(m, 'B')]));
  // PEFT sometimes saves keys with the adapter name (`.lora_A.default.weight`) stripped or not; comlrl reads the stripped form.
  const extra = [...tensors.keys()].filter((k) => !want.has(k));
  if (extra.length > 0) {
    const list = extra.slice(0, 4).join(', ') + (extra.length > 4 ? `, ... (${extra.length} in all)` : '');
    throw new Error(`${file}: tensors for modules this base model lacks or adapter_config.json does not target (an adapter trained on another base?): ${list}`);
  }
}

function savedData(tensors: ReadonlyMap<string, F32Tensor>, key: string, shape: number[], file: string): Float32Array {
  const t = tensors.get(key);
  if (!t) throw new Error(`${file}: tensor '${key}' missing (adapter_config.json targets this module)`);
  if (t.shape.length !== shape.length || t.shape.some((v, i) => v !== shape[i])) {
    throw new Error(`${file}: tensor '${key}' has shape [${t.shape.join(',')}], the base model and r imply [${shape.join(',')}]`);
  }
  return t.data;
}
