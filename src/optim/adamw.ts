import * as tf from '@tensorflow/tfjs';
import { fusedAdamWInPlace, type AdamWParamUpdate } from '../backend/fused.js';
import { uploadNow } from '../backend/ops.js';
import { resolveAdamWConfig, type AdamWConfig, type AdamWOptions } from './config.js';

/** A restorable snapshot of an {@link AdamW} optimizer. */
export interface AdamWState {
  /** Number of `step()` calls. */
  readonly step: number;
  /** Per-parameter update counts (torch keeps one per parameter; a parameter without a gradient does not advance). */
  readonly paramSteps: readonly number[];
  /** First moments, one per variable (zeros where `paramSteps` is 0). */
  readonly m: readonly Float32Array[];
  /** Second moments, one per variable. */
  readonly v: readonly Float32Array[];
  readonly config: AdamWConfig;
}

/** Moment values kept elsewhere (a checkpoint file), read when an optimizer is restored from them. */
export interface StoredMoment {
  /** How many values the moment has. */
  readonly length: number;
  /** Reads the values; nothing is kept between calls. */
  read(): Float32Array;
}

/** One moment as {@link AdamW.setState} takes it: values on the host, or stored and read on demand. */
export type MomentValues = Float32Array | StoredMoment;

/**
 * What {@link AdamW.setState} restores: a snapshot, or one whose moments are read one at a time
 * as they are uploaded (a checkpoint's: the host never holds all of them at once).
 */
export interface AdamWRestorableState extends Omit<AdamWState, 'm' | 'v'> {
  readonly m: readonly MomentValues[];
  readonly v: readonly MomentValues[];
}

/** The values of a moment, read now if it is stored. */
export function momentArray(moment: MomentValues): Float32Array {
  return moment instanceof Float32Array ? moment : moment.read();
}

/** Gradients aligned with the optimizer's variables (null/undefined = no gradient), or keyed by variable name. */
export type Gradients = ReadonlyArray<tf.Tensor | null | undefined> | tf.NamedTensorMap;

interface Slot {
  m: tf.Variable;
  v: tf.Variable;
  steps: number;
}

/**
 * AdamW with torch.optim.AdamW semantics (amsgrad off). For each parameter that has a gradient, with
 * its own step count t:
 *   p ← p·(1 − lr·wd);  m ← m + (g − m)(1 − β1);  v ← β2·v + (1 − β2)·g²;
 *   p ← p − (lr / (1 − β1^t)) · m / (√v / √(1 − β2^t) + eps).
 * Parameters without a gradient are left alone (no decay, no step), as in torch. Moments are
 * allocated at a parameter's first gradient. The optimizer never disposes the gradients it is given.
 */
export class AdamW {
  readonly variables: readonly tf.Variable[];
  private cfg: AdamWConfig;
  private slots: (Slot | null)[];
  private steps = 0;
  private readonly index: Map<string, number>;

  constructor(variables: readonly tf.Variable[], options: AdamWOptions = {}) {
    this.cfg = resolveAdamWConfig(options);
    this.variables = [...variables];
    this.index = new Map();
    this.variables.forEach((v, i) => {
      if (v.dtype !== 'float32') throw new Error(`AdamW: variable '${v.name}' has dtype ${v.dtype}; only float32 is supported`);
      if (this.index.has(v.name)) throw new Error(`AdamW: variable name '${v.name}' appears twice`);
      this.index.set(v.name, i);
    });
    this.slots = this.variables.map(() => null);
  }

  /** The current hyperparameters. */
  get config(): AdamWConfig {
    return this.cfg;
  }

  /** The learning rate the next step uses. */
  get learningRate(): number {
    return this.cfg.lr;
  }

  /** Number of `step()` calls so far. */
  get stepCount(): number {
    return this.steps;
  }

  /** Changes the learning rate for later steps (schedules call this between steps). */
  setLearningRate(lr: number): void {
    this.cfg = resolveAdamWConfig({ ...this.cfg, lr });
  }

