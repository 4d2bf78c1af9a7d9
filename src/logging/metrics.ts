import { appendFileSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { z } from 'zod';

/** A value in a metrics line. Non-finite numbers are written as null (JSON has no NaN/Infinity). */
export type MetricValue = number | string | boolean | null;

/** One JSONL line: the step first, then the metrics in the order they were given. */
export type MetricsRow = { step: number } & { [key: string]: MetricValue };

const rowSchema = z
  .object({ step: z.number({ error: 'field `step` must be a number' }) })
  .catchall(z.union([z.number(), z.string(), z.boolean(), z.null()], { error: 'metric values must be number, string, boolean or null' }));

/** Options of {@link MetricsLogger.open}. */
export interface MetricsLoggerOptions {
  /**
   * On resume: drop existing lines whose step is greater than this, so the log matches the
   * checkpoint the run continues from (the file is rewritten atomically). Default: keep all.
   */
  truncateAfterStep?: number;
  /** Start from an empty file even if one exists. */
  overwrite?: boolean;
}

/**
 * Appends metrics as JSON lines (`{"step":n, ...}`), one line per call, synchronously, so that what
 * a run logged survives a crash. Keeps every row (earlier lines of the file included) in memory for
 * plots and summaries.
 */
export class MetricsLogger {
  readonly path: string;
  private readonly written: MetricsRow[];

  private constructor(path: string, rows: MetricsRow[]) {
    this.path = path;
    this.written = rows;
  }

  /** Opens (creating directories and the file) a JSONL metrics file for appending. */
  static open(path: string, options: MetricsLoggerOptions = {}): MetricsLogger {
    mkdirSync(dirname(path), { recursive: true });
    let rows: MetricsRow[] = [];
    if (options.overwrite || !existsSync(path)) {
      writeFileSync(path, '');
    } else {
      rows = readMetrics(path);
      const cut = options.truncateAfterStep;
      if (cut !== undefined) {
        rows = rows.filter((r) => r.step <= cut);
      }
      // Rewrites also drop a torn last line left by a crash, so new lines start cleanly.
      const tmp = `${path}.tmp-${process.pid}`;
      writeFileSync(tmp, rows.map((r) => `${JSON.stringify(r)}\n`).join(''));
      renameSync(tmp, path);
    }
    return new MetricsLogger(path, rows);
  }

  /** Writes one line `{step, ...metrics}`; undefined values are left out. Returns the row written. */
  log(step: number, metrics: Readonly<Record<string, MetricValue | undefined>>): MetricsRow {
    if (!Number.isFinite(step)) throw new Error(`MetricsLogger.log: step must be a finite number, got ${step}`);
    if ('step' in metrics) throw new Error("MetricsLogger.log: 'step' is reserved; pass it as the first argument");
    const row: MetricsRow = { step };
    for (const [key, value] of Object.entries(metrics)) {
      if (value === undefined) continue;
      row[key] = typeof value === 'number' && !Number.isFinite(value) ? null : value;
    }
    appendFileSync(this.path, `${JSON.stringify(row)}\n`);
    this.written.push(row);
    return row;
  }

  /** Every row of the file: those present when opened (after truncation) and those logged since. */
  rows(): readonly MetricsRow[] {
    return this.written;
  }
}

/**
 * Reads a JSONL metrics file. Blank lines are skipped; a torn last line (a crash mid-write) is
 * dropped; any other malformed line is an error naming the file and line.
 */
export function readMetrics(path: string): MetricsRow[] {
  const lines = readFileSync(path, 'utf8').split('\n');
  const rows: MetricsRow[] = [];
  lines.forEach((line, i) => {
    if (line.trim() === '') return;
    const isLast = lines.slice(i + 1).every((l) => l.trim() === '');
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      if (isLast && !line.endsWith('}')) return;
      throw new Error(`${path}:${i + 1}: not valid JSON`);
    }
    const res = rowSchema.safeParse(parsed);
    if (!res.success) {
      throw new Error(`${path}:${i + 1}: ${res.error.issues.map((x) => `${x.path.join('.') || 'line'}: ${x.message}`).join('; ')}`);
    }
    rows.push(res.data as MetricsRow);
  });
  return rows;
}
