/**
 * One training run: run directory, metrics, progress, checkpoints, resume, plots, final models.
 *
 * Run directory:
 *   config.yaml      the resolved config (`comlrl train --config` re-runs it)
 *   run.json         trainer, task, seed, backend, config hash, sessions
 *   metrics.jsonl    one line per logged step (CoMLRL names + perf/* and run/* extras)
 *   rewards.png/svg, losses.png/svg, kl.png/svg (reference KL on), plots.html (every figure)
 *   eval.json        evaluation before and after training
 *   checkpoints/step-NNNNNN/   agents (HF format), critics and heads, trainer_state.json,
 *                    optimizer.safetensors, run_state.json, config.json, manifest.json
 *   final/           the trained agents (and critics) when output.save_final_model
 *   run.lock         while a run is in progress: its pid and host (one run per directory)
 *
 * A checkpoint is written atomically (src/checkpoint). Resuming verifies it completely (sizes,
 * SHA-256, config identity, optimizer and trainer state) before anything in the run directory is
 * touched, so a refused resume leaves the directory as it was.
 */
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { checkpointName } from '../src/checkpoint/atomic.js';
import { formatBytes, formatDuration, formatNumber } from '../src/logging/format.js';
import { peakMemory } from '../src/logging/memory.js';
import { PLOTS_PAGE } from '../src/logging/plots.js';
import { displayPath } from './display-path.js';
import type { RunConfig } from './schemas.js';
import { testPause } from './test-pause.js';
import { writeFinalModel } from '../trainers/core/checkpoint.js';
import { cursorStep, mergedModels, type TrainerHandle } from './trainer.js';
import { claimRunDir } from './training/claim.js';
import { alreadyComplete, buildRun, openRun, type PreparedRun } from './training/prepare.js';
import { writeRunPlots } from './training/plots.js';
import { RUN_FILES } from './training/run-dir.js';
import { trainRun, type Trained } from './training/train.js';
import type { RunOptions, RunResult } from './training/types.js';

export { displayPath } from './display-path.js';
export { CHECKPOINT_CONFIG_FILE, RUN_STATE_FILE } from './training/checkpoints.js';
export { NoCheckpointError, resolveResume, type ResumePoint } from './training/resume.js';
export { defaultRunDir, RUN_FILES, runConfigHash, runDirConfigFile } from './training/run-dir.js';
export type { EvalSummary } from './training/evaluation.js';
export { evalRowReward, trainRowReward } from './training/metrics.js';
export type { RunOptions, RunResult } from './training/types.js';

/**
 * Runs (or resumes) training as the config says. Returns when training completes or stops early;
 * throws on errors (a refused resume throws before touching the run directory).
 *
 * Claim (cli/training/claim.ts): check the run directory and take its lock, so no other run
 * writes there until this one ends. Prepare (cli/training/prepare.ts): build the task and the
 * trainer (nothing written yet), return early if the run already finished, open the run
 * directory. Train (cli/training/train.ts): the trainer's loop with the run's callbacks
 * (evaluation before and after, progress, checkpoints, stopping, test pauses). Finish: final/,
 * plots and the summary. A new run that fails before its first training item is done leaves
 * nothing behind (the claim takes back what it created), so the same command runs again.
 */
export async function runTraining(options: RunOptions): Promise<RunResult> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const claim = await claimRunDir(options, log);
  let progressed = false;
  try {
    const run = await buildRun(options, claim.runDir, log);
    try {
      const done = await alreadyComplete(run);
      if (done !== null) return done;
      await openRun(run);
      options.onRunDir?.(run.runDir);
      const trained = await trainRun(run, options);
      progressed = true;
      return await finishRun(run, trained, options.signal);
    } catch (err) {
      progressed ||= cursorStep(run.trainer.cursor, run.trainer.itemsPerEpoch) > run.startStep;
      throw err;
    } finally {
      await run.close();
    }
  } catch (err) {
    if (claim.fresh && !progressed && (await claim.abandon())) {
      const what = existsSync(claim.runDir) ? `what it wrote in ${displayPath(claim.runDir)} is` : `${displayPath(claim.runDir)} is`;
      log(`[comlrl] the run failed before its first training item: ${what} removed, so the same command can run again`);
    }
    throw err;
  } finally {
    claim.release();
  }
}

