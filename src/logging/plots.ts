import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Resvg } from '@resvg/resvg-js';
import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';
import type { MetricValue } from './metrics.js';
import { collectPoints, panelsOf, secondaryTicks, smoothSeries, type Panel, type PlotPoint, type SecondaryTicks } from './plot-data.js';
import { plotsPage } from './plots-html.js';

export { collectPoints, splitMetricKey, type PlotPoint } from './plot-data.js';

/**
 * Metric names (see `splitMetricKey`) drawn in rewards.png by default: CoMLRL's reward and return
 * names and the tasks' paper metrics. Anchored, so timing keys such as `time/reward_s` or
 * `zero_reward_spread_frac` stay out of the reward figure.
 */
export const REWARD_METRIC_PATTERN =
  /^(reward_mean|expected_return|epoch_reward_mean|epoch_avg_return|mean_reward|mean_return|return_mean|episode_reward_mean|final_reward_mean|score|iou|hp)$/;

/** Metric names of the reference-KL figure (`agent_i/turn_k/kl/mean`, `.../kl/penalty_mean`). */
export const KL_METRIC_PATTERN = /^kl\//;

/** Per-turn mean-reward metrics: the panels that get the random-play line. */
const TURN_REWARD_NAMES = /^(eval\/)?(reward_mean|epoch_reward_mean|mean_reward)$/;

/**
 * The expected per-turn reward of uniform random play, as the trainers log it (after the reward
 * processor), drawn as a dashed line on the per-turn reward panels.
 */
export interface RandomPlayLine {
  /** Entry k − 1: the expected `turn_k` reward. */
  readonly perTurn: readonly number[];
  /** How the value was obtained, shown with it (e.g. "uniform random play, exact"). */
  readonly label: string;
}

/** Options of {@link writePlots}. */
export interface PlotOptions {
  /** Which row field is the x axis. Default "items" (training items) when the rows have it, else "step". */
  xKey?: string;
  /** A second x unit, shown on a top axis where it differs from the first. Default "step" (env steps) when xKey is not "step". */
  secondaryXKey?: string;
  /** Metric names (see `splitMetricKey`) that go into the reward plot. Default {@link REWARD_METRIC_PATTERN}. */
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
  /** The task's random-play reward, when it defines one. */
  randomPlay?: RandomPlayLine;
}

/** The files one figure was written to. */
export interface PlotFiles {
  readonly name: 'rewards' | 'losses' | 'kl';
  readonly png: string;
  readonly svg: string;
}

/** The page that shows every figure of a run. */
export const PLOTS_PAGE = 'plots.html';

/** Axis titles of the known x columns. */
const AXIS_TITLES: Readonly<Record<string, string>> = { items: 'training items', step: 'env steps' };

/** Options of {@link buildPlotSpec}. */
export interface PlotSpecOptions extends Pick<PlotOptions, 'title' | 'panelWidth' | 'panelHeight' | 'randomPlay'> {
  readonly figureTitle: string;
  /** The x column, or the x-axis title for other units. */
  readonly xKey?: string;
  /** Ticks of a top axis in a second unit, with its title. */
  readonly secondary?: { readonly title: string; readonly ticks: SecondaryTicks };
}

/** The random-play values of a panel: one per turn series it holds. */
function randomLines(panel: Panel, random: RandomPlayLine | undefined): { y: number; label: string }[] {
  if (!random || !panel.names.some((n) => TURN_REWARD_NAMES.test(n))) return [];
  const turns = [...new Set(panel.points.map((p) => /^turn_(\d+)$/.exec(p.series)?.[1]).filter((t): t is string => t !== undefined))];
  const seen = new Map<number, string[]>();
  for (const t of turns) {
    const y = random.perTurn[Number(t) - 1];
    if (y === undefined) continue;
    seen.set(y, [...(seen.get(y) ?? []), `turn ${t}`]);
  }
  const many = turns.length > 1;
  return [...seen.entries()].map(([y, which]) => ({ y, label: `${random.label}: ${formatTick(y)}${many ? ` (${which.join(', ')})` : ''}` }));
}

function formatTick(v: number): string {
  return Number(v.toPrecision(3)).toString();
}

