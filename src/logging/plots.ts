import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Resvg } from '@resvg/resvg-js';
import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';
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

/**
 * Metric names (last key segment) drawn in rewards.png by default: CoMLRL's reward and return
 * names and the tasks' paper metrics. Anchored, so timing keys such as `time/reward_s` or
 * `zero_reward_spread_frac` stay out of the reward figure.
 */
export const REWARD_METRIC_PATTERN =
  /^(reward_mean|expected_return|epoch_reward_mean|epoch_avg_return|mean_reward|mean_return|return_mean|episode_reward_mean|final_reward_mean|score|iou|hp)$/;

/** Options of {@link writePlots}. */
export interface PlotOptions {
  /** Which row field is the x axis. Default "step". */
  xKey?: string;
  /** Metric names (last path segment) that go into the reward plot. Default {@link REWARD_METRIC_PATTERN}. */
  rewardPattern?: RegExp;
  /** Metric names that go into the loss plot. Default /loss/i. */
  lossPattern?: RegExp;
  /** Title over each figure, e.g. the run name. */
  title?: string;
  /** Panel size in pixels (SVG units). Default 480 × 150. */
  panelWidth?: number;
  panelHeight?: number;
  /** PNG pixels per SVG unit. Default 2. */
  scale?: number;
}

/** The files one figure was written to. */
export interface PlotFiles {
  readonly name: 'rewards' | 'losses';
  readonly png: string;
  readonly svg: string;
}

/**
 * Splits a metric key into panel and series. The last path segment is the metric name; a leading
 * `eval/` stays with the panel, so evaluation and training curves are separate panels; the segments
 * in between (`turn_1`, `agent_0`) name the series.
 */
export function splitMetricKey(key: string): { panel: string; series: string; name: string } {
  const parts = key.split('/');
  const name = parts[parts.length - 1];
  let middle = parts.slice(0, -1);
  let panel = name;
  if (middle[0] === 'eval') {
    panel = `eval/${name}`;
    middle = middle.slice(1);
  }
  return { panel, series: middle.length > 0 ? middle.join('/') : name, name };
}

/**
 * A key's own x axis in `row`, if it has one: a numeric `<prefix>/step` in the row is the x of the
 * row's other `<prefix>/*` keys, drawn in panels of their own (`<prefix>/<name>`). MARLHF's
 * reward-model fit logs `reward_model/step`: its rows share one env step, and would otherwise be
 * one x in the figure.
 */
export function ownAxis(row: Readonly<Record<string, MetricValue>>, key: string): { x: number; prefix: string } | undefined {
  const cut = key.indexOf('/');
  if (cut <= 0) return undefined;
  const prefix = key.slice(0, cut);
  const x = row[`${prefix}/step`];
  return typeof x === 'number' && Number.isFinite(x) ? { x, prefix } : undefined;
}

/**
 * Long-format points for the keys whose metric name matches `pattern`. Rows without a key, or with
 * a null / non-finite / non-numeric value for it, contribute no point for that key.
 */
export function collectPoints(
  rows: readonly Readonly<Record<string, MetricValue>>[],
  pattern: RegExp,
  xKey = 'step',
): PlotPoint[] {
  const points: PlotPoint[] = [];
  for (const row of rows) {
    const x = row[xKey];
    if (typeof x !== 'number' || !Number.isFinite(x)) continue;
    for (const [key, value] of Object.entries(row)) {
      if (key === xKey || typeof value !== 'number' || !Number.isFinite(value)) continue;
      const { panel, series, name } = splitMetricKey(key);
      // A global regex would carry lastIndex between calls.
      if (!new RegExp(pattern.source, pattern.flags.replace('g', '')).test(name)) continue;
      const own = ownAxis(row, key);
      points.push(own ? { x: own.x, value, series: own.prefix, panel: `${own.prefix}/${name}`, axis: `${own.prefix}/step` } : { x, value, series, panel });
    }
  }
  return points;
}

/** A vega-lite figure: one line-chart panel per metric name, one coloured line per series. */
export function buildPlotSpec(points: readonly PlotPoint[], options: PlotOptions & { figureTitle: string }): TopLevelSpec {
  // Training panels first, evaluation panels after them.
  const rank = (panel: string) => (panel.startsWith('eval/') ? 1 : 0);
  const panels = [...new Set(points.map((p) => p.panel))].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  const width = options.panelWidth ?? 480;
  const height = options.panelHeight ?? 150;
  const xTitle = options.xKey ?? 'step';
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: options.title ? `${options.title} — ${options.figureTitle}` : options.figureTitle,
    background: 'white',
    padding: 12,
    config: { font: 'DejaVu Sans, sans-serif', view: { stroke: '#ddd' } },
    vconcat: panels.map((panel) => ({
      title: panel,
      width,
      height,
      data: { values: points.filter((p) => p.panel === panel).map((p) => ({ ...p })) },
      mark: { type: 'line', point: { size: 18 }, strokeWidth: 1.5 },
      encoding: {
        x: { field: 'x', type: 'quantitative', title: points.find((p) => p.panel === panel)?.axis ?? xTitle },
        y: { field: 'value', type: 'quantitative', title: panel, scale: { zero: false } },
        color: { field: 'series', type: 'nominal', title: 'series' },
      },
    })),
    resolve: { scale: { color: 'independent', y: 'independent' }, legend: { color: 'independent' } },
  };
}

/** Renders a vega-lite spec to SVG text in Node (no browser, no canvas). */
export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** Rasterises SVG text to PNG bytes with resvg, using the system's fonts. */
export function svgToPng(svg: string, scale = 2): Uint8Array {
  const resvg = new Resvg(svg, {
    font: { loadSystemFonts: true, defaultFontFamily: 'DejaVu Sans', sansSerifFamily: 'DejaVu Sans' },
    fitTo: { mode: 'zoom', value: scale },
    background: 'white',
  });
  return resvg.render().asPng();
}

/**
 * Writes `rewards.{png,svg}` (reward / return per turn: e.g. `turn_1/reward_mean`,
 * `turn_2/expected_return`, `eval/turn_1/mean_reward`) and `losses.{png,svg}` (every `*loss*` metric)
 * into `runDir`, each replaced atomically. A figure with no data is not written. Returns the files
 * written.
 */
export async function writePlots(
  runDir: string,
  rows: readonly Readonly<Record<string, MetricValue>>[],
  options: PlotOptions = {},
): Promise<PlotFiles[]> {
  mkdirSync(runDir, { recursive: true });
  const figures = [
    { name: 'rewards' as const, pattern: options.rewardPattern ?? REWARD_METRIC_PATTERN, title: 'reward and return per turn' },
    { name: 'losses' as const, pattern: options.lossPattern ?? /loss/i, title: 'losses' },
  ];
  const written: PlotFiles[] = [];
  for (const fig of figures) {
    const points = collectPoints(rows, fig.pattern, options.xKey);
    if (points.length === 0) continue;
    const svg = await renderSvg(buildPlotSpec(points, { ...options, figureTitle: fig.title }));
    const files = { name: fig.name, svg: join(runDir, `${fig.name}.svg`), png: join(runDir, `${fig.name}.png`) };
    atomicWrite(files.svg, svg);
    atomicWrite(files.png, svgToPng(svg, options.scale));
    written.push(files);
  }
  return written;
}

function atomicWrite(path: string, data: string | Uint8Array): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, data);
  renameSync(tmp, path);
}
