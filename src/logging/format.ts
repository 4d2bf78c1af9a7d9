import type { MetricValue } from './metrics.js';

/** A number in at most ~4 significant digits: fixed for ordinary magnitudes, exponential otherwise. */
export function formatNumber(x: number, digits = 4): string {
  if (!Number.isFinite(x)) return String(x);
  if (x === 0) return '0';
  const a = Math.abs(x);
  if (Number.isInteger(x) && a < 1e7) return String(x);
  if (a >= 1e5 || a < 1e-3) return x.toExponential(Math.max(0, digits - 2));
  return Number(x.toPrecision(digits)).toString();
}

/** A metric value for humans: numbers via {@link formatNumber}, null as "nan". */
export function formatValue(v: MetricValue): string {
  if (v === null) return 'nan';
  if (typeof v === 'number') return formatNumber(v);
  return String(v);
}

/** Bytes as B / KiB / MiB / GiB with 3 significant digits. */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = bytes;
  let u = 0;
  while (Math.abs(v) >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? v : Number(v.toPrecision(3))} ${units[u]}`;
}

/** Seconds as m:ss or h:mm:ss. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '?';
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
}

/** Options of {@link formatSummary}. */
export interface SummaryOptions {
  /** Which keys to show, in this order (missing ones are skipped). Default: every key of the row. */
  keys?: readonly string[];
  /** Show at most this many metrics. Default: all. */
  maxKeys?: number;
  /** Text before the step, e.g. "[magrpo]". */
  prefix?: string;
}

/**
 * A one-line console summary of a metrics row: `step 12 | turn_1/reward_mean 0.512 | loss -0.0312`.
 * Keys absent from the row are skipped, so one formatter serves every trainer.
 */
export function formatSummary(row: { step: number } & Readonly<Record<string, MetricValue>>, options: SummaryOptions = {}): string {
  const keys = (options.keys ?? Object.keys(row)).filter((k) => k !== 'step' && k in row && row[k] !== undefined);
  const shown = options.maxKeys !== undefined ? keys.slice(0, options.maxKeys) : keys;
  const parts = [`step ${row.step}`, ...shown.map((k) => `${k} ${formatValue(row[k])}`)];
  return (options.prefix ? `${options.prefix} ` : '') + parts.join(' | ');
}