/**
 * A vega-lite figure: one panel per distinct metric (panels with the same numbers merged), each
 * series drawn as its raw values (faint points) and a trailing moving average (line), with the
 * random-play line where given and a top axis in the second unit where given.
 */
export function buildPlotSpec(points: readonly PlotPoint[], options: PlotSpecOptions): TopLevelSpec {
  const width = options.panelWidth ?? 480;
  const height = options.panelHeight ?? 150;
  const xKey = options.xKey ?? 'step';
  const xTitle = AXIS_TITLES[xKey] ?? xKey;
  // From 0 (or below, for negative x), never a zero-width domain (a single x).
  const shared = points.filter((p) => p.axis === undefined);
  const xMin = Math.min(0, ...shared.map((p) => p.x));
  const xMax = Math.max(xMin + 1e-9, ...shared.map((p) => p.x));
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: options.title ? `${options.title} — ${options.figureTitle}` : options.figureTitle,
    background: 'white',
    padding: 12,
    config: { font: 'DejaVu Sans, sans-serif', view: { stroke: '#ddd' }, title: { anchor: 'start' }, legend: { symbolType: 'stroke', symbolStrokeWidth: 3, symbolOpacity: 1 } },
    vconcat: panelsOf(points).map((panel) => {
      const { points: smoothed, window } = smoothSeries(panel.points);
      const many = new Set(panel.points.map((p) => p.series)).size > 1;
      const color = many ? { field: 'series', type: 'nominal' as const, title: 'series' } : { value: '#4c78a8' };
      // A panel on its own axis (e.g. MARLHF's `reward_model/step`) keeps its own x range, and no second unit.
      const own = panel.points.find((p) => p.axis !== undefined)?.axis;
      const ownMax = Math.max(1e-9, ...panel.points.map((p) => p.x));
      const x = { field: 'x', type: 'quantitative' as const, title: own ?? xTitle, scale: { domain: own ? [0, ownMax] : [xMin, xMax], nice: false } };
      const random = own ? [] : randomLines(panel, options.randomPlay);
      const secondary = own ? undefined : options.secondary;
      return {
        title: {
          text: panel.names.join(' = '),
          subtitle: window > 1 ? `line: mean of the last ${window} points · faint dots: logged values` : 'logged values (too few to smooth)',
          subtitleColor: '#666',
          subtitleFontSize: 11,
          // Each panel's title starts where its plot does, whatever its y labels' width.
          frame: 'group' as const,
        },
        width,
        height,
        data: { values: smoothed.map((p) => ({ ...p })) },
        layer: [
          { mark: { type: 'point' as const, filled: true, size: 16, opacity: window > 1 ? 0.3 : 0.8 }, encoding: { x, y: { field: 'value', type: 'quantitative' as const, title: panel.panel, scale: { zero: false } }, color } },
          { mark: { type: 'line' as const, strokeWidth: 2 }, encoding: { x: { ...x, axis: null }, y: { field: 'smooth', type: 'quantitative' as const }, color } },
          ...(random.length > 0
            ? [
                { data: { values: random }, mark: { type: 'rule' as const, strokeDash: [6, 4], color: '#888', strokeWidth: 1.5 }, encoding: { y: { field: 'y', type: 'quantitative' as const } } },
                { data: { values: random }, mark: { type: 'text' as const, align: 'right' as const, dy: -7, color: '#666', fontSize: 10 }, encoding: { x: { value: width - 4 }, y: { field: 'y', type: 'quantitative' as const }, text: { field: 'label' } } },
              ]
            : []),
          ...(secondary
            ? [
                {
                  // Invisible: it only carries the top axis (same scale, its own ticks and labels).
                  mark: { type: 'point' as const, opacity: 0 },
                  encoding: {
                    x: {
                      ...x,
                      axis: { orient: 'top' as const, title: secondary.title, values: [...secondary.ticks.values], labelExpr: labelExpression(secondary.ticks), grid: false, titleColor: '#666', labelColor: '#666' },
                    },
                  },
                },
              ]
            : []),
        ],
        resolve: { axis: { x: 'independent' as const } },
      };
    }),
    resolve: { scale: { color: 'independent', y: 'independent' }, legend: { color: 'independent' } },
  };
}

