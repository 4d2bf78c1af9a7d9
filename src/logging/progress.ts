import { formatDuration, formatValue } from './format.js';
import type { MetricValue } from './metrics.js';

/** Where a progress bar writes: `process.stderr` or anything with the same shape. */
export interface ProgressStream {
  write(chunk: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

/** Options of {@link ProgressBar}. */
export interface ProgressBarOptions {
  /** Number of units (steps) for 100%. */
  total: number;
  /**
   * Units already done when the bar starts (a resumed run's step). The bar starts there, and the
   * rate and ETA count only the progress made since. Default 0.
   */
  initial?: number;
  /** Text before the bar, e.g. "train". */
  label?: string;
  /** Default `process.stderr`. */
  stream?: ProgressStream;
  /** Force terminal (redrawn line) or plain (one line per interval) output. Default: `stream.isTTY`. */
  tty?: boolean;
  /** Bar width in characters on a terminal. Default 24 (narrower if the terminal is). */
  width?: number;
  /** Plain output: print a line every this fraction of the total (and at the end). Default 0.1. */
  plainInterval?: number;
  /** Terminal output: minimum milliseconds between redraws (the last update always draws). Default 100. */
  redrawMs?: number;
  /** Clock in milliseconds (tests pass a fake). Default `performance.now`. */
  now?: () => number;
}

/**
 * A progress bar with rate, ETA and a few live values (e.g. the running reward). On a terminal it
 * redraws one line in place; elsewhere (CI logs, files) it prints a plain line every
 * `plainInterval` of the way, so logs stay short and readable.
 */
export class ProgressBar {
  private readonly total: number;
  private readonly label: string;
  private readonly stream: ProgressStream;
  private readonly tty: boolean;
  private readonly width: number;
  private readonly plainInterval: number;
  private readonly redrawMs: number;
  private readonly now: () => number;
  private readonly start: number;
  private readonly initial: number;
  private current = 0;
  private info: Record<string, MetricValue> = {};
  private lastDraw = -Infinity;
  private lastPlainBucket = -1;
  private done = false;

  constructor(options: ProgressBarOptions) {
    if (!(options.total > 0) || !Number.isFinite(options.total)) {
      throw new Error(`ProgressBar: total must be a positive number, got ${options.total}`);
    }
    this.total = options.total;
    this.label = options.label ?? '';
    this.stream = options.stream ?? process.stderr;
    this.tty = options.tty ?? this.stream.isTTY === true;
    this.width = options.width ?? 24;
    this.plainInterval = options.plainInterval ?? 0.1;
    this.redrawMs = options.redrawMs ?? 100;
    this.now = options.now ?? (() => performance.now());
    this.start = this.now();
    const initial = options.initial ?? 0;
    if (!Number.isFinite(initial) || initial < 0) throw new Error(`ProgressBar: initial must be a number >= 0, got ${initial}`);
    this.initial = Math.min(initial, this.total);
    this.current = this.initial;
  }

  /** Sets progress to `current` units and merges `info` into the values shown. */
  update(current: number, info: Readonly<Record<string, MetricValue | undefined>> = {}): void {
    if (this.done) return;
    this.current = Math.min(Math.max(current, 0), this.total);
    for (const [k, v] of Object.entries(info)) if (v !== undefined) this.info[k] = v;
    const final = this.current >= this.total;
    if (this.tty) {
      const t = this.now();
      if (final || t - this.lastDraw >= this.redrawMs) {
        this.lastDraw = t;
        this.stream.write(`\r${this.fit(this.render())}\x1b[K`);
      }
    } else {
      const bucket = Math.floor(this.current / this.total / this.plainInterval + 1e-9);
      if (final || bucket > this.lastPlainBucket) {
        this.lastPlainBucket = bucket;
        this.stream.write(`${this.render()}\n`);
      }
    }
    if (final) this.finish();
  }

  /** Advances by `n` units. */
  tick(n = 1, info: Readonly<Record<string, MetricValue | undefined>> = {}): void {
    this.update(this.current + n, info);
  }

  /** Ends the bar (a newline on a terminal); later updates are ignored. */
  finish(): void {
    if (this.done) return;
    this.done = true;
    if (this.tty) this.stream.write('\n');
  }

  /** The current status line (no control characters). */
  render(): string {
    const elapsed = (this.now() - this.start) / 1000;
    // Only the units done since the bar started count towards the rate (a resumed run starts past 0).
    const rate = elapsed > 0 ? Math.max(0, this.current - this.initial) / elapsed : 0;
    const eta = rate > 0 ? (this.total - this.current) / rate : Number.NaN;
    const pct = Math.floor((100 * this.current) / this.total);
    const parts: string[] = [];
    if (this.label) parts.push(this.label);
    if (this.tty) {
      const filled = Math.round((this.width * this.current) / this.total);
      parts.push(`[${'#'.repeat(filled)}${'.'.repeat(this.width - filled)}]`);
    }
    parts.push(`${this.current}/${this.total} ${pct}%`);
    parts.push(`${formatDuration(elapsed)}<${this.current >= this.total ? '0:00' : formatDuration(eta)}`);
    parts.push(rate >= 1 || rate === 0 ? `${rate.toFixed(2)} it/s` : `${(1 / rate).toFixed(2)} s/it`);
    for (const [k, v] of Object.entries(this.info)) parts.push(`${k}=${formatValue(v)}`);
    return parts.join(' ');
  }

  private fit(line: string): string {
    const cols = this.stream.columns;
    return cols && cols > 1 && line.length >= cols ? line.slice(0, cols - 1) : line;
  }
}
