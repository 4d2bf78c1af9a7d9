/**
 * Critic models: a causal-LM backbone plus a value head read at one token.
 *
 * - Separate critic (CoMLRL's default, CoLLM-DC and CoLLM-CC): its own LM, head and tokenizer; the
 *   trainer gives it its own optimizer and learning rate.
 * - Shared head (CoLLM-DC's parameter-sharing variant, `use_separate_critic: false`): the head sits
 *   on the actor's own backbone; the actor's optimizer trains backbone and head together.
 *
 * Read-out is always the last token of the input row, no pooling: for V the input is the prompt
 * (so the last prompt token), for Q it is prompt + response (so the last response token). The
 * input builders in `inputs.ts` decide which text goes in. A head that reads numeric m_t
 * (`featureSize` > 0) takes one feature vector per row beside it.
 */
import * as tf from '@tensorflow/tfjs';
import { CRITIC_INPUT_KNOB } from '../memory/errors.js';
import { gatherRows } from '../backend/ops.js';
import type { CausalLM, PassMemory } from '../model/types.js';
import type { Tokenizer } from '../tokenizer/types.js';
import { headFeatureSize, type CriticHead } from './heads.js';

/** A separate critic's language model and the tokenizer its inputs are encoded with. */
export interface CriticLM {
  readonly model: CausalLM;
  readonly tokenizer: Tokenizer;
  /** Shown in logs and errors. */
  readonly name?: string;
}

/** Where a critic's value is read. */
export type CriticType = 'v' | 'q';

/**
 * Row `b` of `hidden [B, S, H]` at position `positions[b]`, as [B, H] (differentiable; a flat-index
 * gather, since `gather` with batchDims is wrong on wasm).
 */
export function readHiddenAt(hidden: tf.Tensor3D, positions: readonly number[]): tf.Tensor2D {
  const [b, s, h] = hidden.shape;
  if (positions.length !== b) throw new Error(`readHiddenAt: ${positions.length} positions for batch ${b}`);
  const flat = positions.map((p, i) => {
    if (!Number.isInteger(p) || p < 0 || p >= s) throw new Error(`readHiddenAt: position ${p} out of range [0, ${s}) in row ${i}`);
    return i * s + p;
  });
  return tf.tidy(() => gatherRows(tf.reshape(hidden, [b * s, h]) as tf.Tensor2D, flat));
}

/** A backbone + value head that scores token-id rows at their last token. */
export class ValueModel {
  /**
   * @param backbone the LM whose final-norm hidden states feed the head
   * @param head the value head (input size = backbone hidden size)
   * @param tokenizer the tokenizer critic inputs are encoded with
   * @param sharesBackbone true when `backbone` is an actor's model (shared-head mode)
   */
  constructor(
    readonly backbone: CausalLM,
    readonly head: CriticHead,
    readonly tokenizer: Tokenizer,
    readonly sharesBackbone: boolean,
  ) {
    if (head.inputSize !== backbone.hiddenSize) {
      throw new Error(`value head input size ${head.inputSize} does not match the backbone hidden size ${backbone.hiddenSize}`);
    }
  }

  /** Width of the numeric m_t the head reads beside the hidden state (0: none). */
  get featureSize(): number {
    return headFeatureSize(this.head);
  }

  /**
   * Values at the last token of each row, [B] (differentiable; call under a tape or tidy). `pass`:
   * a plan's for these rows (`backbone.planPasses`); default: the backbone's unplanned pass.
   * `features`: one global-feature vector per row, required exactly when the head reads them.
   */
  values(inputs: readonly number[][], pass?: PassMemory, features?: readonly (readonly number[])[] | null): tf.Tensor1D {
    if (inputs.length === 0) throw new Error('ValueModel.values: empty batch');
    inputs.forEach((row, i) => {
      if (row.length === 0) throw new Error(`ValueModel.values: input row ${i} is empty (a critic needs at least one token)`);
    });
    const f = this.checkFeatures(inputs.length, features);
    return tf.tidy(() => {
      const hidden = this.backbone.hiddenStates(inputs.map((r) => [...r]), pass);
      const picked = readHiddenAt(hidden, inputs.map((r) => r.length - 1));
      return this.head.apply(picked, f === null ? null : tf.tensor2d(f, [inputs.length, this.featureSize]));
    });
  }

  /**
   * Values as plain numbers, no gradient (rollout time), in micro-batches that fit the memory
   * budget (at most `batchSize` rows each when given). `features` as for {@link ValueModel.values}.
   */
  async predict(inputs: readonly number[][], batchSize: number | null = null, features: readonly (readonly number[])[] | null = null): Promise<number[]> {
    this.checkFeatures(inputs.length, features);
    const out: number[] = [];
    const rows = inputs.map((ids, i) => ({ ids, features: features?.[i] ?? null }));
    const plan = this.backbone.planPasses(rows, (r) => ({ width: r.ids.length, scored: 0 }), {
      label: 'critic values',
      backward: false,
      maxRows: batchSize,
      knobs: [CRITIC_INPUT_KNOB],
    });
    for (const batch of plan.batches) {
      const v = this.values(
        batch.map((r) => r.ids),
        plan.pass,
        features ? batch.map((r) => r.features as readonly number[]) : null,
      );
      out.push(...(await v.data()));
      v.dispose();
    }
    return out;
  }

  /** The rows' features flattened row-major (null without), after checking they fit the head. */
  private checkFeatures(n: number, features: readonly (readonly number[])[] | null | undefined): Float32Array | null {
    const width = this.featureSize;
    if (width === 0) {
      if (features) throw new Error('ValueModel: global features given, but the value head reads none (featureSize 0)');
      return null;
    }
    if (!features) throw new Error(`ValueModel: the value head reads ${width} global features per row, none given`);
    if (features.length !== n) throw new Error(`ValueModel: ${features.length} feature vectors for ${n} input rows`);
    const flat = new Float32Array(n * width);
    features.forEach((f, i) => {
      if (f.length !== width) throw new Error(`ValueModel: feature vector of row ${i} has ${f.length} entries, the value head reads ${width}`);
      f.forEach((x, j) => {
        if (!Number.isFinite(x)) throw new Error(`ValueModel: global feature ${j} of row ${i} is ${x} (need a finite number)`);
        flat[i * width + j] = x;
      });
    });
    return flat;
  }

  /**
   * Variables only this critic trains: the head, plus the backbone when it is the critic's own.
   * In shared-head mode the actor's optimizer already covers the backbone.
   */
  ownVariables(): tf.Variable[] {
    return this.sharesBackbone ? this.head.trainableVariables() : [...this.backbone.trainableVariables(), ...this.head.trainableVariables()];
  }

  /** Frees the head, and the backbone too when it is not shared with an actor. */
  dispose(): void {
    this.head.dispose();
    if (!this.sharesBackbone) this.backbone.dispose();
  }
}
