/**
 * Checkpoints and exact resume of a trainer, for a script as for the CLI: a checkpoint is the
 * trainer's saved models in float32 (its layout: `agent_i/`, critics), its state
 * (`trainer_state.json`: counters, dataset cursor, random streams, buffers; `optimizer.safetensors`:
 * the AdamW moments) and a manifest of sizes and SHA-256, written atomically (src/checkpoint). A
 * trainer built on a checkpoint's weights and given its state continues exactly where the run was:
 * the same bytes as a run that never stopped.
 *
 * ```ts
 * const root = 'runs/x/checkpoints';
 * const ckpt = await latestCheckpoint(root); // undefined on a fresh start
 * const agents = await Promise.all([0, 1].map((i) => loadAgent(ckpt ? agentDir(ckpt, i) : bases[i])));
 * const trainer = new MAGRPOTrainer({ agents, env, trainTasks, config });
 * if (ckpt) await resumeTrainer(trainer, ckpt);
 * await trainer.train({ callbacks: [checkpointEvery(2)], saveCheckpoint: checkpointWriter(trainer, root) });
 * ```
 */
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { CheckpointError, checkpointName, listCheckpoints, verifyCheckpoint, writeCheckpointAtomically, type CheckpointManifest } from '../../src/checkpoint/atomic.js';
import { readTrainerState } from '../../src/checkpoint/state.js';
import type { TrainerCallback } from './callbacks.js';
import type { SaveDtype, SaveOptions } from './save.js';
import { parseTrainerState, type DatasetCursor, type TrainerState } from './state.js';

/** Where a trainer is in its run: what a checkpoint's step is computed from. */
export interface TrainerPosition {
  /** The next training item. */
  readonly datasetCursor: DatasetCursor;
  /** Training items per epoch. */
  readonly itemsPerEpoch: number;
}

/** What writing a checkpoint needs of a trainer (every trainer of comlrl has it). */
export interface CheckpointableTrainer extends TrainerPosition {
  save(dir: string, options?: SaveOptions): Promise<unknown>;
  /** Writes `trainer_state.json` and `optimizer.safetensors` into `dir` (TrainerBase.writeState). */
  writeState(dir: string): Promise<void>;
}

/** What resuming needs of a trainer. */
export interface ResumableTrainer extends TrainerPosition {
  /** Checks a snapshot's trainer-specific part and restores it (each trainer's `importState`). */
  importState(state: TrainerState<unknown>): void;
}

/** Options of {@link writeCheckpoint} and {@link writeFinalModel}. */
export interface CheckpointOptions {
  /** The step recorded in the manifest (default: the trainer's, see {@link trainerStep}). */
  readonly step?: number;
  /** The run's config hash, recorded in the manifest: resuming with another hash is refused (default ''). */
  readonly configHash?: string;
  /** Runs once the trainer's files are in the unpublished directory, before the manifest seals it: a caller's own files go here. */
  readonly beforeManifest?: (tmpDir: string) => Promise<void>;
}

/** Training items done since the start of the run at `cursor`. */
export function cursorStep(cursor: DatasetCursor, itemsPerEpoch: number): number {
  return cursor.epoch * itemsPerEpoch + cursor.index;
}

/** Training items the trainer has done since the start of its run (a resumed run counts from the start). */
export function trainerStep(trainer: TrainerPosition): number {
  return cursorStep(trainer.datasetCursor, trainer.itemsPerEpoch);
}

/**
 * Writes a checkpoint of `trainer` into `dir`, atomically (a kill leaves the previous state or
 * this one, never half of it): the models in float32, the trainer state and the manifest. The
 * trainer logs no `final_model_saved` for it.
 */
export async function writeCheckpoint(trainer: CheckpointableTrainer, dir: string, options: CheckpointOptions = {}): Promise<CheckpointManifest> {
  const meta = { step: options.step ?? trainerStep(trainer), configHash: options.configHash ?? '' };
  return writeCheckpointAtomically(dir, meta, async (tmp) => {
    await trainer.save(tmp, { final: false });
    await trainer.writeState(tmp);
    await options.beforeManifest?.(tmp);
  });
}