/** A vega expression mapping each tick value to its label. */
function labelExpression(ticks: SecondaryTicks): string {
  const cases = ticks.values.map((v, i) => `datum.value == ${v} ? '${ticks.labels[i]}'`);
  return `${cases.join(' : ')} : ''`;
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

/** The figures of a run: which metrics, in which file, under which title. */
const FIGURES = [
  { name: 'rewards', title: 'reward and return per turn' },
  { name: 'losses', title: 'losses' },
  { name: 'kl', title: 'KL to the reference model' },
] as const;

/**
 * Writes `rewards.{png,svg}` (reward / return per turn: e.g. `turn_1/reward_mean`,
 * `turn_2/expected_return`, `eval/turn_1/mean_reward`), `losses.{png,svg}` (every `*loss*` metric)
 * and `kl.{png,svg}` (the reference KL, when logged) into `runDir`, and `plots.html`, a page with
 * every figure; each file replaced atomically. A figure with no data is not written; nor is the page
 * when no figure is. The x-axis is training items where the rows carry them, with env steps on a
 * top axis where they differ. Returns the figures written.
 */
export async function writePlots(runDir: string, rows: readonly Readonly<Record<string, MetricValue>>[], options: PlotOptions = {}): Promise<PlotFiles[]> {
  mkdirSync(runDir, { recursive: true });
  const xKey = options.xKey ?? (rows.some((r) => typeof r.items === 'number') ? 'items' : 'step');
  const secondaryKey = options.secondaryXKey ?? (xKey === 'step' ? undefined : 'step');
  const patterns = { rewards: options.rewardPattern ?? REWARD_METRIC_PATTERN, losses: options.lossPattern ?? /loss/i, kl: KL_METRIC_PATTERN };
  const written: PlotFiles[] = [];
  const svgs: { name: string; title: string; svg: string }[] = [];
  let secondaryShown = false;
  for (const fig of FIGURES) {
    const points = collectPoints(rows, patterns[fig.name], xKey);
    if (points.length === 0) continue;
    const ticks = secondaryKey ? secondaryTicks(rows, xKey, secondaryKey, Math.max(...points.map((p) => p.x))) : null;
    secondaryShown ||= ticks !== null;
    const secondary = ticks && secondaryKey ? { title: AXIS_TITLES[secondaryKey] ?? secondaryKey, ticks } : undefined;
    const svg = await renderSvg(buildPlotSpec(points, { ...options, xKey, figureTitle: fig.title, ...(secondary ? { secondary } : {}) }));
    const files = { name: fig.name, svg: join(runDir, `${fig.name}.svg`), png: join(runDir, `${fig.name}.png`) };
    atomicWrite(files.svg, svg);
    atomicWrite(files.png, svgToPng(svg, options.scale));
    written.push(files);
    svgs.push({ name: fig.name, title: fig.title, svg });
  }
  if (svgs.length > 0) {
    const axes = `x-axis: ${AXIS_TITLES[xKey] ?? xKey}${secondaryShown && secondaryKey ? ` (top axis: ${AXIS_TITLES[secondaryKey] ?? secondaryKey})` : ''}`;
    const extent = [xKey, ...(secondaryKey ? [secondaryKey] : [])].map((k) => `${lastValue(rows, k).toLocaleString('en-US')} ${AXIS_TITLES[k] ?? k}`).join(' · ');
    const legend = `lines: trailing moving average over a twentieth of each series' points · faint dots: each logged value${options.randomPlay ? ` · dashed: ${options.randomPlay.label}` : ''}`;
    atomicWrite(join(runDir, PLOTS_PAGE), plotsPage({ title: options.title ?? 'comlrl run', figures: svgs, notes: [`${axes} · ${extent}`, legend] }));
  }
  return written;
}

/** The largest finite value of column `key` (0 when none). */
function lastValue(rows: readonly Readonly<Record<string, MetricValue>>[], key: string): number {
  let max = 0;
  for (const r of rows) {
    const v = r[key];
    if (typeof v === 'number' && Number.isFinite(v) && v > max) max = v;
  }
  return max;
}

function atomicWrite(path: string, data: string | Uint8Array): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, data);
  renameSync(tmp, path);
}
