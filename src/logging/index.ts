/** Metrics as JSONL and TensorBoard event files, console summaries, a progress bar, plots (vega-lite → SVG → PNG) and memory figures. */
export { MetricsLogger, readMetrics } from './metrics.js';
export type { MetricValue, MetricsRow, MetricsLoggerOptions } from './metrics.js';
export { formatSummary, formatNumber, formatValue, formatBytes, formatDuration } from './format.js';
export type { SummaryOptions } from './format.js';
export { ProgressBar } from './progress.js';
export type { ProgressBarOptions, ProgressStream } from './progress.js';
export { writePlots, buildPlotSpec, collectPoints, splitMetricKey, renderSvg, svgToPng, REWARD_METRIC_PATTERN, KL_METRIC_PATTERN, PLOTS_PAGE } from './plots.js';
export { movingAverage, smoothingWindow, panelsOf, secondaryTicks, niceTicks } from './plot-data.js';
export type { PlotOptions, PlotFiles, PlotPoint, RandomPlayLine } from './plots.js';
export { peakMemory, sampleMemory } from './memory.js';
export { TensorBoardWriter, encodeScalarEvent, encodeFileVersionEvent, scalarsOf, EVENT_FILE_VERSION, EVENT_FILE_PREFIX } from './tensorboard.js';
export type { TensorBoardScalar, TensorBoardWriterOptions } from './tensorboard.js';
export { crc32c, maskCrc, frameRecord, readRecords, RECORD_OVERHEAD } from './tfrecord.js';
export type { TFRecord } from './tfrecord.js';
export type { MemoryReport } from './memory.js';
