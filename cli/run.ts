/**
 * One training run: run directory, metrics, progress, checkpoints, resume, plots, final models.
 *
 * Run directory:
 *   config.yaml      the resolved config (`comlrl train --config` re-runs it)
 *   run.json         trainer, task, seed, backend, config hash, sessions
 *   metrics.jsonl    one line per logged step (CoMLRL names + perf/* and run/* extras)
 *   rewards.png/svg, losses.png/svg
 *   eval.json        evaluation before and after training
 *   checkpoints/step-NNNNNN/   agents (HF format), critics and heads, trainer_state.json,
 *                    optimizer.safetensors, run_state.json, config.json, manifest.json
 *   final/           the trained agents (and critics) when output.save_final_model
 *
 * A checkpoint is written atomically (src/checkpoint). Resuming verifies it completely (sizes,
 * SHA-256, config identity, optimizer and trainer state) before anything in the run directory is
 * touched, so a refused resume leaves the directory as it was.
 */
import { existsSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { stringify as yamlStringify } from 'yaml';
import { initBackend, type BackendName } from '../src/backend/init.js';
import { CheckpointError, checkpointName, cleanInterruptedWrites, listCheckpoints, writeCheckpointAtomically, writeFileAtomically } from '../src/checkpoint/atomic.js';
import { readTrainerState } from '../src/checkpoint/state.js';
import { memorySettingsOf, runConfigToDocument } from '../src/config/schema.js';
import { configureMemory } from '../src/memory/settings.js';
import { formatBytes, formatDuration, formatNumber } from '../src/logging/format.js';
import { peakMemory } from '../src/logging/memory.js';
import { MetricsLogger, readMetrics } from '../src/logging/metrics.js';
import { writePlots } from '../src/logging/plots.js';
import { ProgressBar, type ProgressStream } from '../src/logging/progress.js';
import { yieldToEventLoop } from './interrupt.js';
import { outputDirProblem } from './paths.js';
import type { TypedRunConfig as RunConfig } from './schemas.js';
import { setupTask, splitOf, splitOverlapWarning, type TaskSetup } from './tasks.js';
import { testPause, testPauseBlocking } from './test-pause.js';
import { buildTrainer, cursorStep, numAgentsOf, sourcesFromCheckpoint, sourcesFromConfig, TokenCounter, type TrainerHandle } from './trainer.js';
import { checkpointCallback, progressCallback, stopCallback, stopRequested, StopRun, type ItemEnd, type RunCallback } from './training/callbacks.js';
import { Checkpointer } from './training/checkpoints.js';
import { evaluateNow, readRunJson, writeEvalRecord, type EvalRecord, type EvalSummary } from './training/evaluation.js';
import { RunMetrics } from './training/metrics.js';

import { finishedRun, type ResumePoint } from './training/resume.js';
import { defaultRunDir, isNonEmptyRun, RUN_CONFIG_HEADER, RUN_FILES, runConfigHash, runDirConfigFile } from './training/run-dir.js';

export { CHECKPOINT_CONFIG_FILE, RUN_STATE_FILE } from './training/checkpoints.js';
export { NoCheckpointError, resolveResume, type ResumePoint } from './training/resume.js';
export { defaultRunDir, RUN_FILES, runConfigHash, runDirConfigFile } from './training/run-dir.js';
export type { EvalSummary } from './training/evaluation.js';
export { evalRowReward, trainRowReward } from './training/metrics.js';


/** Options of {@link runTraining}. */
export interface RunOptions {
  readonly config: RunConfig;
  /** A checkpoint directory to continue from (see {@link resolveResume}). */
  readonly resume?: ResumePoint;
  /**
   * A run directory that has no checkpoint yet (see {@link NoCheckpointError}): the run starts again
   * from step 0 in it, replacing what the stopped attempt left.
   */
  readonly restartIn?: string;
  /** Stop (as if interrupted, writing a checkpoint) once the run reaches this step. */
  readonly stopAfter?: number;
  /** Aborting it stops the run at the next item boundary, with a checkpoint. */
  readonly signal?: AbortSignal;
  /** Human-readable output (default: stderr). */
  readonly log?: (line: string) => void;
  /** Where the progress bar draws (default: stderr). */
  readonly progress?: ProgressStream;
  /** Label of the progress bar. */
  readonly label?: string;
  /**
   * How the user chooses the run directory, for messages (default `output.dir`; the demo's `--out`).
   * With `--out` the hints do not mention `--resume`, which only `train` has.
   */
  readonly outOption?: string;
}

/** What {@link runTraining} returns. */
export interface RunResult {
  readonly runDir: string;
  /** Steps (training items) done. */
  readonly step: number;
  readonly totalSteps: number;
  /** false when stopped early (stopAfter or signal): resume it with `--resume runDir`. */
  readonly completed: boolean;
  readonly before?: EvalSummary;
  readonly after?: EvalSummary;
  readonly checkpoints: readonly string[];
  readonly plots: readonly string[];
  readonly finalDir?: string;
  readonly configHash: string;
  readonly backend: BackendName;
  readonly seconds: number;
  readonly tokensPerSecond: number;
  readonly peakRssBytes: number;
  /** Highest tfjs tensor bytes sampled during the run. */
  readonly peakTensorBytes?: number;
  /** The wasm heap's high-water mark (null on other backends). */
  readonly wasmHeapBytes?: number | null;
  /** The GPU's peak of allocated bytes (torch on a GPU; null elsewhere). */
  readonly gpuPeakBytes?: number | null;
}





/**
 * Runs (or resumes) training as the config says. Returns when training completes or stops early;
 * throws on errors (a refused resume throws before touching the run directory).
 *
 * The steps, each in its own function or module: check the run directory; build the task and the
 * trainer (nothing written yet); return early if the run already finished; prepare the run
 * directory; evaluate before training; train, with callbacks for progress, checkpoints and stopping
 * (cli/training/); evaluate after; write final/, plots and the summary.
 */
export async function runTraining(options: RunOptions): Promise<RunResult> {
  const { config } = options;
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const t0 = performance.now();
  const resume = options.resume;
  const restart = options.restartIn !== undefined && !resume;
  const runDir = resume ? resume.runDir : restart ? path.resolve(options.restartIn as string) : defaultRunDir(config);
  await checkRunDir(runDir, config, { resume: resume !== undefined, restart, outOption: options.outOption ?? 'output.dir', log });
  const hash = runConfigHash(config);
  const backend = await initBackend(config.backend);
  configureMemory(memorySettingsOf(config.memory));

  // ---- build everything before the first write into the run directory ----
  const task = await setupRunTask(config, log);
  const counter = new TokenCounter();
  const metrics = new RunMetrics(counter, config.output.verbose ? log : null);
  let trainer: TrainerHandle;
  try {
    const numAgents = numAgentsOf(config, task.env.numAgents);
    const sources = resume ? sourcesFromCheckpoint(config, resume.checkpoint, numAgents) : sourcesFromConfig(config, numAgents);
    trainer = await buildTrainer(config, task, sources, metrics, counter);
    if (resume) trainer.importState(await readTrainerState(resume.checkpoint));
  } catch (err) {
    await task.close();
    throw err;
  }

  try {
    const totalSteps = trainer.itemsPerEpoch * trainer.epochs;
    let step = cursorStep(trainer.cursor, trainer.itemsPerEpoch);
    if (resume && step !== resume.step) {
      throw new CheckpointError(`run_state.json says step ${resume.step} but the trainer state's cursor is at step ${step}`, resume.checkpoint);
    }
    // Resuming a run that already finished (its verified final/ is at the last step, or its last
    // checkpoint is, and its final results were written) has nothing left to do: say so and leave
    // the run directory as it is. An incomplete or damaged final/ is rebuilt below instead.
    if (resume || restart) {
      const done = await finishedRun(runDir, config, { totalSteps, checkpointAtEnd: resume !== undefined && step >= totalSteps, hash });
      if (done !== null) {
        log(`[comlrl] the run in ${displayPath(runDir)} is already complete (step ${totalSteps}/${totalSteps}); nothing to resume`);
        return { runDir, step: totalSteps, totalSteps, completed: true, ...done, checkpoints: [], plots: [], configHash: hash, backend, seconds: resume?.elapsedS ?? 0, tokensPerSecond: 0, peakRssBytes: peakMemory().peakRssBytes };
      }
      if (resume && step >= totalSteps && config.output.save_final_model) log(`[comlrl] final/ of ${displayPath(runDir)} is missing or incomplete: rebuilding it from ${displayPath(resume.checkpoint)}`);
      if (restart) log(`[comlrl] ${displayPath(runDir)} has no checkpoint yet (the run stopped before its first one): starting it again from step 0`);
    }

    // ---- run directory ----
    await prepareRunDir(runDir, config, { resume, restart, hash, backend, step, totalSteps, metrics, log });
    const elapsedBefore = resume?.elapsedS ?? 0;
    const tokensBefore = resume?.tokens ?? 0;
    counter.total = tokensBefore;
    metrics.open(await openMetricsLog(runDir, resume), tokensBefore);
    metrics.write(trainer.envSteps, {
      'run/backend': backend,
      'run/seed': config.seed,
      'run/config_hash': hash,
      'run/trainer': config.trainer,
      'run/task': config.dataset.task,
      'run/step': step,
      'run/resumed': resume ? 1 : 0,
    });
    log(`[comlrl] ${resume ? `resuming ${displayPath(resume.checkpoint)} at step ${step}/${totalSteps}` : `training ${config.trainer} on ${config.dataset.task}: ${totalSteps} steps (${trainer.epochs} epochs × ${trainer.itemsPerEpoch} items)`} · backend ${backend} · seed ${config.seed} · config ${hash}`);
    log(`[comlrl] run directory: ${runDir}`);

    // ---- eval before ----
    const evalPath = path.join(runDir, RUN_FILES.eval);
    const evalRecord: EvalRecord = resume ? await readRunJson<{ before: EvalSummary }>(evalPath, log) : {};
    // A resumed run evaluates "after" again at its end; one left by a crash is not final.
    delete evalRecord.after;
    const evaluate = async (): Promise<EvalSummary> => {
      const s = await evaluateNow(trainer);
      metrics.lastEval = s.episodeReward;
      return s;
    };
    const hasEval = task.evalTasks.length > 0 && config.trainerConfig.eval_num_samples > 0;
    if (!resume && config.output.eval_before_after && hasEval) {
      evalRecord.before = await evaluate();
      log(`[comlrl] eval before training: episode reward ${formatNumber(evalRecord.before.episodeReward)} (${evalRecord.before.episodes} episodes)`);
      await writeEvalRecord(evalPath, evalRecord);
    }

    // ---- train, with callbacks ----
    const checkpointer = new Checkpointer(
      { runDir, checkpointsDir: path.join(runDir, RUN_FILES.checkpoints), config, hash, trainer, metrics, counter, elapsedSeconds: () => elapsedBefore + (performance.now() - t0) / 1000 },
      resume ? step : -1,
    );
    const bar = new ProgressBar({ total: Math.max(1, totalSteps), initial: step, label: options.label ?? config.trainer, ...(options.progress ? { stream: options.progress } : {}) });
    const barInfo = () => ({ reward: metrics.recentReward(), eval: metrics.lastEval });
    const callbacks: RunCallback[] = [progressCallback(bar, barInfo, config.output.verbose), checkpointCallback(checkpointer, config.output.save_steps), stopCallback];
    if (!config.output.verbose) bar.update(step, barInfo());
    let completed = true;
    try {
      if (options.stopAfter !== undefined && step >= options.stopAfter) throw new StopRun();
      await trainer.train(async () => {
        step = cursorStep(trainer.cursor, trainer.itemsPerEpoch);
        testPauseBlocking('item-end', step);
        // Let a pending Ctrl-C / SIGTERM handler run: the item's tensor work never yields.
        await yieldToEventLoop();
        const event: ItemEnd = { step, stop: stopRequested(step, options.stopAfter, options.signal) };
        for (const cb of callbacks) await cb.onItemEnd(event);
      }, { skipFirstEval: evalRecord.before !== undefined && !resume });
      step = cursorStep(trainer.cursor, trainer.itemsPerEpoch);
    } catch (err) {
      if (!(err instanceof StopRun)) throw err;
      completed = false;
    } finally {
      bar.finish();
    }

    // ---- eval after, final models, plots, summary ----
    if (completed && config.output.eval_before_after && hasEval) {
      evalRecord.after = await evaluate();
      await writeEvalRecord(evalPath, evalRecord);
    }
    const finalDir = completed && config.output.save_final_model ? await writeFinal(runDir, trainer, config, step, hash) : undefined;
    if (completed && options.signal?.aborted === true) log('[comlrl] the interrupt came after the last training item: the run finished and its results are written');
    const plots = config.output.plots ? (await writePlots(runDir, metrics.rows(), { title: `${config.dataset.task} · ${config.trainer}` })).flatMap((p) => [p.png, p.svg]) : [];
    const seconds = elapsedBefore + (performance.now() - t0) / 1000;
    const mem = peakMemory();
    const sessionSeconds = (performance.now() - t0) / 1000;
    const result: RunResult = {
      runDir,
      step,
      totalSteps,
      completed,
      ...(evalRecord.before ? { before: evalRecord.before } : {}),
      ...(evalRecord.after ? { after: evalRecord.after } : {}),
      checkpoints: checkpointer.written,
      plots,
      ...(finalDir ? { finalDir } : {}),
      configHash: hash,
      backend,
      seconds,
      tokensPerSecond: sessionSeconds > 0 ? (counter.total - tokensBefore) / sessionSeconds : 0,
      peakRssBytes: mem.peakRssBytes,
      peakTensorBytes: mem.peakTensorBytes,
      wasmHeapBytes: mem.wasmHeapBytes,
      gpuPeakBytes: mem.gpuPeakBytes,
    };
    for (const line of summaryLines(result, metrics.rows().length)) log(line);
    return result;
  } finally {
    trainer.dispose();
    await task.close();
  }
}

/**
 * Refuses a run directory the run must not write into (a file, another run, a user's config.yaml)
 * before anything is built; warns when `output.dir` is ignored by a resume.
 */
async function checkRunDir(
  runDir: string,
  config: RunConfig,
  o: { resume: boolean; restart: boolean; outOption: string; log: (line: string) => void },
): Promise<void> {
  const { outOption } = o;
  const choose = outOption === 'output.dir' ? 'set output.dir to a new directory' : `choose another ${outOption} DIR`;
  const dirProblem = outputDirProblem(runDir, outOption);
  if (dirProblem !== undefined) throw new Error(dirProblem);
  if (!o.resume && !o.restart && (await isNonEmptyRun(runDir))) {
    const none = (await listCheckpoints(path.join(runDir, RUN_FILES.checkpoints))).length === 0;
    const how = none ? `--resume ${runDir} starts it again from step 0 (it has no checkpoint yet)` : `continue it with --resume ${runDir}`;
    throw new Error(
      outOption === 'output.dir'
        ? `output directory ${runDir} already holds a run; ${how}, or set output.dir to a new directory`
        : `output directory ${runDir} already holds a run; ${choose}`,
    );
  }
  if (o.resume && config.output.dir != null && path.resolve(config.output.dir) !== runDir) {
    o.log(`[comlrl] warning: output.dir ${config.output.dir} is ignored when resuming; the run continues in ${runDir}`);
  }
  const configPath = runDirConfigFile(runDir);
  if (!o.resume && !o.restart && existsSync(configPath)) {
    // Probably the user's own config file: the resolved config would replace it (comments and all).
    throw new Error(`output directory ${runDir} already contains ${RUN_FILES.config} (${configPath}), which this run would overwrite with its resolved config; ${choose}, or move that file elsewhere`);
  }
}

/** The run's task, with its splits checked: no train rows is an error, no eval rows a warning. */
async function setupRunTask(config: RunConfig, log: (line: string) => void): Promise<TaskSetup> {
  const task = await setupTask(config);
  if (task.trainTasks.length === 0) {
    await task.close();
    const s = splitOf(config, 'train');
    throw new Error(`${s.key} '${s.spec}' selects no rows from ${s.from}`);
  }
  const evalConfigured = config.trainerConfig.eval_num_samples > 0 && (config.output.eval_before_after || config.trainerConfig.eval_interval > 0);
  if (evalConfigured && task.evalTasks.length === 0) {
    const s = splitOf(config, 'eval');
    log(`[comlrl] warning: ${s.key} '${s.spec}' selects no rows from ${s.from}; training runs without evaluation`);
  }
  const overlap = evalConfigured ? splitOverlapWarning(config, task) : undefined;
  if (overlap !== undefined) log(`[comlrl] ${overlap}`);
  return task;
}

/**
 * Writes config.yaml and run.json (a new session), and on resume or restart drops what a hard quit
 * left half-written (and, on restart, the stopped attempt's results).
 */
async function prepareRunDir(
  runDir: string,
  config: RunConfig,
  o: { resume: ResumePoint | undefined; restart: boolean; hash: string; backend: BackendName; step: number; totalSteps: number; metrics: RunMetrics; log: (line: string) => void },
): Promise<void> {
  const { resume, restart, hash } = o;
  await fs.mkdir(runDir, { recursive: true });
  // The saved config names the directory the run really lives in (a resume stays where it was).
  const doc = runConfigToDocument(resume ? { ...config, output: { ...config.output, dir: runDir } } : config);
  await writeFileAtomically(runDirConfigFile(runDir), `${RUN_CONFIG_HEADER}; config hash ${hash})\n${yamlStringify(doc)}`);
  const runInfoPath = path.join(runDir, RUN_FILES.run);
  const previous = await readRunJson<{ sessions: unknown[] }>(runInfoPath, o.log);
  const sessions = [...(Array.isArray(previous.sessions) ? previous.sessions : []), { started_at: new Date().toISOString(), backend: o.backend, resumed_from: resume?.checkpoint ?? null, start_step: o.step }];
  await writeFileAtomically(
    runInfoPath,
    `${JSON.stringify({ trainer: config.trainer, task: config.dataset.task, seed: config.seed, config_hash: hash, total_steps: o.totalSteps, sessions }, null, 2)}\n`,
  );
  if (resume || restart) {
    // Half-written checkpoints and final/ folders left by a hard quit (kill, power loss) are
    // never resumed from: drop them.
    const ckptDir = path.join(runDir, RUN_FILES.checkpoints);
    for (const name of existsSync(ckptDir) ? await fs.readdir(ckptDir) : []) {
      if (/^\.step-\d+\.tmp-/.test(name)) await fs.rm(path.join(ckptDir, name), { recursive: true, force: true });
    }
    await cleanInterruptedWrites(path.join(runDir, RUN_FILES.final));
    // A restart replaces what the stopped attempt left (an incomplete final/ is not a result).
    if (restart) for (const f of [RUN_FILES.eval, RUN_FILES.final]) await fs.rm(path.join(runDir, f), { recursive: true, force: true });
  }
}

/** metrics.jsonl: a resumed run drops what was logged after its checkpoint (it logs it again). */
async function openMetricsLog(runDir: string, resume: ResumePoint | undefined): Promise<MetricsLogger> {
  const metricsPath = path.join(runDir, RUN_FILES.metrics);
  if (!resume) return MetricsLogger.open(metricsPath, { overwrite: true });
  const rows = existsSync(metricsPath) ? readMetrics(metricsPath).slice(0, resume.metricsRows) : [];
  await fs.writeFile(`${metricsPath}.tmp`, rows.map((r) => `${JSON.stringify(r)}\n`).join(''));
  await fs.rename(`${metricsPath}.tmp`, metricsPath);
  return MetricsLogger.open(metricsPath);
}

/**
 * final/: the trained models, written like a checkpoint (temporary folder, manifest, rename), so a
 * kill mid-write leaves no final/ at all, and resume / eval verify the one they find.
 */
async function writeFinal(runDir: string, trainer: TrainerHandle, config: RunConfig, step: number, hash: string): Promise<string> {
  const finalDir = path.join(runDir, RUN_FILES.final);
  await writeCheckpointAtomically(finalDir, { step, configHash: hash }, async (tmp) => {
    await trainer.save(tmp);
    if (config.output.save_dtype !== 'float32') {
      for (let i = 0; i < trainer.agents.length; i++) await trainer.agents[i].model.save(path.join(tmp, `agent_${i}`), { dtype: config.output.save_dtype });
    }
    // LoRA with save_merged: the merged full models beside the adapters.
    await trainer.saveMerged(tmp, { dtype: config.output.save_dtype });
    await testPause('final-write', step);
  });
  return finalDir;
}

/** A path for messages: relative to the working directory when inside it, else absolute. */
export function displayPath(p: string): string {
  const rel = path.relative(process.cwd(), p);
  return rel === '' ? '.' : rel.startsWith('..') || path.isAbsolute(rel) ? p : rel;
}

/** The console summary of a finished (or stopped) run. */
export function summaryLines(r: RunResult, metricsRows: number): string[] {
  const rel = displayPath;
  const lines = [
    r.completed
      ? `[comlrl] done: ${r.step}/${r.totalSteps} steps in ${formatDuration(r.seconds)} · ${formatNumber(r.tokensPerSecond)} tokens/s · peak RSS ${formatBytes(r.peakRssBytes)}`
      : `[comlrl] stopped at step ${r.step}/${r.totalSteps} (checkpoint written); continue with: comlrl train --resume ${rel(r.runDir)}`,
  ];
  if (!r.completed) lines.push(`[comlrl] checkpoint: ${rel(path.join(r.runDir, RUN_FILES.checkpoints, checkpointName(r.step)))}`);
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
  if (r.plots.length > 0) lines.push(`           plots: ${r.plots.filter((p) => p.endsWith('.png')).map((p) => path.basename(p)).join(', ')} (+ SVG)`);
  if (r.finalDir) lines.push(`           final models: ${rel(r.finalDir)}/agent_*`);
  if (r.checkpoints.length > 0) lines.push(`           checkpoints: ${r.checkpoints.map((c) => path.basename(c)).join(', ')}`);
  return lines;
}
