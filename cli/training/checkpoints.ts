/**
 * Checkpointing during a run: one checkpoint per save, as the library writes it
 * (trainers/core/checkpoint.ts: weights, trainer and optimizer state, manifest, atomically) with the
 * run's own files beside (run state, config), the oldest ones dropped past
 * `output.save_total_limit`, and the plots refreshed alongside (at most once a minute: rendering
 * grows with the log).
 */
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { checkpointName } from '../../src/checkpoint/atomic.js';
import { runConfigToDocument } from '../../src/config/schema.js';
import { pruneCheckpoints, writeCheckpoint } from '../../trainers/core/checkpoint.js';
import type { RunConfig } from '../schemas.js';
import type { TaskSetup } from '../tasks.js';
import { testPause } from '../test-pause.js';
import type { TokenCounter, TrainerHandle } from '../trainer.js';
import type { RunMetrics } from './metrics.js';
import { writeRunPlots } from './plots.js';
import { configWithRecordedPaths, type ModelRecord } from './models.js';

/** Extra file of each checkpoint: where the run was when it was written. */
export const RUN_STATE_FILE = 'run_state.json';
/** The config document inside each checkpoint. */
export const CHECKPOINT_CONFIG_FILE = 'config.json';

/** Minimum time between plot refreshes at checkpoints. */
const PLOT_INTERVAL_MS = 60_000;

/** Writes the run's checkpoints (see the module comment). */
export class Checkpointer {
  /** Checkpoint directories written in this session. */
  readonly written: string[] = [];
  private lastPlot = -Infinity;

  constructor(
    private readonly o: {
      readonly runDir: string;
      readonly checkpointsDir: string;
      readonly config: RunConfig;
      /** For the plots' random-play line. */
      readonly task: Pick<TaskSetup, 'randomPlayReward'>;
      readonly hash: string;
      /** The run's models (see ./models.ts), recorded in each checkpoint's run_state.json. */
      readonly models: ModelRecord;
      readonly trainer: TrainerHandle;
      readonly metrics: RunMetrics;
      readonly counter: TokenCounter;
      /** Seconds of training so far, over every session of the run. */
      readonly elapsedSeconds: () => number;
    },
    /** The step of the newest checkpoint (a resumed run's start), or -1. */
    public lastStep: number,
  ) {}

  /** Writes the checkpoint of `step` (atomically), prunes old ones and refreshes the plots when due. */
  async write(step: number): Promise<void> {
    const { config, hash, trainer, metrics } = this.o;
    const dir = path.join(this.o.checkpointsDir, checkpointName(step));
    const elapsed = this.o.elapsedSeconds();
    // Nothing the trainer logs while saving goes into the run's metrics (a checkpoint is not the final model).
    await metrics.withoutLogging(() =>
      writeCheckpoint(trainer.trainer, dir, {
        step,
        configHash: hash,
        beforeManifest: async (tmp) => {
          await testPause('checkpoint-write', step);
          const models = this.o.models;
          const rs = { step, cursor: trainer.cursor, env_step: trainer.envSteps, metrics_rows: metrics.rows().length, elapsed_s: elapsed, tokens: this.o.counter.total, trainer: config.trainer, config_hash: hash, models };
          await fs.writeFile(path.join(tmp, RUN_STATE_FILE), `${JSON.stringify(rs, null, 2)}\n`);
          // The config the hash covers: the model paths the run started with (this session's are in config.yaml).
          await fs.writeFile(path.join(tmp, CHECKPOINT_CONFIG_FILE), `${JSON.stringify(runConfigToDocument(configWithRecordedPaths(config, models)), null, 2)}\n`);
        },
      }),
    );
    this.lastStep = step;
    this.written.push(dir);
    const limit = config.output.save_total_limit;
    if (limit !== null) await pruneCheckpoints(this.o.checkpointsDir, limit);
    if (config.output.plots && performance.now() - this.lastPlot > PLOT_INTERVAL_MS) {
      this.lastPlot = performance.now();
      await writeRunPlots(this.o.runDir, metrics.rows(), config, this.o.task).catch(() => []);
    }
  }
}
