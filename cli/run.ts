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
import { existsSync, readFileSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { stringify as yamlStringify } from 'yaml';
import { initBackend, type BackendName } from '../src/backend/init.js';
import { CheckpointError, checkpointName, cleanInterruptedWrites, listCheckpoints, verifyCheckpoint, writeCheckpointAtomically, writeFileAtomically, MANIFEST_FILE } from '../src/checkpoint/atomic.js';
import { OPTIMIZER_STATE_FILE, readTrainerState, TRAINER_STATE_FILE } from '../src/checkpoint/state.js';
import { configHash, stableStringify } from '../src/config/hash.js';
import { memorySettingsOf, runConfigIdentity, runConfigToDocument, type RunConfig as AnyRunConfig } from '../src/config/schema.js';
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
import { Checkpointer, CHECKPOINT_CONFIG_FILE, RUN_STATE_FILE } from './training/checkpoints.js';
import { evaluateNow, readRunJson, writeEvalRecord, type EvalRecord, type EvalSummary } from './training/evaluation.js';
import { RunMetrics } from './training/metrics.js';

export { CHECKPOINT_CONFIG_FILE, RUN_STATE_FILE } from './training/checkpoints.js';
export type { EvalSummary } from './training/evaluation.js';
export { evalRowReward, trainRowReward } from './training/metrics.js';

/** Files of a run directory. */
export const RUN_FILES = {
  config: 'config.yaml',
  run: 'run.json',
  metrics: 'metrics.jsonl',
  eval: 'eval.json',
  checkpoints: 'checkpoints',
  final: 'final',
} as const;


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
}

/** A verified checkpoint to resume from. */
export interface ResumePoint {
  readonly runDir: string;
  readonly checkpoint: string;
  readonly step: number;
  readonly metricsRows: number;
  readonly elapsedS: number;
  readonly tokens: number;
}

/** `--resume` of a run directory that holds no checkpoint yet (the run stopped before its first one). */
export class NoCheckpointError extends CheckpointError {
  constructor(readonly runDir: string) {
    super(`no checkpoint under ${path.join(runDir, RUN_FILES.checkpoints)} yet`, runDir);
    this.name = 'NoCheckpointError';
  }
}


/** The hash stored in checkpoints: the config minus output, backend and memory. */
export function runConfigHash(config: AnyRunConfig): string {
  return configHash(runConfigIdentity(config));
}

/** Reads the YAML config a run directory stores. */
export function runDirConfigFile(runDir: string): string {
  return path.join(runDir, RUN_FILES.config);
}

function flatDiff(a: unknown, b: unknown, prefix = ''): string[] {
  if (stableStringify(a) === stableStringify(b)) return [];
  const isObj = (v: unknown) => v !== null && typeof v === 'object' && !Array.isArray(v);
  if (isObj(a) && isObj(b)) {
    const keys = [...new Set([...Object.keys(a as object), ...Object.keys(b as object)])].sort();
    return keys.flatMap((k) => flatDiff((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], prefix ? `${prefix}.${k}` : k));
  }
  const show = (v: unknown) => (v === undefined ? '(unset)' : JSON.stringify(v));
  return [`${prefix || '(config)'}: checkpoint ${show(a)}, this run ${show(b)}`];
}

/**
 * Finds and fully verifies the checkpoint to resume: `dir` is a run directory (its newest
 * checkpoint is used) or one checkpoint directory. Nothing is written.
 * @throws CheckpointError naming the problem (missing, damaged, incompatible config, missing state).
 */
