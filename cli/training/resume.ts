/**
 * Resuming: finding and fully verifying the checkpoint to continue from before anything is
 * written, and telling a run that already finished (nothing left to do) from one that has work.
 */
import { existsSync, readFileSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { CheckpointError, listCheckpoints, verifyCheckpoint, MANIFEST_FILE } from '../../src/checkpoint/atomic.js';
import { OPTIMIZER_STATE_FILE, readTrainerState, TRAINER_STATE_FILE } from '../../src/checkpoint/state.js';
import { stableStringify } from '../../src/config/hash.js';
import { parseRunConfig, runConfigIdentity } from '../../src/config/schema.js';
import { agentDir, agentDirName } from '../../trainers/core/save.js';
import type { RunConfig } from '../schemas.js';
import { CHECKPOINT_CONFIG_FILE, RUN_STATE_FILE } from './checkpoints.js';
import { readRunJson, type EvalSummary } from './evaluation.js';
import { checkRecordedModels, configWithRecordedPaths, recordedPaths, recordModels, type ModelRecord } from './models.js';
import { isNonEmptyRun, RUN_FILES, runConfigHash } from './run-dir.js';

/** A verified checkpoint to resume from. */
export interface ResumePoint {
  readonly runDir: string;
  readonly checkpoint: string;
  readonly step: number;
  readonly metricsRows: number;
  readonly elapsedS: number;
  readonly tokens: number;
  /** The run's config hash, over the model paths the run started with (see ./models.ts). */
  readonly configHash: string;
  /** The run's models, checked against the ones at this config's paths: what new checkpoints record. */
  readonly models: ModelRecord;
  /**
   * The run's newest checkpoint when this point was resolved: the run refuses to start when
   * another run has gone past it since (see cli/training/claim.ts). Absent: not checked.
   */
  readonly newestCheckpoint?: string;
}

/** `--resume` of a run directory that holds no checkpoint yet (the run stopped before its first one). */
export class NoCheckpointError extends CheckpointError {
  constructor(readonly runDir: string) {
    super(`no checkpoint under ${path.join(runDir, RUN_FILES.checkpoints)} yet`, runDir);
    this.name = 'NoCheckpointError';
  }
}

function flatDiff(a: unknown, b: unknown, prefix = ''): string[] {
  if (stableStringify(a) === stableStringify(b)) return [];
  const isObj = (v: unknown) => v !== null && typeof v === 'object' && !Array.isArray(v);
  if (isObj(a) && isObj(b)) {
    const keys = [...new Set([...Object.keys(a as object), ...Object.keys(b as object)])].sort();
    return keys.flatMap((k) => flatDiff((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], prefix ? `${prefix}.${k}` : k));
  }
  const show = (v: unknown) => (v === undefined ? '(unset)' : JSON.stringify(v));
  return [`${prefix || '(config)'}: checkpoint ${show(a)}, this run ${show(b)}`];
}

/**
 * Finds and fully verifies the checkpoint to resume: `dir` is a run directory (its newest
 * checkpoint is used) or one checkpoint directory. Nothing is written.
 * @throws CheckpointError naming the problem (missing, damaged, incompatible config, missing state).
 */
export async function resolveResume(dir: string, config: RunConfig): Promise<ResumePoint> {
  const abs = path.resolve(dir);
  if (!existsSync(abs)) throw new CheckpointError('resume directory not found', abs);
  let checkpoint: string;
  let runDir: string;
  let newestCheckpoint: string | undefined;
  if (existsSync(path.join(abs, MANIFEST_FILE)) || /^step-\d+$/.test(path.basename(abs))) {
    checkpoint = abs;
    runDir = path.dirname(path.dirname(abs));
    [newestCheckpoint] = await listCheckpoints(path.join(runDir, RUN_FILES.checkpoints));
  } else {
    const found = await listCheckpoints(path.join(abs, RUN_FILES.checkpoints));
    if (found.length === 0) {
      if (await isNonEmptyRun(abs)) throw new NoCheckpointError(abs);
      throw new CheckpointError(`not a run directory: no ${RUN_FILES.config}, ${RUN_FILES.run}, ${RUN_FILES.metrics} or ${RUN_FILES.checkpoints}/ there`, abs);
    }
    checkpoint = found[0];
    newestCheckpoint = found[0];
    runDir = abs;
  }
  if (!existsSync(checkpoint)) throw new CheckpointError('checkpoint directory not found', checkpoint);
  // The pieces exact resume cannot do without, named before the generic manifest check.
  const required: [string, string][] = [
    [OPTIMIZER_STATE_FILE, 'optimizer state (AdamW moments)'],
    [TRAINER_STATE_FILE, 'trainer state (counters, dataset cursor, RNG streams, buffers)'],
    [RUN_STATE_FILE, 'run state (step, metrics position)'],
    [agentDirName(0), 'agent weights'],
  ];
  for (const [file, what] of required) {
    if (!existsSync(path.join(checkpoint, file))) throw new CheckpointError(`damaged checkpoint: missing ${what}: ${file}`, checkpoint);
  }
  // The hash covers the model paths the run started with (recorded in the checkpoint); the models
  // at this config's paths are compared by content below, once every file is verified.
  const recorded = recordedPaths(readJsonOrUndefined(path.join(checkpoint, RUN_STATE_FILE)), readJsonOrUndefined(path.join(checkpoint, CHECKPOINT_CONFIG_FILE)));
  const hashConfig = recorded === undefined ? config : configWithRecordedPaths(config, 'record' in recorded ? recorded.record : legacyRecord(recorded.legacy));
  const hash = runConfigHash(hashConfig);
  try {
    await verifyCheckpoint(checkpoint, { configHash: hash });
  } catch (err) {
    if (err instanceof CheckpointError && /config mismatch/.test(err.message)) {
      // Name the keys that differ, when the checkpoint's config is readable.
      let detail = '';
      try {
        const saved = JSON.parse(readFileSync(path.join(checkpoint, CHECKPOINT_CONFIG_FILE), 'utf8')) as Record<string, unknown>;
        const diffs = flatDiff(savedIdentity(saved), runConfigIdentity(hashConfig));
        if (diffs.length > 0) detail = `; differing keys: ${diffs.slice(0, 8).join('; ')}`;
      } catch {
        // The hash comparison alone already refused it.
      }
      throw new CheckpointError(`incompatible checkpoint: ${err.message.replace(/ \(checkpoint: .*\)$/, '')}${detail}`, checkpoint);
    }
    if (err instanceof CheckpointError) throw new CheckpointError(`damaged checkpoint: ${err.message.replace(/ \(checkpoint: .*\)$/, '')}`, checkpoint);
    throw err;
  }
  const models = recorded === undefined ? await recordModels(config) : await checkRecordedModels(config, recorded, checkpoint);
  // Loads (and checks) the trainer and optimizer state now, so a missing piece is refused before any write.
  await readTrainerState(checkpoint);
  const rsPath = path.join(checkpoint, RUN_STATE_FILE);
  if (!existsSync(rsPath)) throw new CheckpointError(`missing ${RUN_STATE_FILE} (step counters)`, checkpoint);
  const rs = JSON.parse(await fs.readFile(rsPath, 'utf8')) as { step?: unknown; metrics_rows?: unknown; elapsed_s?: unknown; tokens?: unknown };
  if (typeof rs.step !== 'number' || typeof rs.metrics_rows !== 'number') throw new CheckpointError(`${RUN_STATE_FILE} lacks step / metrics_rows`, checkpoint);
  for (let i = 0; i < 64; i++) {
    const dir = agentDir(checkpoint, i);
    if (!existsSync(dir)) break;
    // LoRA checkpoints hold PEFT adapters (the base comes from the config's model paths).
    const weights = config.model.lora ? ['adapter_config.json', 'adapter_model.safetensors'] : ['config.json', 'model.safetensors'];
    for (const f of [...weights, 'tokenizer.json']) {
      if (!existsSync(path.join(dir, f))) throw new CheckpointError(`${agentDirName(i)} lacks ${f}`, checkpoint);
    }
  }
  return {
    runDir,
    checkpoint,
    step: rs.step,
    metricsRows: rs.metrics_rows,
    elapsedS: typeof rs.elapsed_s === 'number' ? rs.elapsed_s : 0,
    tokens: typeof rs.tokens === 'number' ? rs.tokens : 0,
    configHash: hash,
    models,
    ...(newestCheckpoint !== undefined ? { newestCheckpoint } : {}),
  };
}

/** A legacy checkpoint's model paths as a record without identities (for the hash only). */
function legacyRecord(paths: ReadonlyMap<string, string>): ModelRecord {
  return Object.fromEntries([...paths].map(([k, p]) => [k, { path: p, identity: null }]));
}

/** A JSON file's content, or undefined when it is missing or not JSON (the manifest check names that). */
function readJsonOrUndefined(file: string): unknown {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * The identity part of a checkpoint's config.json, as {@link runConfigIdentity} makes it (so that
 * fields it leaves out at their defaults are not listed as differences); the document minus the
 * settings outside the identity when it no longer parses.
 */
function savedIdentity(doc: Record<string, unknown>): Record<string, unknown> {
  try {
    return runConfigIdentity(parseRunConfig(doc));
  } catch {
    return stripIdentity(doc);
  }
}

function stripIdentity(doc: Record<string, unknown>): Record<string, unknown> {
  const out = { ...doc };
  delete out.output;
  delete out.logging;
  delete out.backend;
  delete out.memory;
  return out;
}

/**
 * The final results of a finished run (eval.json's after-training eval when one is configured,
 * final/ when the config saves it), or null when any is missing and the run still has work.
 */
export async function finishedRun(
  runDir: string,
  config: RunConfig,
  at: { totalSteps: number; checkpointAtEnd: boolean; hash: string },
): Promise<{ before?: EvalSummary; after?: EvalSummary; finalDir?: string } | null> {
  const finalDir = path.join(runDir, RUN_FILES.final);
  if (config.output.save_final_model) {
    // Complete only when final/ verifies (manifest, sizes, SHA-256) and was written at the last step.
    try {
      const manifest = await verifyCheckpoint(finalDir, { configHash: at.hash });
      if (manifest.step !== at.totalSteps) return null;
    } catch {
      return null;
    }
  } else if (!at.checkpointAtEnd) {
    return null;
  }
  const evalPath = path.join(runDir, RUN_FILES.eval);
  const record = await readRunJson<{ before: EvalSummary; after: EvalSummary }>(evalPath, () => {});
  if (config.output.eval_before_after && record.after === undefined && record.before !== undefined) return null;
  return {
    ...(record.before ? { before: record.before } : {}),
    ...(record.after ? { after: record.after } : {}),
    ...(config.output.save_final_model ? { finalDir } : {}),
  };
}