/**
 * Writes the trained models into `dir` (e.g. a run's `final/`), atomically and with a manifest:
 * agents in `dtype`, with the merged LoRA models asked for (see SaveOptions). No trainer state.
 */
export async function writeFinalModel(
  trainer: CheckpointableTrainer,
  dir: string,
  options: CheckpointOptions & { readonly dtype?: SaveDtype; readonly merged?: SaveOptions['merged'] } = {},
): Promise<CheckpointManifest> {
  const meta = { step: options.step ?? trainerStep(trainer), configHash: options.configHash ?? '' };
  return writeCheckpointAtomically(dir, meta, async (tmp) => {
    await trainer.save(tmp, { dtype: options.dtype, merged: options.merged });
    await options.beforeManifest?.(tmp);
  });
}

/**
 * Reads a checkpoint's trainer state and gives it to `trainer` (its `importState` checks it). The
 * trainer must have been built on the checkpoint's weights (`agentDir(dir, i)`, the critics and
 * heads of its layout). Nothing is verified here: see {@link resumeTrainer}.
 * @throws CheckpointError when a state file is missing or unreadable; Error when the state is not this trainer's.
 */
export async function restoreTrainerState(trainer: ResumableTrainer, dir: string): Promise<void> {
  trainer.importState(parseTrainerState(await readTrainerState(dir)));
}

/**
 * Resumes `trainer` from the checkpoint `dir` (see the module comment): verifies every file
 * against the manifest (and the config hash, when given), restores the trainer state and checks
 * that the trainer is at the checkpoint's step. Returns that step; `trainer.train()` continues from it.
 * @throws CheckpointError naming a missing, damaged or foreign piece.
 */
export async function resumeTrainer(trainer: ResumableTrainer, dir: string, options: { readonly configHash?: string } = {}): Promise<number> {
  const manifest = await verifyCheckpoint(dir, { configHash: options.configHash });
  await restoreTrainerState(trainer, dir);
  const step = trainerStep(trainer);
  if (step !== manifest.step) throw new CheckpointError(`the manifest says step ${manifest.step} but the trainer state's cursor is at step ${step}`, dir);
  return step;
}

/** The newest checkpoint (`step-NNNNNN`, highest step) under `root`, or undefined when there is none. */
export async function latestCheckpoint(root: string): Promise<string | undefined> {
  return (await listCheckpoints(root))[0];
}

/** Removes all but the newest `keep` checkpoints under `root`. */
export async function pruneCheckpoints(root: string, keep: number): Promise<void> {
  for (const old of (await listCheckpoints(root)).slice(keep)) await fs.rm(old, { recursive: true, force: true });
}

/** Options of {@link checkpointWriter}. */
export interface CheckpointWriterOptions {
  /** Keep only the newest this many checkpoints (default: all). */
  readonly keep?: number;
  /** Recorded in each manifest (see {@link CheckpointOptions.configHash}). */
  readonly configHash?: string;
}

/**
 * A `train({ saveCheckpoint })` writer: writes `root/step-NNNNNN/` for the item's step (see
 * {@link writeCheckpoint}), drops all but the newest `keep`, and returns the directory.
 */
export function checkpointWriter(trainer: CheckpointableTrainer, root: string, options: CheckpointWriterOptions = {}): (event: { readonly step: number }) => Promise<string> {
  return async ({ step }) => {
    const dir = path.join(root, checkpointName(step));
    await writeCheckpoint(trainer, dir, { step, configHash: options.configHash });
    if (options.keep !== undefined) await pruneCheckpoints(root, options.keep);
    return dir;
  };
}

/**
 * A callback asking for a checkpoint (`control.save`) after every `every`-th training item of the
 * run; `train({ saveCheckpoint })` writes it, e.g. with {@link checkpointWriter}:
 * `trainer.train({ callbacks: [checkpointEvery(2)], saveCheckpoint: checkpointWriter(trainer, root) })`.
 */
export function checkpointEvery(every: number): TrainerCallback {
  if (!Number.isInteger(every) || every < 1) throw new Error(`checkpointEvery: every must be an integer >= 1, got ${every}`);
  return {
    onItemEnd: ({ step }, control) => {
      if (step % every === 0) control.save = true;
    },
  };
}
