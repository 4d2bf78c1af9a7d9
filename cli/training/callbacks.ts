/**
 * Run callbacks, as the Hugging Face Trainer's: the run loop reports each training item's end to a
 * list of callbacks, each with one job (progress bar, checkpoints, stopping). A stop request (the
 * `--stop-after` step, or Ctrl-C / SIGTERM) is decided once per item and passed to all of them.
 */
import type { ProgressBar } from '../../src/logging/progress.js';
import type { Checkpointer } from './checkpoints.js';

/** The end of one training item. */
export interface ItemEnd {
  /** Training items done since the start of the run. */
  readonly step: number;
  /** A stop was requested: the run ends after this item (with a checkpoint). */
  readonly stop: boolean;
}

/** Something the run loop calls at every item end, in list order. */
export interface RunCallback {
  onItemEnd(event: ItemEnd): Promise<void> | void;
}

/** Thrown by {@link stopCallback} to end the training loop early. */
export class StopRun extends Error {
  constructor() {
    super('stop requested');
    this.name = 'StopRun';
  }
}

/** Whether a stop is requested at `step`: `stopAfter` reached, or the signal aborted. */
export function stopRequested(step: number, stopAfter: number | undefined, signal: AbortSignal | undefined): boolean {
  return (stopAfter !== undefined && step >= stopAfter) || signal?.aborted === true;
}

/** Moves the progress bar (unless the run prints every metrics row instead). */
export function progressCallback(bar: ProgressBar, info: () => { reward?: number | undefined; eval?: number | undefined }, verbose: boolean): RunCallback {
  return {
    onItemEnd: ({ step }) => {
      if (!verbose) bar.update(step, info());
    },
  };
}

/** Writes a checkpoint every `saveSteps` items (0: never) and when the run stops early. */
export function checkpointCallback(checkpointer: Checkpointer, saveSteps: number): RunCallback {
  return {
    onItemEnd: async ({ step, stop }) => {
      const due = saveSteps > 0 && step % saveSteps === 0;
      if ((due || stop) && step !== checkpointer.lastStep) await checkpointer.write(step);
    },
  };
}

/** Ends the loop when a stop was requested (after the callbacks before it, e.g. the checkpoint). */
export const stopCallback: RunCallback = {
  onItemEnd: ({ stop }) => {
    if (stop) throw new StopRun();
  },
};
