/**
 * Trainer state for resume: everything besides the model weights that a run needs to continue
 * exactly where it stopped (step counters, dataset cursor, random streams, optimizer moments and any
 * trainer-specific buffers). The checkpoint layer serialises it; weights go through `saveAgents`.
 */
import type { AdamW, AdamWState } from '../../src/optim/adamw.js';
import type { RngState } from '../../src/util/rng.js';

/** Where in the training data a run is: the next item to process. */
export interface DatasetCursor {
  /** 0-based epoch. */
  readonly epoch: number;
  /** 0-based index of the next training item within the epoch. */
  readonly index: number;
}

/** A snapshot from `exportState()`; `importState()` of a trainer of the same kind resumes it. */
export interface TrainerState<Extra> {
  readonly format: 'comlrl-trainer-state';
  readonly version: 1;
  /** Which trainer wrote it ('magrpo', 'collm-dc', ...). */
  readonly trainer: string;
  /** Number of agents (optimizer count checks against it). */
  readonly numAgents: number;
  /** Monotone counters (env_step, optimizer steps, ...). */
  readonly counters: Readonly<Record<string, number>>;
  readonly cursor: DatasetCursor;
  /** The seeded streams by purpose. */
  readonly rng: Readonly<Record<string, RngState>>;
  /** One AdamW state per optimizer, in the trainer's order (agents first). */
  readonly optimizers: readonly AdamWState[];
  /** Trainer-specific JSON-able data (e.g. pending rollout buffers). */
  readonly extra: Extra;
}

/**
 * Checks that `state` was written by trainer `trainer` with `numAgents` agents and `optimizers`
 * optimizers; throws naming the mismatch.
 */
export function checkTrainerState<Extra>(
  state: TrainerState<Extra>,
  trainer: string,
  numAgents: number,
  optimizers: number,
): void {
  if (state.format !== 'comlrl-trainer-state' || state.version !== 1) {
    throw new Error(`importState: not a comlrl trainer state v1 (format ${String(state.format)}, version ${String(state.version)})`);
  }
  if (state.trainer !== trainer) throw new Error(`importState: the state is from trainer '${state.trainer}', this is '${trainer}'`);
  if (state.numAgents !== numAgents) throw new Error(`importState: the state has ${state.numAgents} agents, this trainer ${numAgents}`);
  if (state.optimizers.length !== optimizers) {
    throw new Error(`importState: the state has ${state.optimizers.length} optimizer states, this trainer ${optimizers} optimizers`);
  }
  const { epoch, index } = state.cursor;
  if (!Number.isInteger(epoch) || epoch < 0 || !Number.isInteger(index) || index < 0) {
    throw new Error(`importState: bad dataset cursor ${JSON.stringify(state.cursor)}`);
  }
}

/** Snapshots of several optimizers. */
export function optimizerStates(optimizers: readonly AdamW[]): AdamWState[] {
  return optimizers.map((o) => o.getState());
}

/** Restores optimizers from {@link optimizerStates} output (same order). */
export function restoreOptimizers(optimizers: readonly AdamW[], states: readonly AdamWState[]): void {
  if (states.length !== optimizers.length) throw new Error(`restoreOptimizers: ${states.length} states for ${optimizers.length} optimizers`);
  optimizers.forEach((o, i) => o.setState(states[i]));
}
