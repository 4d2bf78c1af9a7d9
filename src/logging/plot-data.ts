/**
 * The data side of the plots: metric keys split into panels and series, long-format points, the
 * smoothing, panels that hold the same numbers merged, and the env-step labels of the secondary
 * x-axis. No rendering here (see plots.ts).
 */
import type { MetricValue } from './metrics.js';

/** A point of a long-format plot table. */
export interface PlotPoint {
  readonly x: number;
  readonly value: number;
  /** The line within a panel, e.g. "turn_1" or "agent_0/turn_2". */
  readonly series: string;
  /** The panel (sub-plot), e.g. "reward_mean" or "eval/mean_reward". */
  readonly panel: string;
  /** The x axis's title when it is not the figure's (a row's own axis: {@link ownAxis}). */
  readonly axis?: string;
}

/** A segment that names a series (a turn or an agent), not the metric. */
const SERIES_SEGMENT = /^(turn|agent)_\d+$/;

/**
 * Splits a metric key into panel and series. A leading `eval/` stays with the panel, so evaluation
 * and training curves are separate panels. The metric name is what follows the last turn or agent
 * segment (`agent_0/turn_1/kl/mean` → `kl/mean`, series `agent_0/turn_1`); without one it is the
 * last segment and the segments before it name the series (`critic/value_loss` → `value_loss`,
 * series `critic`).
 */
export function splitMetricKey(key: string): { panel: string; series: string; name: string } {
  let parts = key.split('/');
  const isEval = parts[0] === 'eval' && parts.length > 1;
  if (isEval) parts = parts.slice(1);
  let cut = -1;
  parts.forEach((p, i) => {
    if (SERIES_SEGMENT.test(p) && i < parts.length - 1) cut = i;
  });
  const at = cut >= 0 ? cut + 1 : parts.length - 1;
  const name = parts.slice(at).join('/');
  const middle = parts.slice(0, at);
  return { panel: isEval ? `eval/${name}` : name, series: middle.length > 0 ? middle.join('/') : name, name };
}

/**
 * A key's own x axis in `row`, if it has one: a numeric `<prefix>/step` in the row is the x of the
 * row's other `<prefix>/*` keys, drawn in panels of their own (`<prefix>/<name>`). MARLHF's
 * reward-model fit logs `reward_model/step`: its rows share one training item, and would otherwise
 * be one x in the figure.
 */
export function ownAxis(row: Readonly<Record<string, MetricValue>>, key: string): { x: number; prefix: string } | undefined {
  const cut = key.indexOf('/');
  if (cut <= 0) return undefined;
  const prefix = key.slice(0, cut);
  if (key === `${prefix}/step`) return undefined;
  const x = row[`${prefix}/step`];
  return typeof x === 'number' && Number.isFinite(x) ? { x, prefix } : undefined;
}

/**
 * Long-format points for the keys whose metric name matches `pattern`. Rows without `xKey` or a
 * key, or with a null / non-finite / non-numeric value for it, contribute no point for that key.
 */
export function collectPoints(rows: readonly Readonly<Record<string, MetricValue>>[], pattern: RegExp, xKey = 'step'): PlotPoint[] {
  // A global regex would carry lastIndex between calls.
  const test = new RegExp(pattern.source, pattern.flags.replace('g', ''));
  const points: PlotPoint[] = [];
  for (const row of rows) {
    const x = row[xKey];
    if (typeof x !== 'number' || !Number.isFinite(x)) continue;
    for (const [key, value] of Object.entries(row)) {
      if (key === xKey || typeof value !== 'number' || !Number.isFinite(value)) continue;
      const { panel, series, name } = splitMetricKey(key);
      if (!test.test(name)) continue;
      const own = ownAxis(row, key);
      points.push(own ? { x: own.x, value, series: own.prefix, panel: `${own.prefix}/${name}`, axis: `${own.prefix}/step` } : { x, value, series, panel });
    }
  }
  return points;
}

/**
 * Trailing moving average: entry i is the mean of values[max(0, i − window + 1) .. i]. Trailing, so
 * the curve at x uses nothing logged after x; the first entries average what there is.
 */
export function movingAverage(values: readonly number[], window: number): number[] {
  if (!Number.isInteger(window) || window < 1) throw new Error(`movingAverage: window must be an integer ≥ 1, got ${window}`);
  const out: number[] = [];
  let sum = 0;
  values.forEach((v, i) => {
    sum += v;
    if (i >= window) sum -= values[i - window];
    out.push(sum / Math.min(i + 1, window));
  });
  return out;
}

/** Points per smoothing window: a twentieth of a series' points (at least 1: no smoothing under 30 points). */
export function smoothingWindow(points: number): number {
  return Math.max(1, Math.round(points / 20));
}

/** A panel's points with each point's smoothed value (`smooth`), per series in x order. */
export interface SmoothedPoint extends PlotPoint {
  readonly smooth: number;
}

