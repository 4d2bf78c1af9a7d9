/**
 * Evaluation around training: the eval before training and after it, summarised (mean episode
 * reward over the eval episodes) and kept in the run directory's eval.json, by a callback of the
 * run (its train begin and end).
 */
import { existsSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import { writeFileAtomically } from '../../src/checkpoint/atomic.js';
import { formatNumber } from '../../src/logging/format.js';
import { episodeReward } from '../../src/tasks/metrics.js';
import type { TrainerCallback } from '../../trainers/core/callbacks.js';
import type { MetricRecord } from '../../trainers/core/metrics.js';
import type { AnyEpisode } from '../tasks.js';
import { cursorStep, type TrainerHandle } from '../trainer.js';

/** An evaluation's headline numbers. */
export interface EvalSummary {
  readonly step: number;
  readonly envStep: number;
  /** Mean over eval episodes of the summed (processed) reward. */
  readonly episodeReward: number;
  readonly episodes: number;
  readonly metrics: MetricRecord;
}

/** eval.json: the evaluations before and after training. */
export interface EvalRecord {
  before?: EvalSummary;
  after?: EvalSummary;
}

/** Reads a JSON file of the run directory; a missing or unreadable one (e.g. cut short by an older version) is `{}`. */
export async function readRunJson<T extends object>(file: string, log: (line: string) => void): Promise<Partial<T>> {
  if (!existsSync(file)) return {};
  try {
    const v: unknown = JSON.parse(await fs.readFile(file, 'utf8'));
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Partial<T>) : {};
  } catch {
    log(`[comlrl] warning: ${file} is unreadable (cut short by a crash?); it is written again`);
    return {};
  }
}

/** Mean of the summed rewards of eval episodes. */
function meanEpisodeReward(episodes: readonly AnyEpisode[]): number {
  return episodes.length === 0 ? Number.NaN : episodes.reduce((s, e) => s + episodeReward(e), 0) / episodes.length;
}

/** Evaluates the trainer's current agents and summarises the result. */
export async function evaluateNow(trainer: TrainerHandle): Promise<EvalSummary> {
  const r = await trainer.evaluate();
  return { step: cursorStep(trainer.cursor, trainer.itemsPerEpoch), envStep: trainer.envSteps, episodeReward: meanEpisodeReward(r.episodes), episodes: r.episodes.length, metrics: r.metrics };
}

/** Writes eval.json. */
export async function writeEvalRecord(file: string, record: EvalRecord): Promise<void> {
  await writeFileAtomically(file, `${JSON.stringify(record, null, 2)}\n`);
}

/** Options of {@link evaluationCallback}. */
export interface EvaluationOptions {
  readonly trainer: TrainerHandle;
  /** eval.json. */
  readonly file: string;
  /** What eval.json holds (a resumed run's "before"); the callback adds to it. */
  readonly record: EvalRecord;
  /** Evaluate before training (the train() call then skips its own first evaluation). */
  readonly before: boolean;
  /** Evaluate after training, when it finished (not when stopped early). */
  readonly after: boolean;
  readonly log: (line: string) => void;
  /** Receives each summary (the progress bar shows its reward). */
  readonly onSummary: (summary: EvalSummary) => void;
}

/** The evaluations before and after training, each written to eval.json as soon as it is done. */
export function evaluationCallback(o: EvaluationOptions): TrainerCallback {
  const evaluate = async (): Promise<EvalSummary> => {
    const s = await evaluateNow(o.trainer);
    o.onSummary(s);
    return s;
  };
  return {
    onTrainBegin: async () => {
      if (!o.before) return;
      const before = await evaluate();
      o.record.before = before;
      o.log(`[comlrl] eval before training: episode reward ${formatNumber(before.episodeReward)} (${before.episodes} episodes)`);
      await writeEvalRecord(o.file, o.record);
    },
    onTrainEnd: async ({ reason }) => {
      if (reason !== 'finished' || !o.after) return;
      o.record.after = await evaluate();
      await writeEvalRecord(o.file, o.record);
    },
  };
}
