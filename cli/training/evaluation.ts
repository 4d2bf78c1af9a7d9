/**
 * Evaluation around training: the eval before training and after it, summarised (mean episode
 * reward over the eval episodes) and kept in the run directory's eval.json.
 */
import { existsSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import { writeFileAtomically } from '../../src/checkpoint/atomic.js';
import { episodeReward } from '../../src/tasks/metrics.js';
import type { MetricRecord } from '../../trainers/common/metrics.js';
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
