import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { z } from 'zod';

/** Raised for a checkpoint that is damaged, incomplete or does not belong to the run. */
export class CheckpointError extends Error {
  constructor(
    message: string,
    readonly checkpointDir: string,
  ) {
    super(`${message} (checkpoint: ${checkpointDir})`);
    this.name = 'CheckpointError';
  }
}

export const MANIFEST_FILE = 'manifest.json';

const manifestSchema = z.object({
  format: z.literal('comlrl-checkpoint'),
  version: z.literal(1),
  step: z.number().int().nonnegative(),
  configHash: z.string(),
  createdAt: z.string(),
  files: z.array(
    z.object({ path: z.string(), bytes: z.number().int().nonnegative(), sha256: z.string().length(64) }),
  ),
});

/** The manifest written last into every checkpoint: what a complete checkpoint holds. */
export type CheckpointManifest = z.infer<typeof manifestSchema>;

async function sha256(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

async function listFiles(dir: string, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await fs.readdir(path.join(dir, prefix), { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...(await listFiles(dir, rel)));
    else if (entry.isFile() && rel !== MANIFEST_FILE) out.push(rel);
  }
  return out.sort();
}

async function fsyncPath(p: string): Promise<void> {
  const handle = await fs.open(p, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Writes a checkpoint atomically: `write` fills a temporary sibling directory, a manifest with
 * sizes and SHA-256 of every file is added, then one rename publishes it. A crash at any point
 * leaves either the previous checkpoint or the new one, never a half-written directory under
 * the final name. An existing checkpoint of the same name is replaced only after the new one is
 * complete.
 */
export async function writeCheckpointAtomically(
  finalDir: string,
  meta: { step: number; configHash: string },
  write: (tmpDir: string) => Promise<void>,
): Promise<CheckpointManifest> {
  const parent = path.dirname(finalDir);
  await fs.mkdir(parent, { recursive: true });
  const tmp = path.join(parent, `.${path.basename(finalDir)}.tmp-${process.pid}-${Date.now()}`);
  await fs.rm(tmp, { recursive: true, force: true });
  await fs.mkdir(tmp, { recursive: true });
  try {
    await write(tmp);
    const files = [];
    for (const rel of await listFiles(tmp)) {
      const abs = path.join(tmp, rel);
      await fsyncPath(abs);
      files.push({ path: rel, bytes: (await fs.stat(abs)).size, sha256: await sha256(abs) });
    }
    const manifest: CheckpointManifest = {
      format: 'comlrl-checkpoint',
      version: 1,
      step: meta.step,
      configHash: meta.configHash,
      createdAt: new Date().toISOString(),
      files,
    };
    await fs.writeFile(path.join(tmp, MANIFEST_FILE), JSON.stringify(manifest, null, 2));
    await fsyncPath(path.join(tmp, MANIFEST_FILE));
    const old = `${tmp}.old`;
    const hadOld = await exists(finalDir);
    if (hadOld) await fs.rename(finalDir, old);
    await fs.rename(tmp, finalDir);
    if (hadOld) await fs.rm(old, { recursive: true, force: true });
    return manifest;
  } catch (err) {
    await fs.rm(tmp, { recursive: true, force: true });
    throw err;
  }
}

async function exists(p: string): Promise<boolean> {
  try {
    await fs.stat(p);
    return true;
  } catch {
    return false;
  }
}

/**
 * Checks a checkpoint before anything is loaded from it: the manifest parses, every listed file
 * is present with its recorded size and hash, and (when given) the config hash matches the run.
 */
export async function verifyCheckpoint(
  dir: string,
  expect?: { configHash?: string },
): Promise<CheckpointManifest> {
  const manifestPath = path.join(dir, MANIFEST_FILE);
  let raw: string;
  try {
    raw = await fs.readFile(manifestPath, 'utf8');
  } catch {
    throw new CheckpointError(`missing ${MANIFEST_FILE}: the checkpoint is incomplete or not a comlrl checkpoint`, dir);
  }
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (err) {
    throw new CheckpointError(`${MANIFEST_FILE} is not valid JSON: ${(err as Error).message}`, dir);
  }
  const parsed = manifestSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new CheckpointError(`${MANIFEST_FILE} field '${issue.path.join('.')}': ${issue.message}`, dir);
  }
  const manifest = parsed.data;
  for (const file of manifest.files) {
    const abs = path.join(dir, file.path);
    let size: number;
    try {
      size = (await fs.stat(abs)).size;
    } catch {
      throw new CheckpointError(`missing file ${file.path}`, dir);
    }
    if (size !== file.bytes) {
      throw new CheckpointError(
        `file ${file.path} has ${size} bytes, the manifest records ${file.bytes} (truncated or modified)`,
        dir,
      );
    }
    if ((await sha256(abs)) !== file.sha256) {
      throw new CheckpointError(`file ${file.path} does not match its recorded SHA-256 (modified or corrupted)`, dir);
    }
  }
  if (expect?.configHash !== undefined && expect.configHash !== manifest.configHash) {
    throw new CheckpointError(
      `config mismatch: the checkpoint was written by a run with config hash ${manifest.configHash}, ` +
        `this run's config hashes to ${expect.configHash}`,
      dir,
    );
  }
  return manifest;
}

/** Checkpoint directories under `root` named `step-NNNNNN`, newest (highest step) first. */
export async function listCheckpoints(root: string): Promise<string[]> {
  let entries: string[];
  try {
    entries = await fs.readdir(root);
  } catch {
    return [];
  }
  return entries
    .filter((n) => /^step-\d+$/.test(n))
    .sort((a, b) => Number(b.slice(5)) - Number(a.slice(5)))
    .map((n) => path.join(root, n));
}

/** The directory name of the checkpoint at a step. */
export function checkpointName(step: number): string {
  return `step-${String(step).padStart(6, '0')}`;
}
