/**
 * The callbacks of a CLI training run, one job each (the trainers' {@link TrainerCallback}s): stop
 * on `--stop-after` or a signal, draw the progress bar, ask for checkpoints. The other jobs have
 * theirs beside what they serve: the eval before and after training (evaluation.ts), the rewards
 * the bar shows (metrics.ts), the test pauses (../test-pause.ts).
 */
import { ProgressBar, type ProgressStream } from '../../src/logging/progress.js';
import type { TrainerCallback } from '../../trainers/core/callbacks.js';
import { yieldToEventLoop } from '../interrupt.js';
import type { Checkpointer } from './checkpoints.js';

/** Whether a stop is requested at `step`: `stopAfter` reached, or the signal aborted. */
export function stopRequested(step: number, stopAfter: number | undefined, signal: AbortSignal | undefined): boolean {
  return (stopAfter !== undefined && step >= stopAfter) || signal?.aborted === true;
}

/**
 * Stops the run (with a checkpoint: see {@link checkpointCallback}) once it reaches `stopAfter` or
 * when `signal` is aborted (Ctrl-C, SIGTERM). A run that starts at or past `stopAfter` trains
 * nothing; a signal is looked at only at item ends and phase steps (MARLHF's phase 1: it is then
 * left unfinished, with no checkpoint), after letting its handler run.
 */
export function stopCallback(stopAfter: number | undefined, signal: AbortSignal | undefined): TrainerCallback {
  return {
    onTrainBegin: ({ step }, control) => {
      if (stopAfter !== undefined && step >= stopAfter) control.stop = true;
    },
    onPhase: async (_event, control) => {
      // As at item ends: the phase's tensor work never yields either.
      await yieldToEventLoop();
      if (signal?.aborted === true) control.stop = true;
    },
    onItemEnd: async ({ step }, control) => {
      // Let a pending Ctrl-C / SIGTERM handler run: the item's tensor work never yields.
      await yieldToEventLoop();
      if (stopRequested(step, stopAfter, signal)) control.stop = true;
    },
  };
}

/** Options of {@link progressCallback}. */
export interface ProgressOptions {
  readonly label: string;
  /** Where the bar draws (default: stderr). */
  readonly stream?: ProgressStream | undefined;
  /** The run prints every metrics row instead: the bar stays hidden. */
  readonly verbose: boolean;
  /** The live values shown beside the bar. */
  readonly info: () => { reward?: number | undefined; eval?: number | undefined };
}

/**
 * The progress bar: starts at the run's step, moves at every item end, ends with training. Work
 * before the items (MARLHF's phase 1) gets a bar of its own per phase, e.g. `marlhf reward model
 * fit 3/40`.
 */
export function progressCallback(o: ProgressOptions): TrainerCallback {
  let bar: ProgressBar | null = null;
  const phases = new Map<string, ProgressBar>();
  return {
    onPhase: ({ phase, done, total }) => {
      if (o.verbose) return;
      let p = phases.get(phase);
      if (p === undefined) {
        p = new ProgressBar({ total: Math.max(1, total), label: `${o.label} ${phase}`, ...(o.stream ? { stream: o.stream } : {}) });
        phases.set(phase, p);
      }
      p.update(done);
    },
    onTrainBegin: ({ step, totalSteps }) => {
      bar = new ProgressBar({ total: Math.max(1, totalSteps), initial: step, label: o.label, ...(o.stream ? { stream: o.stream } : {}) });
      if (!o.verbose) bar.update(step, o.info());
    },
    onItemEnd: ({ step }) => {
      if (!o.verbose) bar?.update(step, o.info());
    },
    onTrainEnd: () => {
      for (const p of phases.values()) p.finish();
      bar?.finish();
    },
  };
}

/**
 * Asks for a checkpoint every `saveSteps` items (0: never) and when the run stops early (after
 * {@link stopCallback}, earlier in the list, decided it), unless this step already has one.
 */
export function checkpointCallback(checkpointer: Checkpointer, saveSteps: number): TrainerCallback {
  return {
    onItemEnd: ({ step }, control) => {
      const due = saveSteps > 0 && step % saveSteps === 0;
      if ((due || control.stop) && step !== checkpointer.lastStep) control.save = true;
    },
  };
}
