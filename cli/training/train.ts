/**
 * The middle of a training run: the trainer's loop with the run's callbacks, one job each. In list
 * order (train end goes the other way, so the bar is closed before the eval after training), after
 * the metrics' item counter and one that notes how training ended:
 *   test pauses        `item-end` for the crash tests, before anything decides on the item
 *   evaluation         eval before (train begin) and after (train end) training, eval.json
 *   stop               `--stop-after` and Ctrl-C / SIGTERM
 *   reward stats       the rewards the bar shows, from the logged rows
 *   progress           the bar
 *   checkpoints        every `output.save_steps` items and at a stop (written by the loop)
 */
import * as path from 'node:path';
import type { TrainEndReason, TrainerCallback } from '../../trainers/core/callbacks.js';
import { testPauseCallback } from '../test-pause.js';
import { cursorStep } from '../trainer.js';
import { checkpointCallback, progressCallback, stopCallback } from './callbacks.js';
import { Checkpointer } from './checkpoints.js';
import { evaluationCallback, readRunJson, type EvalRecord, type EvalSummary } from './evaluation.js';
import { RewardStats } from './metrics.js';
import type { PreparedRun } from './prepare.js';
import { RUN_FILES } from './run-dir.js';
import type { RunOptions } from './types.js';

/** What training left for the end of the run. */
export interface Trained {
  /** Steps (training items) done. */
  readonly step: number;
  /** Every item is done (not stopped early). */
  readonly completed: boolean;
  /** eval.json's evaluations. */
  readonly evals: EvalRecord;
  /** Checkpoint directories written in this session. */
  readonly checkpoints: readonly string[];
}

/** Trains `run` from where it stands to its end, or until a stop (with a checkpoint). */
export async function trainRun(run: PreparedRun, options: Pick<RunOptions, 'stopAfter' | 'signal' | 'progress' | 'label'>): Promise<Trained> {
  const { config, trainer, resume, runDir } = run;
  const evalPath = path.join(runDir, RUN_FILES.eval);
  const evals: EvalRecord = resume ? await readRunJson<{ before: EvalSummary }>(evalPath, run.log) : {};
  // A resumed run evaluates "after" again at its end; one left by a crash is not final.
  delete evals.after;
  const hasEval = run.task.evalTasks.length > 0 && config.trainerConfig.eval_num_samples > 0;
  const evalAround = config.output.eval_before_after && hasEval;
  const evalBefore = !resume && evalAround;

  const stats = new RewardStats();
  const checkpointer = new Checkpointer(
    { runDir, checkpointsDir: path.join(runDir, RUN_FILES.checkpoints), config, task: run.task, hash: run.hash, models: run.models, trainer, metrics: run.metrics, counter: run.counter, elapsedSeconds: () => run.elapsedBefore + (performance.now() - run.t0) / 1000 },
    resume ? run.startStep : -1,
  );
  const end: { reason?: TrainEndReason } = {};
  const callbacks: TrainerCallback[] = [
    // First: where the loop is, for the rows logged during the events below.
    run.metrics,
    {
      onTrainEnd: ({ reason }) => {
        end.reason = reason;
      },
    },
    testPauseCallback,
    evaluationCallback({
      trainer,
      file: evalPath,
      record: evals,
      before: evalBefore,
      after: evalAround,
      log: run.log,
      // The bar shows the eval's mean episode reward.
      onSummary: (s) => {
        stats.lastEval = s.episodeReward;
      },
    }),
    stopCallback(options.stopAfter, options.signal),
    stats,
    progressCallback({ label: options.label ?? config.trainer, stream: options.progress, verbose: config.output.verbose, info: () => ({ reward: stats.recentReward(), eval: stats.lastEval }) }),
    checkpointCallback(checkpointer, config.output.save_steps),
  ];
  await trainer.train({
    callbacks,
    saveCheckpoint: async ({ step }) => {
      await checkpointer.write(step);
      return checkpointer.written[checkpointer.written.length - 1];
    },
    // The eval before training just measured these weights.
    skipFirstEval: evalBefore,
  });
  return { step: cursorStep(trainer.cursor, trainer.itemsPerEpoch), completed: end.reason === 'finished', evals, checkpoints: checkpointer.written };
}
