import type { z } from 'zod';
import { DatasetError } from './errors.js';
import { recordRowOrigin } from './row-origin.js';
import { readRawTable, type DatasetFormat, type RawTable } from './read.js';
import { parseSplitSpec, sliceWithIndex } from './split.js';

/** Options of {@link loadRows}. */
export interface LoadRowsOptions<T> {
  /** Validates (and may transform) each selected row. */
  schema: z.ZodType<T>;
  /**
   * Split spec in HF slice syntax (`train[:1000]`, `test[16:]`, `[8:]`). Omitted: every row of a
   * flat file, or the only split of a multi-split source.
   */
  split?: string;
  /** Override the format inferred from the extension. */
  format?: DatasetFormat;
}

/**
 * Loads rows from a local JSON, JSONL or Parquet file (or a hub-layout directory of them), selects
 * the split slice and validates each selected row.
 * @throws DatasetError naming file, split, row number (from 1, within the split) and field.
 */
export async function loadRows<T>(path: string, options: LoadRowsOptions<T>): Promise<T[]> {
  const table = await readRawTable(path, options.format);
  const selected = selectSplit(table, options.split);
  return selected.map(({ split, index, row }) => {
    const where = { file: table.file, ...(split !== undefined ? { split } : {}), row: index + 1 };
    const valid = validateRow(options.schema, row, where);
    // Kept so that a later problem with the row (a prompt beyond the context) can name it.
    recordRowOrigin(valid, where);
    return valid;
  });
}

interface SelectedRow {
  split: string | undefined;
  index: number;
  row: unknown;
}

function selectSplit(table: RawTable, spec: string | undefined): SelectedRow[] {
  if (spec === undefined) {
    if (table.kind === 'flat') return table.rows.map((row, index) => ({ split: undefined, index, row }));
    if (table.splits.size !== 1) {
      throw new DatasetError({ file: table.file }, `holds splits ${listSplits(table)}; pass a split spec such as '${[...table.splits.keys()][0]}[:100]'`);
    }
    const [name, rows] = [...table.splits.entries()][0];
    return rows.map((row, index) => ({ split: name, index, row }));
  }
  let slices;
  try {
    slices = parseSplitSpec(spec);
  } catch (e) {
    throw new DatasetError({ file: table.file }, (e as Error).message);
  }
  const out: SelectedRow[] = [];
  for (const slice of slices) {
    let rows: unknown[];
    let name: string | undefined;
    if (table.kind === 'flat') {
      // A single file holds one split, which Hugging Face `datasets` calls 'train'. Any other name
      // cannot be honoured: answering it with the same rows would evaluate on training data.
      if (slice.split !== '' && slice.split !== FLAT_SPLIT_NAME) throw new DatasetError({ file: table.file }, flatSplitMessage(slice.split, spec));
      rows = table.rows;
      name = undefined;
    } else {
      const found = table.splits.get(slice.split);
      if (found === undefined) {
        throw new DatasetError({ file: table.file }, `no split '${slice.split}' (available: ${listSplits(table)})`);
      }
      rows = found;
      name = slice.split;
    }
    for (const [index, row] of sliceWithIndex(rows, slice)) out.push({ split: name, index, row });
  }
  return out;
}

/** The split name a single-table file answers to (besides an empty name such as `[:8]`). */
export const FLAT_SPLIT_NAME = 'train';

function flatSplitMessage(split: string, spec: string): string {
  return (
    `split '${split}' (in '${spec}') does not exist: a single file holds one split, named '${FLAT_SPLIT_NAME}' as in Hugging Face datasets ` +
    `(select its rows with '${FLAT_SPLIT_NAME}[a:b]' or '[a:b]'). For a separate '${split}' split, put one file per split in a directory ` +
    `(${FLAT_SPLIT_NAME}.parquet, ${split}.parquet) and point dataset.path at it, or point dataset.eval_path at the ${split} file`
  );
}

function listSplits(table: Extract<RawTable, { kind: 'splits' }>): string {
  return [...table.splits.keys()].map((k) => `'${k}'`).join(', ');
}

/** Validates one row; the error names the first failing field (and how many more failed). */
export function validateRow<T>(
  schema: z.ZodType<T>,
  row: unknown,
  where: { file: string; split?: string; row: number },
): T {
  const result = schema.safeParse(row);
  if (result.success) return result.data;
  const [first, ...rest] = result.error.issues;
  const field = first.path.length > 0 ? first.path.map(String).join('.') : '(row)';
  const more = rest.length > 0 ? ` (and ${rest.length} more issue${rest.length > 1 ? 's' : ''})` : '';
  throw new DatasetError({ ...where, field }, `${first.message}${more}`);
}
