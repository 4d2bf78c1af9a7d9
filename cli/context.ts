/** What every command gets: where it writes. */
import type { ProgressStream } from '../src/logging/progress.js';

/** Where commands write. */
export interface CommandContext {
  /** Results (stdout). */
  out(line: string): void;
  /** Progress and diagnostics (stderr). */
  err(line: string): void;
  /** Progress bar stream (default stderr). */
  progress?: ProgressStream;
}
