/**
 * Activation recomputation (gradient checkpointing) for one block of a network: the forward pass
 * keeps only the block's input; the backward pass runs the block again under a fresh tape and
 * differentiates that. Memory for the tape drops from every activation of every layer to one
 * input per layer plus one layer's activations, for one extra forward pass.
 */
import * as tf from '@tensorflow/tfjs';
import { custom } from '../backend/ops.js';

interface EngineState {
  activeTape: unknown;
}

// tfjs's engine keeps one global tape. A gradient taken inside another gradient's backward pass
// (as recomputation does) replaces it and sets it to null when done, so the outer pass would then
// fail to release its own saved tensors. The outer tape is put back after the inner pass.
function engineState(): EngineState {
  return (tf.engine() as unknown as { state: EngineState }).state;
}

/**
 * `fn(x, consts)` whose backward pass recomputes `fn` instead of keeping its activations.
 * `consts` are other tensors `fn` reads that may be freed before the backward pass (RoPE tables,
 * masks): they are kept for it. `params` are the trainable tensors `fn` reads (they receive
 * gradients). `fn` must be deterministic (the recomputation must see the same values, e.g. the
 * same dropout masks). `hold`, when given, makes tensors `fn` reads without saving them (weights
 * uploaded per use) live from before each run of `fn` until its gradients are taken; it returns
 * the function that frees them.
 */
export function recomputed(
  fn: (x: tf.Tensor2D, consts: readonly tf.Tensor[]) => tf.Tensor2D,
  x: tf.Tensor2D,
  consts: readonly tf.Tensor[],
  params: readonly tf.Variable[],
  hold?: () => () => void,
): tf.Tensor2D {
  const op = custom(([input]: [tf.Tensor2D, ...tf.Variable[]], save) => {
    save([input, ...consts]);
    const release = hold?.();
    let value: tf.Tensor2D;
    try {
      value = fn(input, consts);
    } finally {
      release?.();
    }
    return {
      value,
      gradFunc: (dy: tf.Tensor2D, saved: tf.Tensor[]) => {
        const state = engineState();
        const outerTape = state.activeTape;
        // The inner tape's backward pass runs after `fn` has returned, inside `gradients`.
        const releaseInner = hold?.();
        try {
          const xs = [saved[0], ...params];
          const { value, grads } = tf.engine().gradients(() => fn(saved[0] as tf.Tensor2D, saved.slice(1)), xs, dy, true);
          value.dispose();
          return grads.map((g, i) => g ?? tf.zerosLike(xs[i]));
        } finally {
          releaseInner?.();
          state.activeTape = outerTape;
        }
      },
    };
  });
  return op(x, ...params);
}
