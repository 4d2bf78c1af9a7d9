/**
 * A model folder's identity by content, so that a checkpoint can tell "the same model at a new
 * path" from "another model": what a run recorded of its models at the start is compared with
 * the models found at the (possibly moved) paths on resume.
 *
 * The identity covers the files comlrl reads from a model folder ({@link MODEL_IDENTITY_FILES} and
 * every top-level `*.safetensors`): config.json parsed (so a difference names its field), each
 * file's size, and a SHA-256 — of the whole file up to {@link FULL_HASH_BYTES}; above that (a
 * multi-GB weight shard) of the safetensors header plus samples of every tensor's data (its first,
 * middle and last {@link SAMPLE_BYTES}), which reads a few MB instead of the whole file. The
 * sampled hash is a fingerprint: a fine-tune, another seed or another dtype changes the header or
 * the sampled bytes of nearly every tensor, while reading 16 GB at every start would not be cheap.
 */
import { createHash, type Hash } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { z } from 'zod';
import { stableStringify } from '../config/hash.js';
import { TOKENIZER_FILE_NAMES } from '../tokenizer/files.js';

/** Files (besides `*.safetensors`) whose content enters a model's identity when present. */
export const MODEL_IDENTITY_FILES: readonly string[] = ['config.json', 'generation_config.json', 'model.safetensors.index.json', ...TOKENIZER_FILE_NAMES, 'adapter_config.json'];

/** Files up to this size are hashed whole; larger ones by header and samples. */
export const FULL_HASH_BYTES = 64 * 1024 * 1024;
/** Bytes read at each sample of a large file. */
export const SAMPLE_BYTES = 4096;

const fileIdentitySchema = z.strictObject({
  bytes: z.number().int().nonnegative(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  /** 'full': the whole file; 'sampled': header and samples (see the module comment). */
  hashed: z.enum(['full', 'sampled']),
});

/** A model folder's identity (see the module comment); stored as JSON in checkpoints. */
export const modelIdentitySchema = z.strictObject({
  /** config.json as parsed (null when the folder has none). */
  config: z.record(z.string(), z.unknown()).nullable(),
  /** Identity of each file, by name. */
  files: z.record(z.string(), fileIdentitySchema),
});
/** See {@link modelIdentitySchema}. */
export type ModelIdentity = z.output<typeof modelIdentitySchema>;
/** One file of a {@link ModelIdentity}. */
export type ModelFileIdentity = z.output<typeof fileIdentitySchema>;

/**
 * The identity of the model folder `dir` (see the module comment); `fullHashBytes`: the largest
 * file hashed whole (default {@link FULL_HASH_BYTES}).
 * @throws Error naming the folder when it cannot be read, or config.json is not JSON.
 */
export async function modelIdentity(dir: string, options: { readonly fullHashBytes?: number } = {}): Promise<ModelIdentity> {
  const fullHashBytes = options.fullHashBytes ?? FULL_HASH_BYTES;
  const entries = await fs.readdir(dir, { withFileTypes: true });
  const names = entries
    .filter((e) => e.isFile() || e.isSymbolicLink())
    .map((e) => e.name)
    .filter((n) => MODEL_IDENTITY_FILES.includes(n) || n.endsWith('.safetensors'))
    .sort();
  const files: Record<string, ModelFileIdentity> = {};
  let config: Record<string, unknown> | null = null;
  for (const name of names) {
    const file = path.join(dir, name);
    const st = await fs.stat(file);
    if (!st.isFile()) continue;
    files[name] = st.size <= fullHashBytes ? { bytes: st.size, sha256: await hashWhole(file), hashed: 'full' } : { bytes: st.size, sha256: await hashSampled(file, st.size), hashed: 'sampled' };
    if (name === 'config.json') {
      try {
        const parsed: unknown = JSON.parse(await fs.readFile(file, 'utf8'));
        if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) config = parsed as Record<string, unknown>;
      } catch (err) {
        throw new Error(`${file}: not valid JSON (${(err as Error).message})`);
      }
    }
  }
  return { config, files };
}

/**
 * What differs between a recorded identity and a model's, in words ("config.json field
 * hidden_size: recorded 32, found 64", "weight file model.safetensors differs (...)"), or
 * undefined when they are the same model.
 */