  /** Applies one update from gradients (array aligned with `variables`, or a map keyed by variable name). */
  step(grads: Gradients): void {
    const aligned = this.align(grads);
    const { lr, eps, weightDecay } = this.cfg;
    const [beta1, beta2] = this.cfg.betas;
    // Every gradient is checked before any parameter or step count changes.
    aligned.forEach((g, i) => {
      const p = this.variables[i];
      if (g && !sameShape(g.shape, p.shape)) {
        throw new Error(`AdamW: gradient for '${p.name}' has shape [${g.shape}], variable has [${p.shape}]`);
      }
    });
    const updates: AdamWParamUpdate[] = [];
    aligned.forEach((g, i) => {
      if (!g) return;
      const p = this.variables[i];
      let slot = this.slots[i];
      if (!slot) {
        slot = { m: keptVariable(() => tf.zerosLike(p)), v: keptVariable(() => tf.zerosLike(p)), steps: 0 };
        this.slots[i] = slot;
      }
      slot.steps += 1;
      updates.push({ param: p, grad: g, m: slot.m, v: slot.v, step: slot.steps });
    });
    this.steps += 1;
    // One in-place kernel over every parameter where the backend has it (torch); else one update each.
    if (fusedAdamWInPlace(updates, { beta1, beta2, eps, lr, weightDecay })) return;
    for (const { param: p, grad: g, m: sm, v: sv, step: t } of updates) {
      // Scalars in float64 here, applied in float32 by the kernels, as torch does with Python floats.
      const stepSize = lr / (1 - beta1 ** t);
      const bc2Sqrt = Math.sqrt(1 - beta2 ** t);
      const s = { m: sm, v: sv };
      tf.tidy(() => {
        // Each temporary is freed as soon as it is used, and each moment replaced as soon as it is
        // computed: for a 150k-row embedding every one is hundreds of MB, and a dozen alive at once
        // overran the wasm heap. The operations and their order are unchanged.
        const free = (...ts: tf.Tensor[]): void => ts.forEach((x) => x.dispose());
        const grad = g.dtype === 'float32' ? g : tf.cast(g, 'float32');
        let a = tf.sub(grad, s.m);
        let b = tf.mul(a, 1 - beta1);
        free(a);
        const m = tf.add(s.m, b);
        free(b);
        s.m.assign(m);
        a = tf.mul(s.v, beta2);
        b = tf.mul(grad, grad);
        const c = tf.mul(b, 1 - beta2);
        free(b);
        const v = tf.add(a, c);
        free(a, c);
        s.v.assign(v);
        a = tf.sqrt(v);
        b = tf.div(a, bc2Sqrt);
        free(a);
        const denom = tf.add(b, eps);
        free(b);
        a = tf.div(m, denom);
        free(denom);
        b = tf.mul(a, stepSize);
        free(a);
        const decayed = weightDecay !== 0 ? tf.mul(p, 1 - lr * weightDecay) : p;
        const next = tf.sub(decayed, b);
        free(b);
        if (decayed !== p) free(decayed);
        p.assign(next);
      });
    }
  }

  /** A snapshot that {@link AdamW.setState} restores exactly (moments copied to the host). */
  getState(): AdamWState {
    return {
      ...this.getMeta(),
      m: this.variables.map((_, i) => this.momentValues(i, 'm')),
      v: this.variables.map((_, i) => this.momentValues(i, 'v')),
    };
  }

  /** {@link AdamW.getState} without the moments: what a checkpoint writer needs before it streams them. */
  getMeta(): Omit<AdamWState, 'm' | 'v'> {
    return {
      step: this.steps,
      paramSteps: this.slots.map((s) => s?.steps ?? 0),
      config: { ...this.cfg, betas: [this.cfg.betas[0], this.cfg.betas[1]] },
    };
  }

