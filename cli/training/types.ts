/** What a training run (`runTraining` of cli/run.ts) takes and returns. */
import type { BackendName } from '../../src/backend/init.js';
import type { ProgressStream } from '../../src/logging/progress.js';
import type { RunConfig } from '../schemas.js';
import type { EvalSummary } from './evaluation.js';
import type { ResumePoint } from './resume.js';

/** Options of `runTraining`. */
export interface RunOptions {
  readonly config: RunConfig;
  /** A checkpoint directory to continue from (see `resolveResume`). */
  readonly resume?: ResumePoint;
  /**
   * A run directory that has no checkpoint yet (see `NoCheckpointError`): the run starts again
   * from step 0 in it, replacing what the stopped attempt left.
   */
  readonly restartIn?: string;
  /** Stop (as if interrupted, writing a checkpoint) once the run reaches this step. */
  readonly stopAfter?: number;
  /** Aborting it stops the run at the next item boundary, with a checkpoint (or at a phase step before the items, without one). */
  readonly signal?: AbortSignal;
  /** Told the run directory once it is opened (a second Ctrl-C names the command that continues it). */
  readonly onRunDir?: (runDir: string) => void;
  /** Human-readable output (default: stderr). */
  readonly log?: (line: string) => void;
  /** Where the progress bar draws (default: stderr). */
  readonly progress?: ProgressStream;
  /** Label of the progress bar. */
  readonly label?: string;
  /**
   * How the user chooses the run directory, for messages (default `output.dir`; the demo's `--out`).
   * With `--out` the hints do not mention `--resume`, which only `train` has.
   */
  readonly outOption?: string;
}

/** What `runTraining` returns. */
export interface RunResult {
  readonly runDir: string;
  /** Steps (training items) done. */
  readonly step: number;
  readonly totalSteps: number;
  /** false when stopped early (stopAfter or signal): resume it with `--resume runDir`. */
  readonly completed: boolean;
  readonly before?: EvalSummary;
  readonly after?: EvalSummary;
  readonly checkpoints: readonly string[];
  readonly plots: readonly string[];
  readonly finalDir?: string;
  readonly configHash: string;
  readonly backend: BackendName;
  readonly seconds: number;
  readonly tokensPerSecond: number;
  readonly peakRssBytes: number;
  /** Highest tfjs tensor bytes sampled during the run. */
  readonly peakTensorBytes?: number;
  /** The wasm heap's high-water mark (null on other backends). */
  readonly wasmHeapBytes?: number | null;
  /** The GPU's peak of allocated bytes (torch on a GPU; null elsewhere). */
  readonly gpuPeakBytes?: number | null;
}
