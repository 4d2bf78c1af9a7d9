/**
 * TensorBoard logging as a training callback: every metrics row the trainer logs during `train()`
 * (train rows, evaluations, epoch summaries) becomes one event of scalars at its env step, the
 * x-axis of metrics.jsonl. The loop stays as it is; the callback only listens to `onLog`.
 */
import type { TensorBoardWriter } from '../../src/logging/tensorboard.js';
import type { TrainerCallback } from './callbacks.js';

/**
 * A {@link TrainerCallback} writing each logged row to `writer` (open it with
 * `TensorBoardWriter.open(dir)`, passing `rows` on resume so no step shows twice). Evaluations
 * called outside `train()` send no `onLog` and are not written.
 *
 * @example
 * const tb = TensorBoardWriter.open('runs/my-run/tensorboard');
 * await trainer.train({ callbacks: [tensorBoardCallback(tb)] });
 */
export function tensorBoardCallback(writer: TensorBoardWriter): TrainerCallback {
  return {
    onLog: ({ envStep, metrics }) => {
      writer.write(envStep, metrics);
    },
  };
}
