/**
 * A test hook: `COMLRL_TEST_PAUSE_AT=point[@step][,...]` makes the CLI print
 * `[comlrl-test] paused at POINT step N` on stderr and wait `COMLRL_TEST_PAUSE_MS` (default 5000)
 * milliseconds when it reaches a named point, so a test can kill or signal the real process at
 * exactly that moment (half-way through writing a checkpoint or final/). Unset, it does nothing.
 *
 * Points: `checkpoint-write` (a checkpoint's weights are written, its manifest is not),
 * `final-write` (the same for final/), and two where the wait blocks the thread as a long stretch
 * of tensor work does (a signal is only noticed afterwards): `item-end` (a training item is done,
 * before the stop check: {@link testPauseCallback}, first of a run's callbacks) and `eval-batch` (an
 * eval batch is done; step = episodes so far).
 */
import type { TrainerCallback } from '../trainers/core/callbacks.js';

/** A named moment a test can pause at (see the module comment). */
export type PausePoint = 'checkpoint-write' | 'final-write' | 'item-end' | 'eval-batch';

/** The wait in milliseconds when the environment names `point` (at `step`), else undefined. */
function pauseMs(point: PausePoint, step: number): number | undefined {
  const spec = process.env.COMLRL_TEST_PAUSE_AT;
  if (!spec) return undefined;
  const hit = spec.split(',').some((p) => {
    const [name, at] = p.trim().split('@');
    return name === point && (at === undefined || Number(at) === step);
  });
  if (!hit) return undefined;
  process.stderr.write(`[comlrl-test] paused at ${point} step ${step}\n`);
  const ms = Number(process.env.COMLRL_TEST_PAUSE_MS ?? 5000);
  return Number.isFinite(ms) ? ms : 5000;
}

/** Waits at `point` (the event loop runs meanwhile) when the environment asks for it. */
export async function testPause(point: PausePoint, step: number): Promise<void> {
  const ms = pauseMs(point, step);
  if (ms !== undefined) await new Promise((resolve) => setTimeout(resolve, ms));
}

/** Blocks the thread at `point` (nothing else runs, as during tensor work) when the environment asks for it. */
export function testPauseBlocking(point: PausePoint, step: number): void {
  const ms = pauseMs(point, step);
  if (ms !== undefined) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** The training run's pause at `item-end` (blocking), as a callback: put it first, before any stop decision. */
export const testPauseCallback: TrainerCallback = {
  onItemEnd: ({ step }) => testPauseBlocking('item-end', step),
};
