/**
 * A run's models by content, so that the run can move: each checkpoint records, for every model
 * folder the config names (`model.agent_model`, `model.agents[i]`, critics, reference, a trainer
 * section's own such as `marlhf.reward_model_name`), the path
 * the run's config hash covers (where it was when the run started) and the folder's identity
 * (src/checkpoint/model-identity.ts). A resume with the models at other paths goes on when the
 * models found there are the recorded ones, and is refused naming the key and the difference when
 * they are not. A checkpoint written before identities were recorded resumes only with its models
 * at the paths it names (as before).
 */
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import { CheckpointError } from '../../src/checkpoint/atomic.js';
import { modelIdentity, modelIdentityDifference, modelIdentitySchema } from '../../src/checkpoint/model-identity.js';
import { runModelPathsOf, withRunModelPaths } from '../../src/config/paths.js';
import type { RunConfig } from '../schemas.js';
import { runConfigHash } from './run-dir.js';

const recordedModelSchema = z.strictObject({
  /** Where the model was when the run started: the run's config hash covers this path. */
  path: z.string(),
  /** The folder's identity; null when it was not there to read (a legacy checkpoint's resume without it). */
  identity: modelIdentitySchema.nullable(),
});

/** The `models` field of a checkpoint's run_state.json: each model folder of the config, by key. */
export const modelRecordSchema = z.record(z.string(), recordedModelSchema);
/** See {@link modelRecordSchema}. */
export type ModelRecord = z.output<typeof modelRecordSchema>;

/** The record of a fresh run: each model folder of the config at its path, read now. */
export async function recordModels(config: RunConfig): Promise<ModelRecord> {
  const record: ModelRecord = {};
  for (const [key, dir] of runModelPathsOf(config)) record[key] = { path: dir, identity: existsSync(dir) ? await identityOf(key, dir) : null };
  return record;
}

/** `config` with the recorded model paths in place of its own: what the run's config hash covers. */
export function configWithRecordedPaths(config: RunConfig, record: ModelRecord): RunConfig {
  return withRunModelPaths(config, new Map(Object.entries(record).map(([k, m]) => [k, m.path])));
}

/** The run's config hash (see the module comment). */
export function runHash(config: RunConfig, record: ModelRecord): string {
  return runConfigHash(configWithRecordedPaths(config, record));
}

/**
 * The model paths a checkpoint's hash covers: its run_state.json `models` (identities recorded),
 * else the model section of its config.json (a checkpoint written before), else none known.
 * Read before the checkpoint is verified: what cannot be read here makes the hash check refuse it.
 */
export function recordedPaths(runState: unknown, checkpointConfig: unknown): { record: ModelRecord } | { legacy: Map<string, string> } | undefined {
  const models = isRecord(runState) ? runState.models : undefined;
  if (models !== undefined) {
    const parsed = modelRecordSchema.safeParse(models);
    return parsed.success ? { record: parsed.data } : undefined;
  }
  const model = isRecord(checkpointConfig) ? checkpointConfig.model : undefined;
  if (!isRecord(model)) return undefined;
  const paths = new Map<string, string>();
  for (const k of ['agent_model', 'critic_model', 'reference_model']) if (typeof model[k] === 'string') paths.set(`model.${k}`, model[k]);
  for (const k of ['agents', 'critics']) {
    const list = model[k];
    if (Array.isArray(list)) list.forEach((v: unknown, i) => typeof v === 'string' && paths.set(`model.${k}[${i}]`, v));
  }
  return { legacy: paths };
}

/**
 * Compares the models at the config's paths with what the checkpoint recorded, and returns the
 * record to carry on (the recorded paths, the identities filled in where a legacy checkpoint had
 * none). A folder that is not there is not compared (the resume names it if it loads from it).
 * @throws CheckpointError naming the key, both paths and what differs.
 */
export async function checkRecordedModels(config: RunConfig, recorded: { record: ModelRecord } | { legacy: Map<string, string> }, checkpoint: string): Promise<ModelRecord> {
  const out: ModelRecord = {};
  for (const [key, dir] of runModelPathsOf(config)) {
    const was = 'record' in recorded ? recorded.record[key] : undefined;
    const wasPath = 'record' in recorded ? was?.path : recorded.legacy.get(key);
    if (wasPath === undefined) {
      // The config hash check named any key the checkpoint does not have; this is a safeguard.
      throw new CheckpointError(`incompatible checkpoint: ${key} is not among the models the checkpoint recorded`, checkpoint);
    }
    const here = existsSync(dir);
    const found = here ? await identityOf(key, dir) : null;
    const identity = was?.identity ?? null;
    if (identity === null) {
      if (path.resolve(wasPath) !== path.resolve(dir)) {
        const why = 'legacy' in recorded ? 'this checkpoint was written before comlrl recorded models by content' : 'the checkpoint has no record of this model\'s content';
        throw new CheckpointError(
          `incompatible checkpoint: ${key} is ${dir} but the run used ${wasPath}; ${why}, so it resumes only with the model at that path (a symbolic link there will do)`,
          checkpoint,
        );
      }
      out[key] = { path: wasPath, identity: found };
      continue;
    }
    if (found !== null) {
      const diff = modelIdentityDifference(identity, found);
      if (diff !== undefined) {
        throw new CheckpointError(`incompatible checkpoint: ${key} (${dir}) is not the model the run was started with (${wasPath}): ${diff}`, checkpoint);
      }
    }
    out[key] = { path: wasPath, identity };
  }
  return out;
}

async function identityOf(key: string, dir: string) {
  try {
    return await modelIdentity(dir);
  } catch (err) {
    throw new Error(`${key}: cannot read model folder ${dir}: ${(err as Error).message}`);
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}
