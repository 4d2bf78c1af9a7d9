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

/** Checkpoint writes under way in this process (a second Ctrl-C waits for them to finish). */
let activeWrites = 0;
let idleWaiters: (() => void)[] = [];

/** Whether a checkpoint (or final/) is being written in this process right now. */
export function checkpointWriteActive(): boolean {
  return activeWrites > 0;
}

/** The folders being written right now (each write's final name), oldest first. */
const activeTargets: string[] = [];

/** The folders (checkpoints, final/) this process is writing right now, by their final names. */
export function checkpointWritesInProgress(): readonly string[] {
  return [...activeTargets];
}

/** Resolves once no checkpoint write is under way (at once when none is). */
export function checkpointWritesIdle(): Promise<void> {
  if (activeWrites === 0) return Promise.resolve();
  return new Promise((resolve) => idleWaiters.push(resolve));
}

function endWrite(target: string): void {
  activeTargets.splice(activeTargets.indexOf(target), 1);
  activeWrites--;
  if (activeWrites === 0) {
    const waiters = idleWaiters;
    idleWaiters = [];
    for (const w of waiters) w();
  }
}

/**
 * Writes a small file atomically (temporary sibling, fsync, rename), so a kill at any moment leaves
 * the previous content or the new one, never an empty or truncated file.
 */
export async function writeFileAtomically(file: string, text: string): Promise<void> {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.tmp-${process.pid}`);
  await fs.writeFile(tmp, text);
  await fsyncPath(tmp);
  await fs.rename(tmp, file);
}

/**
 * Why a manifest entry cannot name a file of the checkpoint (absolute, `..`, backslash, empty
 * segment), or undefined when it is a plain relative path inside the folder.
 */
export function manifestPathProblem(rel: string): string | undefined {
  if (rel === '' || path.isAbsolute(rel) || path.win32.isAbsolute(rel) || rel.includes('\\') || rel.includes('\0')) {
    return 'is not a relative path inside the checkpoint folder';
  }
  if (rel.split('/').some((seg) => seg === '' || seg === '.' || seg === '..')) return 'leaves the checkpoint folder (or has an empty, . or .. segment)';
  return undefined;
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
  activeWrites++;
  activeTargets.push(finalDir);
  try {
    await fs.rm(tmp, { recursive: true, force: true });
    await fs.mkdir(tmp, { recursive: true });
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
  } finally {
    endWrite(finalDir);
  }
}

/**
 * Removes what a killed writer left beside `finalDir`'s name (`.NAME.tmp-*`): never a complete
 * checkpoint, except a `.NAME.tmp-*.old` copy that a kill between the two renames of a replacement
 * left while `finalDir` itself is missing; that one is put back under its name.
 */
export async function cleanInterruptedWrites(finalDir: string): Promise<void> {
  const parent = path.dirname(finalDir);
  const prefix = `.${path.basename(finalDir)}.tmp-`;
  let names: string[];
  try {
    names = await fs.readdir(parent);
  } catch {
    return;
  }
  for (const name of names.filter((n) => n.startsWith(prefix))) {
    const abs = path.join(parent, name);
    if (name.endsWith('.old') && !(await exists(finalDir))) await fs.rename(abs, finalDir);
    else await fs.rm(abs, { recursive: true, force: true });
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
  const realDir = await fs.realpath(dir);
  for (const file of manifest.files) {
    // A manifest may only name files inside its folder: anything else would let resume read (or a
    // hash check vouch for) files elsewhere on the machine.
    const problem = manifestPathProblem(file.path);
    if (problem !== undefined) throw new CheckpointError(`${MANIFEST_FILE} entry '${file.path}' ${problem}; refused`, dir);
    const abs = path.join(dir, file.path);
    let size: number;
    try {
      const st = await fs.lstat(abs);
      if (!st.isFile()) throw new CheckpointError(`${MANIFEST_FILE} entry '${file.path}' is ${st.isSymbolicLink() ? 'a symbolic link' : 'not a regular file'}; refused`, dir);
      size = st.size;
    } catch (err) {
      if (err instanceof CheckpointError) throw err;
      throw new CheckpointError(`missing file ${file.path}`, dir);
    }
    // A linked folder on the way (agent_0 -> /elsewhere) leaves the checkpoint just the same.
    if (!(await fs.realpath(abs)).startsWith(realDir + path.sep)) {
      throw new CheckpointError(`${MANIFEST_FILE} entry '${file.path}' resolves outside the checkpoint folder (a linked folder); refused`, dir);
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
