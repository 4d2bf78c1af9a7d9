import { readFile, readdir, stat } from 'node:fs/promises';
import { basename, extname, join } from 'node:path';
import { asyncBufferFromFile, parquetReadObjects } from 'hyparquet';
import { DatasetError } from './errors.js';
import { decodeUtf8, describeUtf8Problem } from './utf8.js';

/** File formats the loaders read. */
export type DatasetFormat = 'json' | 'jsonl' | 'parquet';

/**
 * The raw rows of a dataset source. `flat` sources (a JSON array, a JSONL or Parquet file) hold a
 * single table, the split `train` (as `datasets` calls a lone data file); `splits` sources
 * ({split: rows} JSON, or a directory of per-split files) are selected by name.
 */
export type RawTable =
  | { kind: 'flat'; file: string; rows: unknown[] }
  | { kind: 'splits'; file: string; splits: Map<string, unknown[]> };

/** Picks the format from a file extension. */
export function formatOf(path: string): DatasetFormat {
  const ext = extname(path).toLowerCase();
  if (ext === '.json') return 'json';
  if (ext === '.jsonl' || ext === '.ndjson') return 'jsonl';
  if (ext === '.parquet') return 'parquet';
  throw new DatasetError({ file: path }, `unknown dataset format '${ext}' (expected .json, .jsonl, .ndjson or .parquet)`);
}

/** Reads a dataset file or directory into raw (unvalidated) rows. */
export async function readRawTable(path: string, format?: DatasetFormat): Promise<RawTable> {
  let info;
  try {
    info = await stat(path);
  } catch (e) {
    throw new DatasetError({ file: path }, `cannot read: ${(e as Error).message}`);
  }
  if (info.isDirectory()) return readDirectory(path);
  const fmt = format ?? formatOf(path);
  if (fmt === 'json') return readJson(path);
  const rows = fmt === 'jsonl' ? await readJsonl(path) : await readParquet(path);
  return { kind: 'flat', file: path, rows };
}

/**
 * Reads a text file as strict UTF-8. `rowOfLine` maps a 1-based line to the row it holds (JSONL),
 * so the error names the row as well as the byte offset.
 */
async function readUtf8(file: string, rowOfLine?: (bytes: Uint8Array, line: number) => number): Promise<string> {
  const bytes = await readFile(file);
  const r = decodeUtf8(bytes);
  if ('text' in r) return r.text;
  const row = rowOfLine?.(bytes, r.problem.line);
  throw new DatasetError({ file, ...(row !== undefined ? { row } : {}) }, describeUtf8Problem(r.problem));
}

/** The JSONL row number (from 1) on a 1-based line: blank lines before it hold no row. */
function jsonlRowOfLine(bytes: Uint8Array, line: number): number {
  let row = 0;
  let l = 1;
  let blank = true;
  for (let i = 0; i < bytes.length && l < line; i++) {
    const b = bytes[i];
    if (b === 0x0a) {
      if (!blank) row++;
      blank = true;
      l++;
    } else if (b !== 0x20 && b !== 0x09 && b !== 0x0d) {
      blank = false;
    }
  }
  return row + 1;
}

async function readJson(file: string): Promise<RawTable> {
  const text = await readUtf8(file);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new DatasetError({ file }, `invalid JSON: ${(e as Error).message}`);
  }
  if (Array.isArray(value)) return { kind: 'flat', file, rows: value };
  if (value !== null && typeof value === 'object') {
    const splits = new Map<string, unknown[]>();
    for (const [name, rows] of Object.entries(value)) {
      if (!Array.isArray(rows)) {
        throw new DatasetError({ file, split: name }, `expected an array of rows under key '${name}' (a JSON file holds an array of rows or {split: rows})`);
      }
      splits.set(name, rows);
    }
    return { kind: 'splits', file, splits };
  }
  throw new DatasetError({ file }, 'expected an array of rows or an object {split: rows}');
}

async function readJsonl(file: string): Promise<unknown[]> {
  const text = await readUtf8(file, jsonlRowOfLine);
  const rows: unknown[] = [];
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() === '') continue;
    try {
      rows.push(JSON.parse(lines[i]));
    } catch (e) {
      throw new DatasetError({ file, row: rows.length + 1 }, `line ${i + 1}: invalid JSON: ${(e as Error).message}`);
    }
  }
  return rows;
}

async function readParquet(file: string): Promise<unknown[]> {
  let rows: Record<string, unknown>[];
  try {
    rows = await parquetReadObjects({ file: await asyncBufferFromFile(file) });
  } catch (e) {
    throw new DatasetError({ file }, `invalid Parquet: ${(e as Error).message}`);
  }
  return rows.map((r) => normalizeParquetValue(r) as Record<string, unknown>);
}

/** INT64 columns arrive as bigint; schemas speak JSON numbers, so safe integers are converted. */
function normalizeParquetValue(v: unknown): unknown {
  if (typeof v === 'bigint') {
    return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
  }
  if (Array.isArray(v)) return v.map(normalizeParquetValue);
  if (v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = normalizeParquetValue(x);
    return out;
  }
  return v;
}

/**
 * A directory in the Hugging Face hub layout: files named `<split>.<ext>` or
 * `<split>-00000-of-00001.<ext>`, in the directory or its `data/` folder; shards are
 * concatenated in name order.
 */
async function readDirectory(dir: string): Promise<RawTable> {
  const candidates: string[] = [];
  for (const sub of [dir, join(dir, 'data')]) {
    let names: string[];
    try {
      names = await readdir(sub);
    } catch {
      continue;
    }
    for (const n of names.sort()) {
      const ext = extname(n).toLowerCase();
      if (['.json', '.jsonl', '.ndjson', '.parquet'].includes(ext)) candidates.push(join(sub, n));
    }
  }
  const splits = new Map<string, unknown[]>();
  for (const file of candidates) {
    const name = splitNameOfFile(file);
    const table = await readRawTable(file);
    if (table.kind === 'splits') {
      throw new DatasetError({ file }, 'a file inside a dataset directory must hold a plain array of rows');
    }
    splits.set(name, [...(splits.get(name) ?? []), ...table.rows]);
  }
  if (splits.size === 0) {
    throw new DatasetError({ file: dir }, 'no .json, .jsonl or .parquet files found (looked in the directory and its data/ folder)');
  }
  return { kind: 'splits', file: dir, splits };
}

function splitNameOfFile(file: string): string {
  const stem = basename(file).replace(/\.[^.]+$/, '');
  return stem.split(/[-.]/)[0];
}