export async function resolveResume(dir: string, config: RunConfig): Promise<ResumePoint> {
  const abs = path.resolve(dir);
  if (!existsSync(abs)) throw new CheckpointError('resume directory not found', abs);
  let checkpoint: string;
  let runDir: string;
  if (existsSync(path.join(abs, MANIFEST_FILE)) || /^step-\d+$/.test(path.basename(abs))) {
    checkpoint = abs;
    runDir = path.dirname(path.dirname(abs));
  } else {
    const found = await listCheckpoints(path.join(abs, RUN_FILES.checkpoints));
    if (found.length === 0) {
      if (await isNonEmptyRun(abs)) throw new NoCheckpointError(abs);
      throw new CheckpointError(`not a run directory: no ${RUN_FILES.config}, ${RUN_FILES.run}, ${RUN_FILES.metrics} or ${RUN_FILES.checkpoints}/ there`, abs);
    }
    checkpoint = found[0];
    runDir = abs;
  }
  const hash = runConfigHash(config);
  if (!existsSync(checkpoint)) throw new CheckpointError('checkpoint directory not found', checkpoint);
  // The pieces exact resume cannot do without, named before the generic manifest check.
  const required: [string, string][] = [
    [OPTIMIZER_STATE_FILE, 'optimizer state (AdamW moments)'],
    [TRAINER_STATE_FILE, 'trainer state (counters, dataset cursor, RNG streams, buffers)'],
    [RUN_STATE_FILE, 'run state (step, metrics position)'],
    ['agent_0', 'agent weights'],
  ];
  for (const [file, what] of required) {
    if (!existsSync(path.join(checkpoint, file))) throw new CheckpointError(`damaged checkpoint: missing ${what}: ${file}`, checkpoint);
  }
  try {
    await verifyCheckpoint(checkpoint, { configHash: hash });
  } catch (err) {
    if (err instanceof CheckpointError && /config mismatch/.test(err.message)) {
      // Name the keys that differ, when the checkpoint's config is readable.
      let detail = '';
      try {
        const saved = JSON.parse(readFileSync(path.join(checkpoint, CHECKPOINT_CONFIG_FILE), 'utf8')) as Record<string, unknown>;
        const diffs = flatDiff(stripIdentity(saved), runConfigIdentity(config));
        if (diffs.length > 0) detail = `; differing keys: ${diffs.slice(0, 8).join('; ')}`;
      } catch {
        // The hash comparison alone already refused it.
      }
      throw new CheckpointError(`incompatible checkpoint: ${err.message.replace(/ \(checkpoint: .*\)$/, '')}${detail}`, checkpoint);
    }
    if (err instanceof CheckpointError) throw new CheckpointError(`damaged checkpoint: ${err.message.replace(/ \(checkpoint: .*\)$/, '')}`, checkpoint);
    throw err;
  }
  // Loads (and checks) the trainer and optimizer state now, so a missing piece is refused before any write.
  await readTrainerState(checkpoint);
  const rsPath = path.join(checkpoint, RUN_STATE_FILE);
  if (!existsSync(rsPath)) throw new CheckpointError(`missing ${RUN_STATE_FILE} (step counters)`, checkpoint);
  const rs = JSON.parse(await fs.readFile(rsPath, 'utf8')) as { step?: unknown; metrics_rows?: unknown; elapsed_s?: unknown; tokens?: unknown };
  if (typeof rs.step !== 'number' || typeof rs.metrics_rows !== 'number') throw new CheckpointError(`${RUN_STATE_FILE} lacks step / metrics_rows`, checkpoint);
  for (let i = 0; i < 64; i++) {
    const agentDir = path.join(checkpoint, `agent_${i}`);
    if (!existsSync(agentDir)) break;
    // LoRA checkpoints hold PEFT adapters (the base comes from the config's model paths).
    const weights = config.model.lora ? ['adapter_config.json', 'adapter_model.safetensors'] : ['config.json', 'model.safetensors'];
    for (const f of [...weights, 'tokenizer.json']) {
      if (!existsSync(path.join(agentDir, f))) throw new CheckpointError(`agent_${i} lacks ${f}`, checkpoint);
    }
  }
  return {
    runDir,
    checkpoint,
    step: rs.step,
    metricsRows: rs.metrics_rows,
    elapsedS: typeof rs.elapsed_s === 'number' ? rs.elapsed_s : 0,
    tokens: typeof rs.tokens === 'number' ? rs.tokens : 0,
  };
}

function stripIdentity(doc: Record<string, unknown>): Record<string, unknown> {
  const out = { ...doc };
  delete out.output;
  delete out.backend;
  delete out.memory;
  return out;
}

function timestamp(): string {
  const d = new Date();
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}${p(d.getMonth() + 1)}${p(d.getDate())}-${p(d.getHours())}${p(d.getMinutes())}${p(d.getSeconds())}`;
}

/** The run directory of a config: `output.dir`, else `runs/<task>-<trainer>-<timestamp>`. */
export function defaultRunDir(config: RunConfig): string {
  return path.resolve(config.output.dir ?? path.join('runs', `${config.dataset.task}-${config.trainer}-${timestamp()}`));
}

/** The first line of the config.yaml a run writes (it tells a run's config from a user's own file). */
const RUN_CONFIG_HEADER = '# comlrl run config (resolved';

async function isNonEmptyRun(dir: string): Promise<boolean> {
  for (const f of [RUN_FILES.metrics, RUN_FILES.run, RUN_FILES.checkpoints, RUN_FILES.final]) if (existsSync(path.join(dir, f))) return true;
  // A run killed right after writing its config.yaml.
  const cfg = runDirConfigFile(dir);
  return existsSync(cfg) && (await fs.readFile(cfg, 'utf8').catch(() => '')).startsWith(RUN_CONFIG_HEADER);
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

/**
 * The final results of a finished run (eval.json's after-training eval when one is configured,
 * final/ when the config saves it), or null when any is missing and the run still has work.
 */
async function finishedRun(
  runDir: string,
  config: RunConfig,
  at: { totalSteps: number; checkpointAtEnd: boolean; hash: string },
): Promise<{ before?: EvalSummary; after?: EvalSummary; finalDir?: string } | null> {
  const finalDir = path.join(runDir, RUN_FILES.final);
  if (config.output.save_final_model) {
    // Complete only when final/ verifies (manifest, sizes, SHA-256) and was written at the last step.
    try {
      const manifest = await verifyCheckpoint(finalDir, { configHash: at.hash });
      if (manifest.step !== at.totalSteps) return null;
    } catch {
      return null;
    }
  } else if (!at.checkpointAtEnd) {
    return null;
  }
  const evalPath = path.join(runDir, RUN_FILES.eval);
  const record = await readRunJson<{ before: EvalSummary; after: EvalSummary }>(evalPath, () => {});
  if (config.output.eval_before_after && record.after === undefined && record.before !== undefined) return null;
  return {
    ...(record.before ? { before: record.before } : {}),
    ...(record.after ? { after: record.after } : {}),
    ...(config.output.save_final_model ? { finalDir } : {}),
  };
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
    const heap = r.wasmHeapBytes ? ` · wasm heap ${formatBytes(r.wasmHeapBytes)} (its high-water mark)` : '';
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
