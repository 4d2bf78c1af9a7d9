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
 * input builders in `inputs.ts` decide which text goes in.
 */
import * as tf from '@tensorflow/tfjs';
import { CRITIC_INPUT_KNOB } from '../memory/errors.js';
import { gatherRows } from '../backend/ops.js';
import type { CausalLM, PassMemory } from '../model/types.js';
import type { Tokenizer } from '../tokenizer/types.js';
import type { CriticHead } from './heads.js';

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

  /**
   * Values at the last token of each row, [B] (differentiable; call under a tape or tidy). `pass`:
   * a plan's for these rows (`backbone.planPasses`); default: the backbone's unplanned pass.
   */
  values(inputs: readonly number[][], pass?: PassMemory): tf.Tensor1D {
    if (inputs.length === 0) throw new Error('ValueModel.values: empty batch');
    inputs.forEach((row, i) => {
      if (row.length === 0) throw new Error(`ValueModel.values: input row ${i} is empty (a critic needs at least one token)`);
    });
    return tf.tidy(() => {
      const hidden = this.backbone.hiddenStates(inputs.map((r) => [...r]), pass);
      const picked = readHiddenAt(hidden, inputs.map((r) => r.length - 1));
      return this.head.apply(picked);
    });
  }

  /**
   * Values as plain numbers, no gradient (rollout time), in micro-batches that fit the memory
   * budget (at most `batchSize` rows each when given).
   */
  async predict(inputs: readonly number[][], batchSize: number | null = null): Promise<number[]> {
    const out: number[] = [];
    const plan = this.backbone.planPasses(inputs, (r) => ({ width: r.length, scored: 0 }), {
      label: 'critic values',
      backward: false,
      maxRows: batchSize,
      knobs: [CRITIC_INPUT_KNOB],
    });
    for (const batch of plan.batches) {
      const v = this.values(batch, plan.pass);
      out.push(...(await v.data()));
      v.dispose();
    }
    return out;
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