export function modelIdentityDifference(recorded: ModelIdentity, found: ModelIdentity): string | undefined {
  const problems: string[] = [];
  const rc = recorded.config ?? {};
  const fc = found.config ?? {};
  for (const key of [...new Set([...Object.keys(rc), ...Object.keys(fc)])].sort()) {
    if (stableStringify(rc[key]) === stableStringify(fc[key])) continue;
    problems.push(`config.json field ${key}: recorded ${show(rc[key])}, found ${show(fc[key])}`);
  }
  for (const name of [...new Set([...Object.keys(recorded.files), ...Object.keys(found.files)])].sort()) {
    // config.json differences are named by field above (formatting alone does not matter).
    if (name === 'config.json') continue;
    const r = recorded.files[name];
    const f = found.files[name];
    const what = name.endsWith('.safetensors') ? `weight file ${name}` : name;
    if (r === undefined) problems.push(`${what}: not in the recorded model, present here`);
    else if (f === undefined) problems.push(`${what}: missing (the recorded model had ${r.bytes} bytes)`);
    else if (r.bytes !== f.bytes) problems.push(`${what}: ${f.bytes} bytes, the recorded model had ${r.bytes}`);
    else if (r.sha256 !== f.sha256) problems.push(`${what}: same size, different content (SHA-256${r.hashed === 'sampled' ? ' of header and samples' : ''})`);
  }
  return problems.length > 0 ? problems.join('; ') : undefined;
}

function show(value: unknown): string {
  if (value === undefined) return '(unset)';
  const s = JSON.stringify(value);
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}

async function hashWhole(file: string): Promise<string> {
  return createHash('sha256').update(await fs.readFile(file)).digest('hex');
}

/** SHA-256 of a large file's size, its safetensors header and samples of each tensor (else of evenly spaced blocks). */
async function hashSampled(file: string, size: number): Promise<string> {
  const hash = createHash('sha256').update(`${size}\n`);
  const fh = await fs.open(file, 'r');
  try {
    const read = async (h: Hash, at: number, n: number): Promise<Buffer> => {
      const buf = Buffer.alloc(Math.max(0, Math.min(n, size - at)));
      let done = 0;
      while (done < buf.length) {
        const { bytesRead } = await fh.read(buf, done, buf.length - done, at + done);
        if (bytesRead === 0) break;
        done += bytesRead;
      }
      h.update(buf.subarray(0, done));
      return buf.subarray(0, done);
    };
    const ranges = file.endsWith('.safetensors') ? await safetensorsRanges(fh, size) : undefined;
    if (ranges === undefined) {
      const blocks = 64;
      for (let i = 0; i < blocks; i++) await read(hash, Math.floor((Math.max(0, size - SAMPLE_BYTES) * i) / (blocks - 1)), SAMPLE_BYTES);
    } else {
      await read(hash, 0, ranges.dataStart);
      for (const [start, end] of ranges.tensors) {
        const len = end - start;
        if (len <= 3 * SAMPLE_BYTES) {
          await read(hash, ranges.dataStart + start, len);
          continue;
        }
        for (const at of [start, start + Math.floor((len - SAMPLE_BYTES) / 2), end - SAMPLE_BYTES]) await read(hash, ranges.dataStart + at, SAMPLE_BYTES);
      }
    }
  } finally {
    await fh.close();
  }
  return hash.digest('hex');
}

/** The data start and each tensor's byte range of a safetensors file, or undefined when its header does not parse. */
async function safetensorsRanges(fh: fs.FileHandle, size: number): Promise<{ dataStart: number; tensors: [number, number][] } | undefined> {
  const lenBuf = Buffer.alloc(8);
  if ((await fh.read(lenBuf, 0, 8, 0)).bytesRead !== 8) return undefined;
  const headerLen = Number(lenBuf.readBigUInt64LE(0));
  if (headerLen > size - 8 || headerLen > 100 * 1024 * 1024) return undefined;
  const headerBuf = Buffer.alloc(headerLen);
  if ((await fh.read(headerBuf, 0, headerLen, 8)).bytesRead !== headerLen) return undefined;
  let header: unknown;
  try {
    header = JSON.parse(headerBuf.toString('utf8'));
  } catch {
    return undefined;
  }
  const parsed = z.record(z.string(), z.unknown()).safeParse(header);
  if (!parsed.success) return undefined;
  const dataStart = 8 + headerLen;
  const tensors: [number, number][] = [];
  for (const [name, value] of Object.entries(parsed.data)) {
    if (name === '__metadata__') continue;
    const entry = tensorEntrySchema.safeParse(value);
    if (!entry.success) return undefined;
    const [start, end] = entry.data.data_offsets;
    if (end < start || dataStart + end > size) return undefined;
    tensors.push([start, end]);
  }
  return { dataStart, tensors: tensors.sort((a, b) => a[0] - b[0]) };
}

const tensorEntrySchema = z.looseObject({ data_offsets: z.tuple([z.number().int().nonnegative(), z.number().int().nonnegative()]) });
