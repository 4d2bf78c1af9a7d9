/**
 * A frozen base model shared by every LoRA model built on the same checkpoint: its weights are
 * plain tensors (never variables, so no gradients and no optimizer moments) in Hugging Face layout,
 * never duplicated; products with them go through `matMulAgainstFrozen` (frozen-linear.ts), which reads them in
 * place. Offloaded, its decoder layers' linear weights stay in host memory instead and are
 * uploaded only while a pass runs their layer (see {@link FrozenLinears}).
 * Models acquire and release it; the last release frees it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { uploadNow } from '../../backend/ops.js';
import { holdInBfloat16 } from '../../backend/torch/index.js';
import type { DecoderConfig } from '../config.js';
import type { FrozenLinearSource } from '../decoder.js';
import type { F32Tensor, NamedTensor } from '../safetensors.js';
import { expectedWeights } from '../weights.js';
import { layerOf, type LoraAdapter } from './adapter.js';

/** The output head's key in {@link FrozenBase.linear} (the embedding table itself when tied). */
export const HEAD_KEY = 'lm_head.weight';
/** The embedding's weight name (a tied head's values). */
export const EMBED_KEY = 'model.embed_tokens.weight';
const EMBED = EMBED_KEY;

/** Whether a weight is a decoder layer's linear projection (`*_proj.weight`). */
export function isLayerLinear(name: string): boolean {
  return name.endsWith('_proj.weight');
}

/**
 * A frozen base's linear weights and head as passes read them: resident tensors as they are, and
 * offloaded ones (host memory) uploaded on each {@link FrozenLinears.get} into the caller's tidy
 * scope, so they are freed with the scope that ran the layer, or held for a layer's forward and
 * backward pass by {@link FrozenLinears.holdLayer}.
 */
export class FrozenLinears implements FrozenLinearSource {
  private readonly held = new Map<string, tf.Tensor2D>();
  /** Offloaded weight names per decoder layer. */
  private readonly hostByLayer = new Map<number, string[]>();
  /** Bytes the largest decoder layer uploads per use (0 when every weight is resident). */
  readonly layerUploadBytes: number;

  /** `resident` and `host` are complete when this is built (a base never adds weights later). */
  constructor(
    private readonly resident: ReadonlyMap<string, tf.Tensor2D>,
    private readonly host: ReadonlyMap<string, F32Tensor>,
  ) {
    const bytes = new Map<number, number>();
    for (const [name, h] of host) {
      const l = layerOf(name);
      this.hostByLayer.set(l, [...(this.hostByLayer.get(l) ?? []), name]);
      bytes.set(l, (bytes.get(l) ?? 0) + 4 * h.data.length);
    }
    this.layerUploadBytes = Math.max(0, ...bytes.values());
  }

  /** The weight [out, in], or undefined when the base has none of that name. */
  get(name: string): tf.Tensor2D | undefined {
    const t = this.resident.get(name) ?? this.held.get(name);
    if (t) return t;
    const h = this.host.get(name);
    return h ? upload(h) : undefined;
  }

  /** Weights in all, resident or not. */
  get size(): number {
    return this.resident.size + this.host.size;
  }

  /**
   * Whether some weights are uploaded per use: a layer's uploads then live only as long as the
   * scope that ran it, so a taped pass must recompute layers (the decoder does).
   */
  get uploadsPerUse(): boolean {
    return this.host.size > 0;
  }

  /**
   * Uploads layer `l`'s offloaded weights once, outside any tidy scope, for a pass whose backward
   * part runs after the scope that read them has closed (a recomputed layer's inner tape); the
   * returned function frees them.
   */
  holdLayer(l: number): () => void {
    const mine = (this.hostByLayer.get(l) ?? []).filter((name) => !this.held.has(name));
    for (const name of mine) this.held.set(name, tf.keep(upload(this.host.get(name)!)));
    return () => {
      for (const name of mine) {
        this.held.get(name)?.dispose();
        this.held.delete(name);
      }
    };
  }
}

function upload(h: F32Tensor): tf.Tensor2D {
  return uploadNow(tf.tensor2d(h.data, h.shape as [number, number], 'float32'));
}

/** How a {@link FrozenBase} holds its weights. */
export interface FrozenBaseOptions {
  /** Decoder layers' linear weights stay in host memory, uploaded per use. Default false. */
  readonly offloadLayers?: boolean;
  /** Resident matrix weights held in bfloat16 on the torch backend (see `holdInBfloat16`). Default false. */
  readonly bfloat16?: boolean;
}

/** Frozen weights of one checkpoint, reference-counted. */
export class FrozenBase {
  /** Embedding table (untied models), norms and biases. */
  readonly plain = new Map<string, tf.Tensor>();
  /**
   * Resident `*_proj.weight` (all of them unless offloaded) and the head, [out, in]. A tied model
   * keeps its table here only, as the head.
   */
  private readonly resident = new Map<string, tf.Tensor2D>();
  /** Offloaded `*_proj.weight` values in host memory. */
  private readonly host = new Map<string, F32Tensor>();
  /** The linear weights and head as passes read them (built once every weight is in place). */
  readonly linear: FrozenLinears;
  private refs = 0;
  private onFree: (() => void) | null = null;

