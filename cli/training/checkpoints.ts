/**
 * Checkpointing during a run: one atomic checkpoint directory per save (weights, trainer and
 * optimizer state, run state, config), the oldest ones dropped past `output.save_total_limit`, and
 * the plots refreshed alongside (at most once a minute: rendering grows with the log).
 */
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { checkpointName, listCheckpoints, writeCheckpointAtomically } from '../../src/checkpoint/atomic.js';
import { runConfigToDocument } from '../../src/config/schema.js';
import { writePlots } from '../../src/logging/plots.js';
import type { TypedRunConfig } from '../schemas.js';
import { testPause } from '../test-pause.js';
import type { TokenCounter, TrainerHandle } from '../trainer.js';
import type { RunMetrics } from './metrics.js';

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
      readonly config: TypedRunConfig;
      readonly hash: string;
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
    await writeCheckpointAtomically(dir, { step, configHash: hash }, async (tmp) => {
      await metrics.withoutLogging(() => trainer.save(tmp));
      await testPause('checkpoint-write', step);
      await trainer.writeState(tmp);
      const rs = { step, cursor: trainer.cursor, env_step: trainer.envSteps, metrics_rows: metrics.rows().length, elapsed_s: elapsed, tokens: this.o.counter.total, trainer: config.trainer, config_hash: hash };
      await fs.writeFile(path.join(tmp, RUN_STATE_FILE), `${JSON.stringify(rs, null, 2)}\n`);
      await fs.writeFile(path.join(tmp, CHECKPOINT_CONFIG_FILE), `${JSON.stringify(runConfigToDocument(config), null, 2)}\n`);
    });
    this.lastStep = step;
    this.written.push(dir);
    const limit = config.output.save_total_limit;
    if (limit !== null) {
      for (const old of (await listCheckpoints(this.o.checkpointsDir)).slice(limit)) await fs.rm(old, { recursive: true, force: true });
    }
    if (config.output.plots && performance.now() - this.lastPlot > PLOT_INTERVAL_MS) {
      this.lastPlot = performance.now();
      await writePlots(this.o.runDir, metrics.rows(), { title: `${config.dataset.task} · ${config.trainer}` }).catch(() => []);
    }
  }
}
