/**
 * Trainer state for resume: everything besides the model weights that a run needs to continue
 * exactly where it stopped (step counters, dataset cursor, random streams, optimizer moments and any
 * trainer-specific buffers). The checkpoint layer serialises it; weights go through `saveAgents`.
 */
import { z } from 'zod';
import type { SerializableTrainerState } from '../../src/checkpoint/state.js';
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
// A type alias (not an interface) so that a snapshot is assignable to the checkpoint layer's
// SerializableTrainerState without a cast.
export type TrainerState<Extra> = {
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
};

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

const rngStateSchema = z.strictObject({
  kind: z.literal('arc4'),
  state: z.strictObject({ i: z.number(), j: z.number(), S: z.array(z.number()) }),
});

const adamWStateSchema = z.custom<AdamWState>(
  (v) => v !== null && typeof v === 'object' && Array.isArray((v as { m?: unknown }).m) && Array.isArray((v as { v?: unknown }).v),
  { error: 'an optimizer state must hold m and v' },
);

const trainerStateSchema = z.object({
  format: z.literal('comlrl-trainer-state'),
  version: z.literal(1),
  trainer: z.string(),
  numAgents: z.number().int().min(1),
  counters: z.record(z.string(), z.number()),
  cursor: z.object({ epoch: z.number().int().min(0), index: z.number().int().min(0) }),
  rng: z.record(z.string(), rngStateSchema),
  optimizers: z.array(adamWStateSchema),
  extra: z.unknown(),
});

/**
 * Checks the envelope of a trainer state read from a checkpoint (format, version, counters, cursor,
 * streams, optimizers) and types it; the trainer-specific `extra` stays `unknown` for the trainer's
 * `importState` to check.
 * @throws Error naming the first bad field.
 */
export function parseTrainerState(raw: SerializableTrainerState): TrainerState<unknown> {
  const r = trainerStateSchema.safeParse(raw);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new Error(`importState: not a comlrl trainer state v1: ${issue.path.map(String).join('.') || '(state)'}: ${issue.message}`);
  }
  return r.data;
}