  /**
   * @param key - identity in the shared registry (resolved directory + load options)
   * @param dir - the checkpoint directory
   * @param weights - float32 values for every name of {@link expectedWeights}
   * @param options - how the weights are held (see {@link FrozenBaseOptions})
   */
  constructor(
    readonly key: string,
    readonly dir: string,
    readonly decoderConfig: DecoderConfig,
    readonly config: Readonly<Record<string, unknown>>,
    readonly generationConfig: Readonly<Record<string, unknown>> | null,
    weights: ReadonlyMap<string, F32Tensor>,
    options: FrozenBaseOptions = {},
  ) {
    try {
      for (const s of expectedWeights(decoderConfig)) {
        const w = weights.get(s.name);
        if (!w) throw new Error(`frozen base ${dir}: weight '${s.name}' missing`);
        const tied = decoderConfig.tieWordEmbeddings && s.name === EMBED;
        if (options.offloadLayers && isLayerLinear(s.name)) {
          // Read once (a file-backed weight reads its file on each access).
          this.host.set(s.name, { shape: s.shape.slice(), data: w.data });
        } else if (isLayerLinear(s.name) || s.name === HEAD_KEY || tied) {
          const t = tf.keep(uploadNow(tf.tensor2d(w.data, s.shape as [number, number], 'float32')));
          if (options.bfloat16) holdInBfloat16(t);
          this.resident.set(tied ? HEAD_KEY : s.name, t);
        } else {
          this.plain.set(s.name, tf.keep(uploadNow(tf.tensor(w.data, s.shape, 'float32'))));
        }
      }
    } catch (err) {
      this.free();
      throw err;
    }
    this.linear = new FrozenLinears(this.resident, this.host);
  }

  /** Models currently holding this base. */
  get references(): number {
    return this.refs;
  }

  /** Takes a reference (each model built on the base takes one). */
  acquire(): this {
    if (this.freed) throw new Error(`frozen base ${this.dir} was freed`);
    this.refs++;
    return this;
  }

  /** Drops a reference; the last one frees the tensors and leaves the registry. */
  release(): void {
    if (this.refs <= 0) return;
    this.refs--;
    if (this.refs === 0) this.free();
  }

  private freed = false;

  /** Whether the last reference was released (the tensors are gone). */
  get isFreed(): boolean {
    return this.freed;
  }

  private free(): void {
    if (this.freed) return;
    this.freed = true;
    for (const t of this.plain.values()) t.dispose();
    for (const t of this.resident.values()) t.dispose();
    this.plain.clear();
    this.resident.clear();
    this.host.clear();
    this.onFree?.();
  }

  /** Called once when the base is freed (the registry forgets it). */
  setOnFree(f: () => void): void {
    this.onFree = f;
  }

  /** Bytes of float32 weights the base holds as tensors (offloaded weights not included). */
  bytes(): number {
    let n = 0;
    for (const t of this.plain.values()) n += t.size;
    for (const t of this.resident.values()) n += t.size;
    return 4 * n;
  }

  /** Bytes of float32 weights the base holds in host memory (offloaded layers). */
  hostBytes(): number {
    let n = 0;
    for (const h of this.host.values()) n += h.data.length;
    return 4 * n;
  }

  /**
   * Every weight in HF layout and checkpoint order, with the adapter's scale·B·A added to its
   * modules (W' = W + scale·B·A): the merged model. Reads one tensor at a time.
   */
  async mergedTensors(adapter: LoraAdapter | null): Promise<NamedTensor[]> {
    const out: NamedTensor[] = [];
    for (const s of expectedWeights(this.decoderConfig)) {
      const tiedEmbed = this.decoderConfig.tieWordEmbeddings && s.name === EMBED;
      const t = tf.tidy(() => {
        const plain = this.plain.get(s.name);
        if (plain) return plain.clone();
        const w = this.linear.get(tiedEmbed ? HEAD_KEY : s.name);
        if (!w) throw new Error(`frozen base ${this.dir}: weight '${s.name}' missing`);
        const d = isLayerLinear(s.name) ? adapter?.deltaWeight(s.name) : null;
        return d ? tf.add(w, d) : w.clone();
      });
      out.push({ name: s.name, shape: s.shape, data: (await t.data()) as Float32Array });
      t.dispose();
    }
    return out;
  }
}

const registry = new Map<string, Promise<FrozenBase>>();

/** The registry key of a checkpoint directory: its real path plus the load options. */
export function baseKey(dir: string, options: Readonly<Record<string, unknown>> = {}): string {
  let real = path.resolve(dir);
  try {
    real = fs.realpathSync(dir);
  } catch {
    // A missing directory fails later with the loader's own message.
  }
  return `${real}\u0000${JSON.stringify(options)}`;
}

/**
 * The shared frozen base of `key`, loading it with `load` when no live model holds one; takes a
 * reference for the caller (release it with {@link FrozenBase.release}). Concurrent calls for the
 * same key share one load.
 */
export async function acquireFrozenBase(key: string, load: () => Promise<FrozenBase>): Promise<FrozenBase> {
  let entry = registry.get(key);
  if (!entry) {
    entry = load().then((b) => {
      b.setOnFree(() => {
        if (registry.get(key) === entry) registry.delete(key);
      });
      return b;
    });
    registry.set(key, entry);
    entry.catch(() => {
      if (registry.get(key) === entry) registry.delete(key);
    });
  }
  const base = await entry;
  // The last holder may have freed it while this caller waited: load afresh.
  if (base.isFreed) return acquireFrozenBase(key, load);
  return base.acquire();
}

/** Frozen bases currently alive (tests and memory reports). */
export async function liveFrozenBases(): Promise<FrozenBase[]> {
  return Promise.all([...registry.values()]);
}