  /** One moment of variable `i` copied to the host (zeros before the variable's first update). */
  momentValues(i: number, which: 'm' | 'v'): Float32Array {
    const slot = this.slots[i];
    if (!slot) return new Float32Array(this.variables[i].size);
    return Float32Array.from(slot[which].dataSync() as Float32Array);
  }

  /**
   * Restores a snapshot from {@link AdamW.getState}, or a checkpoint's state whose moments are
   * read one at a time as they are uploaded; checks it against this optimizer's variables.
   */
  setState(state: AdamWRestorableState): void {
    const n = this.variables.length;
    const fail = (what: string): never => {
      throw new Error(`AdamW.setState: ${what}`);
    };
    if (!Number.isInteger(state.step) || state.step < 0) fail(`step must be an integer >= 0, got ${state.step}`);
    if (state.m.length !== n || state.v.length !== n || state.paramSteps.length !== n) {
      fail(`state has ${state.m.length} m / ${state.v.length} v / ${state.paramSteps.length} paramSteps entries, optimizer has ${n} variables`);
    }
    const config = resolveAdamWConfig(state.config);
    this.variables.forEach((p, i) => {
      const t = state.paramSteps[i];
      if (!Number.isInteger(t) || t < 0) fail(`paramSteps[${i}] must be an integer >= 0, got ${t}`);
      for (const [key, arr] of [['m', state.m[i]], ['v', state.v[i]]] as const) {
        if (!(arr instanceof Float32Array) && typeof (arr as Partial<StoredMoment> | undefined)?.read !== 'function') fail(`${key}[${i}] ('${p.name}') must be a Float32Array or a stored moment`);
        if (arr.length !== p.size) fail(`${key}[${i}] ('${p.name}') has ${arr.length} values, variable has ${p.size}`);
      }
    });
    this.disposeSlots();
    // Each moment is read, uploaded and dropped before the next (a stored one is never all on the host).
    const made: tf.Variable[] = [];
    const upload = (moment: MomentValues, shape: number[]): tf.Variable => {
      const v = keptVariable(() => uploadNow(tf.tensor(momentArray(moment), shape, 'float32')));
      made.push(v);
      return v;
    };
    try {
      this.slots = this.variables.map((p, i) =>
        state.paramSteps[i] === 0 ? null : { m: upload(state.m[i], p.shape), v: upload(state.v[i], p.shape), steps: state.paramSteps[i] },
      );
    } catch (err) {
      // A stored moment that cannot be read: free what was uploaded; the optimizer keeps no moments.
      tf.dispose(made);
      this.slots = this.variables.map(() => null);
      throw err;
    }
    this.steps = state.step;
    this.cfg = config;
  }

  /** Frees the moment tensors (the variables being optimised are the caller's). */
  dispose(): void {
    this.disposeSlots();
    this.slots = this.variables.map(() => null);
  }

  private disposeSlots(): void {
    for (const s of this.slots) {
      if (!s) continue;
      s.m.dispose();
      s.v.dispose();
    }
  }

  private align(grads: Gradients): (tf.Tensor | null | undefined)[] {
    if (Array.isArray(grads)) {
      if (grads.length !== this.variables.length) {
        throw new Error(`AdamW.step: got ${grads.length} gradients for ${this.variables.length} variables`);
      }
      return [...grads];
    }
    const out: (tf.Tensor | null)[] = this.variables.map(() => null);
    for (const [name, g] of Object.entries(grads as tf.NamedTensorMap)) {
      const i = this.index.get(name);
      if (i === undefined) throw new Error(`AdamW.step: gradient for '${name}', which is not one of the optimizer's variables`);
      out[i] = g;
    }
    return out;
  }
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** A non-trainable variable whose initial-value tensor is released (the variable keeps the data). */
function keptVariable(init: () => tf.Tensor): tf.Variable {
  return tf.tidy(() => tf.variable(init(), false));
}
