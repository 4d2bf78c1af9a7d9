/**
 * Trainer state on disk: the JSON part of a trainer snapshot (counters, dataset cursor, random
 * stream states, replay buffers) in `trainer_state.json`, and the AdamW moments of every optimizer
 * in `optimizer.safetensors` (float32, bit-exact). Together with the weights they let a run resume
 * exactly where it stopped.
 */
import { existsSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { z } from 'zod';
import { numel, readSafetensorsHeader, readTensorNow, writeSafetensors, type DeferredNamedTensor, type SafetensorsHeader } from '../model/safetensors.js';
import { momentArray, type AdamW, type AdamWRestorableState, type StoredMoment } from '../optim/adamw.js';
import type { AdamWConfig } from '../optim/config.js';
import { CheckpointError } from './atomic.js';

/** JSON part of a trainer snapshot. */
export const TRAINER_STATE_FILE = 'trainer_state.json';
/** AdamW first/second moments of every optimizer. */
export const OPTIMIZER_STATE_FILE = 'optimizer.safetensors';

/**
 * A trainer snapshot as the trainers' `exportState()` return it (moments on the host), or as
 * {@link readTrainerState} returns it (moments read from the file when restored): JSON-able apart
 * from `optimizers`.
 */
export interface SerializableTrainerState {
  readonly optimizers: readonly AdamWRestorableState[];
  readonly [key: string]: unknown;
}

const optimizerMetaSchema = z.strictObject({
  step: z.number().int().nonnegative(),
  paramSteps: z.array(z.number().int().nonnegative()),
  sizes: z.array(z.number().int().nonnegative()),
  config: z.record(z.string(), z.unknown()),
});

// Non-finite numbers and typed arrays have no JSON form; they are tagged so they come back exactly.
function replacer(_key: string, value: unknown): unknown {
  if (typeof value === 'number' && !Number.isFinite(value)) return { __comlrl_number: String(value) };
  if (value instanceof Float32Array) return { __comlrl_f32: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64') };
  if (value instanceof Float64Array) return { __comlrl_f64: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64') };
  if (value instanceof Int32Array) return { __comlrl_i32: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64') };
  return value;
}

function fromBase64<T>(b64: string, make: (buf: ArrayBuffer) => T): T {
  const bytes = Buffer.from(b64, 'base64');
  const copy = new ArrayBuffer(bytes.length);
  new Uint8Array(copy).set(bytes);
  return make(copy);
}

function reviver(_key: string, value: unknown): unknown {
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    const v = value as Record<string, unknown>;
    const keys = Object.keys(v);
    if (keys.length === 1) {
      if (typeof v.__comlrl_number === 'string') return Number(v.__comlrl_number);
      if (typeof v.__comlrl_f32 === 'string') return fromBase64(v.__comlrl_f32, (b) => new Float32Array(b));
      if (typeof v.__comlrl_f64 === 'string') return fromBase64(v.__comlrl_f64, (b) => new Float64Array(b));
      if (typeof v.__comlrl_i32 === 'string') return fromBase64(v.__comlrl_i32, (b) => new Int32Array(b));
    }
  }
  return value;
}

/** JSON text of a value with non-finite numbers and typed arrays preserved (see {@link parseStateJson}). */
export function stringifyStateJson(value: unknown): string {
  return JSON.stringify(value, replacer);
}

/** Inverse of {@link stringifyStateJson}. */
export function parseStateJson(text: string): unknown {
  return JSON.parse(text, reviver);
}

/**
 * Writes a trainer snapshot into `dir`: `optimizer.safetensors` with tensors `opt{k}.m.{i}` and
 * `opt{k}.v.{i}` (1-D float32), and `trainer_state.json` with everything else plus each
 * optimizer's step counts, variable sizes and settings. With `live`, the moments come from those
 * optimizers (the state then carries none), each copied to the host just before it is written:
 * a large run never holds all of them on the host at once.
 */
export async function writeTrainerState(dir: string, state: SerializableTrainerState, live?: readonly AdamW[]): Promise<void> {
  await fs.mkdir(dir, { recursive: true });
  if (live && state.optimizers.length > 0) throw new Error('writeTrainerState: give the optimizers either in the state or live, not both');
  // One source per optimizer: a snapshot's host arrays, or a live optimizer's moments copied from
  // the backend one at a time as they are written.
  const sources = live
    ? live.map((o) => ({ meta: o.getMeta(), sizes: o.variables.map((v) => v.size), read: (which: 'm' | 'v', i: number) => o.momentValues(i, which) }))
    : state.optimizers.map((o) => ({ meta: o, sizes: o.m.map((m) => m.length), read: (which: 'm' | 'v', i: number) => momentArray(o[which][i]) }));
  const tensors: DeferredNamedTensor[] = [];
  const metas = sources.map(({ meta, sizes, read }, k) => {
    for (const which of ['m', 'v'] as const) sizes.forEach((size, i) => tensors.push({ name: `opt${k}.${which}.${i}`, shape: [size], read: () => read(which, i) }));
    return { step: meta.step, paramSteps: [...meta.paramSteps], sizes, config: { ...meta.config } };
  });
  writeSafetensors(path.join(dir, OPTIMIZER_STATE_FILE), tensors, 'F32', { format: 'comlrl-optimizer' });
  const { optimizers: _omitted, ...rest } = state;
  await fs.writeFile(path.join(dir, TRAINER_STATE_FILE), `${stringifyStateJson({ ...rest, optimizers: metas })}\n`);
}

/**
 * Reads a snapshot written by {@link writeTrainerState}. Checks that both files exist and that the
 * optimizer file holds every moment with the recorded size; the moments themselves are read from
 * the file only when an optimizer is restored from them (`AdamW.setState`), one at a time, so a
 * large run's moments (7.5 GB for two 0.47 B full fine-tunes) are never all on the host at once.
 * @throws CheckpointError naming the missing or inconsistent piece.
 */
export async function readTrainerState(dir: string): Promise<SerializableTrainerState> {
  const jsonPath = path.join(dir, TRAINER_STATE_FILE);
  const optPath = path.join(dir, OPTIMIZER_STATE_FILE);
  if (!existsSync(jsonPath)) throw new CheckpointError(`missing trainer state (${TRAINER_STATE_FILE}): counters, dataset cursor and RNG states cannot be restored`, dir);
  if (!existsSync(optPath)) throw new CheckpointError(`missing optimizer state (${OPTIMIZER_STATE_FILE}): AdamW moments cannot be restored`, dir);
  let parsed: unknown;
  try {
    parsed = parseStateJson(await fs.readFile(jsonPath, 'utf8'));
  } catch (err) {
    throw new CheckpointError(`${TRAINER_STATE_FILE} is not valid JSON: ${(err as Error).message}`, dir);
  }
  if (!parsed || typeof parsed !== 'object' || !Array.isArray((parsed as { optimizers?: unknown }).optimizers)) {
    throw new CheckpointError(`${TRAINER_STATE_FILE} has no 'optimizers' list`, dir);
  }
  const raw = parsed as Record<string, unknown> & { optimizers: unknown[] };
  let header: SafetensorsHeader;
  try {
    header = readSafetensorsHeader(optPath);
  } catch (err) {
    throw new CheckpointError(`optimizer state ${OPTIMIZER_STATE_FILE} is unreadable: ${(err as Error).message}`, dir);
  }
  const optimizers: AdamWRestorableState[] = raw.optimizers.map((metaRaw, k) => {
    const meta = optimizerMetaSchema.safeParse(metaRaw);
    if (!meta.success) {
      const issue = meta.error.issues[0];
      throw new CheckpointError(`${TRAINER_STATE_FILE}: optimizers[${k}].${issue.path.join('.')}: ${issue.message}`, dir);
    }
    const stored = (kind: 'm' | 'v', i: number): StoredMoment => {
      const name = `opt${k}.${kind}.${i}`;
      const entry = header.entries.get(name);
      if (!entry) throw new CheckpointError(`optimizer state ${OPTIMIZER_STATE_FILE} lacks tensor ${name}`, dir);
      const length = numel(entry.shape);
      if (entry.dtype !== 'F32' || length !== meta.data.sizes[i]) {
        throw new CheckpointError(`optimizer state tensor ${name} is ${entry.dtype}[${entry.shape.join(',')}], expected F32 with ${meta.data.sizes[i]} values`, dir);
      }
      return { length, read: () => readTensorNow(header, name).data };
    };
    return {
      step: meta.data.step,
      paramSteps: meta.data.paramSteps,
      m: meta.data.sizes.map((_, i) => stored('m', i)),
      v: meta.data.sizes.map((_, i) => stored('v', i)),
      config: meta.data.config as unknown as AdamWConfig,
    };
  });
  return { ...raw, optimizers };
}
