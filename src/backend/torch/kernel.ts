import type * as tf from '@tensorflow/tfjs';
import type { TorchBackend } from './backend.js';

/** A kernel's attributes as tfjs hands them over. */
export type KernelAttrs = Record<string, unknown>;

/** One tfjs kernel of the torch backend: its ATen calls. */
export interface TorchKernel {
  /** tfjs kernel name. */
  name: string;
  /** tfjs input names, in the order the implementation takes them (`*` = a list of inputs). */
  inputs: readonly string[];
  impl: (inputs: tf.TensorInfo[], attrs: KernelAttrs, b: TorchBackend) => tf.TensorInfo | tf.TensorInfo[];
}