/** The end of a run: final/ (when it completed), plots, the result and its summary lines. */
async function finishRun(run: PreparedRun, trained: Trained, signal: AbortSignal | undefined): Promise<RunResult> {
  const { config, runDir, trainer, metrics, log } = run;
  const { step, completed, evals } = trained;
  const finalDir = completed && config.output.save_final_model ? await writeFinal(runDir, trainer, config, step, run.hash) : undefined;
  if (completed && signal?.aborted === true) log('[comlrl] the interrupt came after the last training item: the run finished and its results are written');
  const plots = config.output.plots ? (await writeRunPlots(runDir, metrics.rows(), config, run.task)).flatMap((p) => [p.png, p.svg]) : [];
  const sessionSeconds = (performance.now() - run.t0) / 1000;
  const mem = peakMemory();
  const result: RunResult = {
    runDir,
    step,
    totalSteps: run.totalSteps,
    completed,
    ...(evals.before ? { before: evals.before } : {}),
    ...(evals.after ? { after: evals.after } : {}),
    checkpoints: trained.checkpoints,
    plots,
    ...(finalDir ? { finalDir } : {}),
    configHash: run.hash,
    backend: run.backend,
    seconds: run.elapsedBefore + sessionSeconds,
    tokensPerSecond: sessionSeconds > 0 ? (run.counter.total - run.tokensBefore) / sessionSeconds : 0,
    peakRssBytes: mem.peakRssBytes,
    peakTensorBytes: mem.peakTensorBytes,
    wasmHeapBytes: mem.wasmHeapBytes,
    gpuPeakBytes: mem.gpuPeakBytes,
  };
  for (const line of summaryLines(result, metrics.rows().length)) log(line);
  return result;
}

/**
 * final/: the trained models, written like a checkpoint (temporary folder, manifest, rename), so a
 * kill mid-write leaves no final/ at all, and resume / eval verify the one they find.
 */
async function writeFinal(runDir: string, trainer: TrainerHandle, config: RunConfig, step: number, hash: string): Promise<string> {
  const finalDir = path.join(runDir, RUN_FILES.final);
  await writeFinalModel(trainer.trainer, finalDir, {
    step,
    configHash: hash,
    dtype: config.output.save_dtype,
    // LoRA with save_merged: the merged full models beside the adapters.
    merged: mergedModels(config),
    beforeManifest: () => testPause('final-write', step),
  });
  return finalDir;
}

/** The console summary of a finished (or stopped) run. */
export function summaryLines(r: RunResult, metricsRows: number): string[] {
  const rel = displayPath;
  const checkpoint = path.join(r.runDir, RUN_FILES.checkpoints, checkpointName(r.step));
  // A stop before the first item (MARLHF's phase 1) has no checkpoint: the run starts over.
  const stoppedWithout = !r.completed && !existsSync(checkpoint);
  const lines = [
    r.completed
      ? `[comlrl] done: ${r.step}/${r.totalSteps} steps in ${formatDuration(r.seconds)} · ${formatNumber(r.tokensPerSecond)} tokens/s · peak RSS ${formatBytes(r.peakRssBytes)}`
      : stoppedWithout
        ? `[comlrl] stopped at step ${r.step}/${r.totalSteps} before its first checkpoint; start it again with: npx comlrl train --resume ${rel(r.runDir)}`
        : `[comlrl] stopped at step ${r.step}/${r.totalSteps} (checkpoint written); continue with: npx comlrl train --resume ${rel(r.runDir)}`,
  ];
  if (!r.completed && !stoppedWithout) lines.push(`[comlrl] checkpoint: ${rel(checkpoint)}`);
  if (r.peakTensorBytes !== undefined) {
    const heap = r.wasmHeapBytes ? ` · wasm heap ${formatBytes(r.wasmHeapBytes)} (its high-water mark)` : r.gpuPeakBytes ? ` · GPU ${formatBytes(r.gpuPeakBytes)} (CUDA allocator's peak)` : '';
    lines.push(`[comlrl] peak memory: tensors ${formatBytes(r.peakTensorBytes)}${heap} · process RSS ${formatBytes(r.peakRssBytes)}`);
  }
  if (r.before && r.after) {
    const d = r.after.episodeReward - r.before.episodeReward;
    lines.push(`[comlrl] eval episode reward: before ${formatNumber(r.before.episodeReward)} → after ${formatNumber(r.after.episodeReward)} (${d >= 0 ? '+' : ''}${formatNumber(d)})`);
  } else if (r.after) {
    lines.push(`[comlrl] eval episode reward after training: ${formatNumber(r.after.episodeReward)}`);
  }
  lines.push(`[comlrl] run directory: ${rel(r.runDir)}`);
  lines.push(`           metrics.jsonl (${metricsRows} lines), config.yaml, run.json${r.before || r.after ? ', eval.json' : ''}`);
  if (r.plots.length > 0) lines.push(`           plots: ${PLOTS_PAGE} (every figure), ${r.plots.filter((p) => p.endsWith('.png')).map((p) => path.basename(p)).join(', ')} (+ SVG)`);
  if (r.finalDir) lines.push(`           final models: ${rel(r.finalDir)}/agent_*`);
  if (r.checkpoints.length > 0) lines.push(`           checkpoints: ${r.checkpoints.map((c) => path.basename(c)).join(', ')}`);
  return lines;
}
