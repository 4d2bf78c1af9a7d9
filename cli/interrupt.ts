/**
 * Ctrl-C and SIGTERM for the long-running commands (train, demo, eval): the first signal asks the
 * work to stop at its next boundary (an aborted AbortSignal); a second one quits at once, except
 * while a checkpoint is being written: then it says so and quits as soon as the write is complete,
 * so the only copy of the training is never left half-written, printing the command that resumes
 * from that checkpoint.
 */
import { checkpointWriteActive, checkpointWritesIdle, checkpointWritesInProgress } from '../src/checkpoint/atomic.js';

/** What {@link handleInterrupts} installed. */
export interface InterruptHandle {
  /** Aborted by the first SIGINT / SIGTERM. */
  readonly signal: AbortSignal;
  /** Removes the signal listeners. */
  dispose(): void;
}

/**
 * Installs SIGINT / SIGTERM listeners. `firstMessage` is printed at the first signal (what happens
 * next); `exit` ends the process on a second signal (default `process.exit`, exit code 130).
 * `resumeCommand` gives the command that continues from a folder being written when the second
 * signal came (undefined: that folder is not one to resume from, e.g. final/); it is printed once
 * the write is complete. `runResume` gives the command that continues the run when no write is
 * under way (undefined: none yet), printed as it quits.
 */
export function handleInterrupts(
  log: (line: string) => void,
  firstMessage: string,
  exit: (code: number) => void = (code) => process.exit(code),
  resumeCommand: (written: string) => string | undefined = () => undefined,
  runResume: () => string | undefined = () => undefined,
): InterruptHandle {
  const controller = new AbortController();
  let count = 0;
  let exiting = false;
  const onSignal = (sig: NodeJS.Signals): void => {
    count++;
    const name = sig === 'SIGINT' ? 'interrupt' : `interrupt (${sig})`;
    if (count === 1) {
      log(`\n[comlrl] ${name}: ${firstMessage} (Ctrl-C again to quit at once)`);
      controller.abort();
      return;
    }
    if (exiting) return;
    exiting = true;
    if (checkpointWriteActive()) {
      log(`[comlrl] ${name} again: a checkpoint is being written; quitting as soon as it is complete (it is never left half-written)`);
      const resume = checkpointWritesInProgress()
        .map(resumeCommand)
        .find((c) => c !== undefined);
      void checkpointWritesIdle().then(() => {
        log(`[comlrl] checkpoint complete; quitting${resume !== undefined ? `; continue with: ${resume}` : ''}`);
        exit(130);
      });
    } else {
      const resume = runResume();
      log(`[comlrl] ${name} again: quitting now${resume !== undefined ? `; continue with: ${resume}` : ''}`);
      exit(130);
    }
  };
  // One listener per signal, each knowing its name (process.emit in tests passes no argument).
  const handlers = (['SIGINT', 'SIGTERM'] as const).map((sig) => [sig, () => onSignal(sig)] as const);
  for (const [sig, handler] of handlers) process.on(sig, handler);
  return {
    signal: controller.signal,
    dispose: () => {
      for (const [sig, handler] of handlers) process.off(sig, handler);
    },
  };
}

/**
 * Lets the event loop run once. Tensor work is synchronous and the trainers' awaits resolve as
 * microtasks, so without this a signal would be noticed only at the next file write.
 */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