/** Smooths each series of `points` with {@link movingAverage} over {@link smoothingWindow} points; returns the window used (the largest). */
export function smoothSeries(points: readonly PlotPoint[]): { points: SmoothedPoint[]; window: number } {
  const bySeries = new Map<string, PlotPoint[]>();
  for (const p of points) bySeries.set(p.series, [...(bySeries.get(p.series) ?? []), p]);
  const out: SmoothedPoint[] = [];
  let window = 1;
  for (const series of bySeries.values()) {
    const sorted = [...series].sort((a, b) => a.x - b.x);
    const w = smoothingWindow(sorted.length);
    window = Math.max(window, w);
    const smooth = movingAverage(sorted.map((p) => p.value), w);
    sorted.forEach((p, i) => out.push({ ...p, smooth: smooth[i] }));
  }
  return { points: out, window };
}

/** A panel after merging: its points and every metric name that logged exactly these numbers. */
export interface Panel {
  /** The first panel name (sorted: training before eval, then by name). */
  readonly panel: string;
  /** Every panel name with these points, e.g. ["expected_return", "reward_mean"]. */
  readonly names: readonly string[];
  readonly points: readonly PlotPoint[];
}

/**
 * Groups points into panels (training panels first, then eval, each by name) and merges panels
 * whose points are the same numbers at the same x for the same series (a single-turn run logs
 * `reward_mean` and `expected_return` alike): one panel per distinct metric.
 */
export function panelsOf(points: readonly PlotPoint[]): Panel[] {
  const rank = (panel: string) => (panel.startsWith('eval/') ? 1 : 0);
  const names = [...new Set(points.map((p) => p.panel))].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  const byContent = new Map<string, { names: string[]; points: PlotPoint[] }>();
  for (const name of names) {
    const own = points.filter((p) => p.panel === name);
    const content = own
      .map((p) => `${p.series}\u0000${p.x}\u0000${p.value}`)
      .sort()
      .join('\n');
    const same = byContent.get(content);
    if (same) same.names.push(name);
    else byContent.set(content, { names: [name], points: own });
  }
  return [...byContent.values()].map((g) => ({ panel: g.names[0], names: g.names, points: g.points }));
}

/** Tick values and their labels for a secondary x-axis. */
export interface SecondaryTicks {
  readonly values: readonly number[];
  readonly labels: readonly string[];
}

/** About five round tick values over [0, max] (1, 2 or 5 × a power of ten apart). */
export function niceTicks(max: number, count = 5): number[] {
  if (!(max > 0)) return [0];
  const raw = max / count;
  const pow = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * pow).find((s) => s >= raw) ?? 10 * pow;
  const ticks: number[] = [];
  for (let t = 0; t <= max + 1e-9; t += step) ticks.push(Math.round(t * 1e9) / 1e9);
  return ticks;
}

/**
 * Ticks of a top axis in the second unit (env steps) over an item axis: round env-step values
 * (see {@link niceTicks}) placed at the item count where the run reached them. The mapping comes
 * from the rows that carry both columns (the last env step logged at each item count), linear
 * between logged counts and proportional before the first. Null when every row has as many env
 * steps as items (the axis would repeat the item axis) or no row has both.
 */
export function secondaryTicks(rows: readonly Readonly<Record<string, MetricValue>>[], xKey: string, secondaryKey: string, maxX: number): SecondaryTicks | null {
  const at = new Map<number, number>();
  for (const row of rows) {
    const x = row[xKey];
    const s = row[secondaryKey];
    if (typeof x !== 'number' || typeof s !== 'number' || !Number.isFinite(x) || !Number.isFinite(s)) continue;
    at.set(x, Math.max(at.get(x) ?? -Infinity, s));
  }
  if (at.size === 0 || [...at].every(([x, s]) => x === s)) return null;
  // Env steps never fall as items rise: keep the running maximum, from the origin.
  const pairs: [number, number][] = [[0, 0]];
  for (const [x, s] of [...at.entries()].sort((a, b) => a[0] - b[0])) {
    if (x <= 0 || x > maxX) continue;
    pairs.push([x, Math.max(s, pairs[pairs.length - 1][1])]);
  }
  const top = pairs[pairs.length - 1][1];
  const values: number[] = [];
  const labels: string[] = [];
  for (const v of niceTicks(top)) {
    // The first item count at which the run had taken v env steps.
    const i = pairs.findIndex(([, s]) => s >= v);
    if (i < 0) continue;
    const [x1, s1] = pairs[i];
    const [x0, s0] = i > 0 ? pairs[i - 1] : pairs[0];
    values.push(s1 === s0 ? x1 : x0 + ((x1 - x0) * (v - s0)) / (s1 - s0));
    labels.push(v.toLocaleString('en-US'));
  }
  return { values, labels };
}
