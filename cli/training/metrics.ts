/**
 * The run's metrics: the trainer's sink, which writes what it logs to metrics.jsonl with perf/*
 * columns (tokens/s, memory) added to train rows and an `items` column (training items the row
 * covers: the plots' x-axis, the progress bar's unit), hands each written row to the run's other logs
 * (TensorBoard) and can be muted (a checkpoint's own save logs nothing); and a callback that keeps
 * the recent train rewards and the last eval reward for the progress bar.
 */
import { formatSummary } from '../../src/logging/format.js';
import { peakMemory, sampleMemory } from '../../src/logging/memory.js';
import type { MetricsLogger, MetricsRow, MetricValue } from '../../src/logging/metrics.js';
import type { ItemEvent, LogEvent, TrainEvent, TrainerCallback } from '../../trainers/core/callbacks.js';
import type { MetricRecord, MetricsSink } from '../../trainers/core/metrics.js';
import type { TokenCounter } from '../trainer.js';

/** Sum over turns of `turn_k/reward_mean` in a train row: the row's expected episode reward. */
export function trainRowReward(row: Readonly<Record<string, MetricValue>>): number | undefined {
  let sum = 0;
  let seen = false;
  for (const [k, v] of Object.entries(row)) {
    if (/^turn_\d+\/reward_mean$/.test(k) && typeof v === 'number') {
      sum += v;
      seen = true;
    }
  }
  return seen ? sum : undefined;
}

/** Sum over turns of an eval row's per-turn mean reward (MAGRPO `mean_reward`, actor-critic `reward_mean`). */
export function evalRowReward(row: Readonly<Record<string, MetricValue>>): number | undefined {
  let sum = 0;
  let seen = false;
  for (const [k, v] of Object.entries(row)) {
    if (/^eval\/turn_\d+\/(mean_reward|reward_mean)$/.test(k) && typeof v === 'number') {
      sum += v;
      seen = true;
    }
  }
  return seen ? sum : undefined;
}

/** Column of every logged row: the training items it covers (see {@link RunMetrics}). */
export const ITEMS_COLUMN = 'items';

/**
 * The trainer's {@link MetricsSink} during a run (see the module comment). It is also a callback
 * (first in the run's list, so it knows where the loop is before anything logs): a train row logged
 * inside an item covers that item too (done + 1); an eval row, logged before the item trains, and
 * the rows after an item (epoch summaries, the eval after training) cover the items done.
 */
export class RunMetrics implements MetricsSink, TrainerCallback {
  private logger: MetricsLogger | null = null;
  /** Where each row goes once metrics.jsonl has it. */
  private readonly mirrors: ((row: MetricsRow) => void)[] = [];
  private muted = false;
  private lastRowTime = performance.now();
  private lastRowTokens = 0;
  /** Training items done, and whether an item is being trained (null before the run opens). */
  private itemsDone: number | null = null;
  private inItem = false;

  constructor(
    private readonly counter: TokenCounter,
    /** Where each written row is printed (output.verbose), or null. */
    private readonly verbose: ((line: string) => void) | null,
  ) {}

  /** Starts writing to `logger`; `tokensBefore` is the token count a resumed run starts from. */
  open(logger: MetricsLogger, tokensBefore: number, itemsBefore: number): void {
    this.logger = logger;
    this.lastRowTokens = tokensBefore;
    this.itemsDone = itemsBefore;
  }

  onTrainBegin({ step }: TrainEvent): void {
    this.itemsDone = step;
    this.inItem = false;
  }

  onItemBegin({ step }: ItemEvent): void {
    this.itemsDone = step;
    this.inItem = true;
  }

  onItemEnd({ step }: ItemEvent): void {
    this.itemsDone = step;
    this.inItem = false;
  }

  /**
   * Also hands every row written from now on to `mirror`, after metrics.jsonl has it (so a log that
   * mirrors it is never ahead of it: what a crash leaves is fixed by the resume's rows).
   */
  mirrorTo(mirror: (row: MetricsRow) => void): void {
    this.mirrors.push(mirror);
  }

  /** The rows written so far (including those a resumed run kept). */
  rows(): readonly MetricsRow[] {
    return this.logger?.rows() ?? [];
  }

  /** Runs `fn` with logging off. */
  async withoutLogging<T>(fn: () => Promise<T>): Promise<T> {
    this.muted = true;
    try {
      return await fn();
    } finally {
      this.muted = false;
    }
  }

  /** Writes a row as it is (the run/* header row: no perf columns, not counted as a train row). */
  write(step: number, row: Readonly<Record<string, MetricValue>>): void {
    if (this.logger) this.mirror(this.logger.log(step, row));
  }

  log(step: number, metrics: MetricRecord): void {
    if (this.muted || !this.logger) return;
    const row: Record<string, MetricValue> = { ...metrics };
    const evalRow = isEvalRow(metrics);
    if (this.itemsDone !== null) row[ITEMS_COLUMN] = this.itemsDone + (this.inItem && !evalRow ? 1 : 0);
    if (!evalRow) {
      const now = performance.now();
      const dt = (now - this.lastRowTime) / 1000;
      const mem = peakMemory();
      const total = this.counter.total;
      if (dt > 0) row['perf/tokens_per_s'] = (total - this.lastRowTokens) / dt;
      row['perf/tokens_total'] = total;
      row['perf/peak_rss_mb'] = mem.peakRssBytes / 2 ** 20;
      row['perf/tensor_mb'] = mem.tensorBytes / 2 ** 20;
      row['perf/num_tensors'] = mem.numTensors;
      this.lastRowTime = now;
      this.lastRowTokens = total;
    } else {
      sampleMemory();
    }
    const written = this.logger.log(step, row);
    this.mirror(written);
    this.verbose?.(formatSummary(written, { maxKeys: 12 }));
  }

  private mirror(row: MetricsRow): void {
    for (const m of this.mirrors) m(row);
  }
}

/** Train rewards the progress bar averages. */
const RECENT_REWARDS = 16;

/** Whether a logged row is an evaluation's (its keys are `eval/...`). */
function isEvalRow(metrics: Readonly<Record<string, unknown>>): boolean {
  return Object.keys(metrics).some((k) => k.startsWith('eval/'));
}

/** Follows the logged rows for the progress bar: the recent train rewards and the last eval reward. */
export class RewardStats implements TrainerCallback {
  private readonly recent: number[] = [];
  /** The last evaluation's summed per-turn reward (or what the run set after its own evaluation). */
  lastEval: number | undefined;

  onLog({ metrics }: LogEvent): void {
    if (isEvalRow(metrics)) {
      const r = evalRowReward(metrics);
      if (r !== undefined) this.lastEval = r;
      return;
    }
    const r = trainRowReward(metrics);
    if (r === undefined) return;
    this.recent.push(r);
    if (this.recent.length > RECENT_REWARDS) this.recent.shift();
  }

  /** Mean of the recent train rewards, or undefined before the first train row. */
  recentReward(): number | undefined {
    const r = this.recent;
    return r.length > 0 ? r.reduce((a, b) => a + b, 0) / r.length : undefined;
  }
}
