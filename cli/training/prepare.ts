/**
 * The first part of a training run, in a claimed run directory (./claim.ts): build the task and
 * the trainer (from the config's models or a checkpoint) and check the prompts against the
 * agents' context before anything is written, say whether a resumed run has nothing left to do,
 * then open the run directory (config.yaml, run.json, metrics.jsonl and its run/* header row).
 */
import { existsSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { stringify as yamlStringify } from 'yaml';
import { initBackend, type BackendName } from '../../src/backend/init.js';
import { CheckpointError, cleanInterruptedWrites, writeFileAtomically } from '../../src/checkpoint/atomic.js';
import { restoreTrainerState } from '../../trainers/core/checkpoint.js';
import { agentSampling } from '../../trainers/core/generation.js';
import { generationSettingsOf } from '../../trainers/core/trainer.js';
import { describeSampling } from '../../src/sampling/defaults.js';
import { runConfigToDocument } from '../../src/config/schema.js';
import { peakMemory } from '../../src/logging/memory.js';
import { MetricsLogger, readMetrics } from '../../src/logging/metrics.js';
import { TensorBoardWriter } from '../../src/logging/tensorboard.js';
import { displayPath } from '../display-path.js';
import type { RunConfig } from '../schemas.js';
import { setupTask, splitOf, splitOverlapWarning, type TaskSetup } from '../tasks.js';
import { buildTrainer, checkRunDevices, cursorStep, numAgentsOf, sourcesFromCheckpoint, sourcesFromConfig, TokenCounter, type TrainerHandle } from '../trainer.js';
import { readRunJson } from './evaluation.js';
import { RunMetrics } from './metrics.js';
import { recordModels, type ModelRecord } from './models.js';
import { checkPromptsFit } from './prompt-fit.js';
import { finishedRun, type ResumePoint } from './resume.js';
import { RUN_CONFIG_HEADER, RUN_FILES, runConfigHash, runDirConfigFile } from './run-dir.js';
import type { RunOptions, RunResult } from './types.js';

/** A run with its task and trainer built (see {@link buildRun}). */
export interface PreparedRun {
  readonly config: RunConfig;
  readonly runDir: string;
  readonly resume: ResumePoint | undefined;
  /** A run directory without a checkpoint, started again from step 0. */
  readonly restart: boolean;
  readonly hash: string;
  /** The run's models by content (see ./models.ts): recorded in each checkpoint. */
  readonly models: ModelRecord;
  readonly backend: BackendName;
  readonly task: TaskSetup;
  readonly trainer: TrainerHandle;
  readonly counter: TokenCounter;
  readonly metrics: RunMetrics;
  readonly totalSteps: number;
  /** The step this session starts at (a resumed run's checkpoint step, else 0). */
  readonly startStep: number;
  /** `performance.now()` when this session began. */
  readonly t0: number;
  /** Training seconds and generated tokens of the sessions before this one (a resume). */
  readonly elapsedBefore: number;
  readonly tokensBefore: number;
  readonly log: (line: string) => void;
  /** Frees the trainer and the task. */
  close(): Promise<void>;
}

/**
 * Initialises the backend and builds the task and the trainer (a resumed one with its saved
 * state) for the run directory `runDir` (claimed: ./claim.ts), writing nothing. Throws on a
 * refused resume.
 */
export async function buildRun(options: RunOptions, runDir: string, log: (line: string) => void): Promise<PreparedRun> {
  const { config } = options;
  const t0 = performance.now();
  const resume = options.resume;
  const restart = options.restartIn !== undefined && !resume;
  // A resume keeps the hash of the model paths the run started with (the models may have moved).
  const hash = resume ? resume.configHash : runConfigHash(config);
  const backend = await initBackend(config.backend);

  const task = await setupRunTask(config, log);
  const counter = new TokenCounter();
  const metrics = new RunMetrics(counter, config.output.verbose ? log : null);
  let trainer: TrainerHandle;
  try {
    const numAgents = numAgentsOf(config, task.env.numAgents);
    checkRunDevices(config, numAgents);
    const sources = resume ? sourcesFromCheckpoint(config, resume.checkpoint, numAgents) : sourcesFromConfig(config, numAgents);
    trainer = await buildTrainer(config, task, sources, metrics, counter);
    if (resume) await restoreTrainerState(trainer.trainer, resume.checkpoint);
  } catch (err) {
    await task.close();
    throw err;
  }
  const built = trainer;
  const close = async (): Promise<void> => {
    built.dispose();
    await task.close();
  };
  try {
    // Prompts beyond an agent's context are refused now, naming the row, before anything is written.
    checkPromptsFit(config, task, trainer.agents, evaluates(config));
    const totalSteps = trainer.itemsPerEpoch * trainer.epochs;
    const startStep = cursorStep(trainer.cursor, trainer.itemsPerEpoch);
    if (resume && startStep !== resume.step) {
      throw new CheckpointError(`run_state.json says step ${resume.step} but the trainer state's cursor is at step ${startStep}`, resume.checkpoint);
    }
    // Read once the models have loaded (a missing folder is named by the loader first).
    const models = resume ? resume.models : await recordModels(config);
    return { config, runDir, resume, restart, hash, models, backend, task, trainer, counter, metrics, totalSteps, startStep, t0, elapsedBefore: resume?.elapsedS ?? 0, tokensBefore: resume?.tokens ?? 0, log, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * The result of a resumed (or restarted) run that already finished: its verified final/ is at the
 * last step, or its last checkpoint is, and its final results were written. It says so and
 * leaves the run directory as it is; null when there is work left (an incomplete or damaged
 * final/ is rebuilt, which it announces).
 */
export async function alreadyComplete(run: PreparedRun): Promise<RunResult | null> {
  const { config, resume, restart, runDir, totalSteps, startStep, log } = run;
  if (!resume && !restart) return null;
  const done = await finishedRun(runDir, config, { totalSteps, checkpointAtEnd: resume !== undefined && startStep >= totalSteps, hash: run.hash });
  if (done !== null) {
    log(`[comlrl] the run in ${displayPath(runDir)} is already complete (step ${totalSteps}/${totalSteps}); nothing to resume`);
    return { runDir, step: totalSteps, totalSteps, completed: true, ...done, checkpoints: [], plots: [], configHash: run.hash, backend: run.backend, seconds: resume?.elapsedS ?? 0, tokensPerSecond: 0, peakRssBytes: peakMemory().peakRssBytes };
  }
  if (resume && startStep >= totalSteps && config.output.save_final_model) log(`[comlrl] final/ of ${displayPath(runDir)} is missing or incomplete: rebuilding it from ${displayPath(resume.checkpoint)}`);
  if (restart) log(`[comlrl] ${displayPath(runDir)} has no checkpoint yet (the run stopped before its first one): starting it again from step 0`);
  return null;
}

/**
 * Opens the run directory for this session: config.yaml and run.json, metrics.jsonl (a resumed
 * run's cut back to its checkpoint) with the run/* header row, the TensorBoard event file when
 * logging.tensorboard is on (made to match metrics.jsonl), and the opening console lines.
 */
export async function openRun(run: PreparedRun): Promise<void> {
  const { config, runDir, resume, hash, backend, trainer, metrics, totalSteps, startStep: step, log } = run;
  await prepareRunDir(runDir, config, { resume, restart: run.restart, hash, backend, step, totalSteps, log });
  run.counter.total = run.tokensBefore;
  metrics.open(await openMetricsLog(runDir, resume), run.tokensBefore, step);
  if (config.logging.tensorboard) {
    // The event file is made to hold what metrics.jsonl now holds, then follows it row by row.
    const tb = TensorBoardWriter.open(path.join(runDir, RUN_FILES.tensorboard), { rows: metrics.rows() });
    metrics.mirrorTo((row) => tb.writeRow(row));
  }
  // What each agent samples with: `top_k: null` is filled from its checkpoint, so it is recorded.
  const sampling = trainer.agents.map((agent) => agentSampling(agent, generationSettingsOf(config.trainerConfig)));
  metrics.write(trainer.envSteps, {
    'run/backend': backend,
    'run/seed': config.seed,
    'run/config_hash': hash,
    'run/trainer': config.trainer,
    'run/task': config.dataset.task,
    'run/step': step,
    'run/resumed': resume ? 1 : 0,
    ...Object.fromEntries(
      sampling.flatMap((s, i) => [
        [`run/sampling/agent_${i}/temperature`, s.temperature],
        [`run/sampling/agent_${i}/top_p`, s.topP],
        [`run/sampling/agent_${i}/top_k`, s.topK],
      ]),
    ),
  });
  log(`[comlrl] ${resume ? `resuming ${displayPath(resume.checkpoint)} at step ${step}/${totalSteps}` : `training ${config.trainer} on ${config.dataset.task}: ${totalSteps} steps (${trainer.epochs} epochs × ${trainer.itemsPerEpoch} items)`} · backend ${backend} · seed ${config.seed} · config ${hash}`);
  for (const [i, s] of sampling.entries()) log(`[comlrl] agent ${i} samples with ${describeSampling(s)}`);
  log(`[comlrl] run directory: ${runDir}`);
}

/** Whether the run's config asks for evaluations (before and after training, or every `eval_interval` items). */
function evaluates(config: RunConfig): boolean {
  return config.trainerConfig.eval_num_samples > 0 && (config.output.eval_before_after || config.trainerConfig.eval_interval > 0);
}

/** The run's task, with its splits checked: no train rows is an error, no eval rows a warning. */
async function setupRunTask(config: RunConfig, log: (line: string) => void): Promise<TaskSetup> {
  const task = await setupTask(config);
  if (task.trainTasks.length === 0) {
    await task.close();
    const s = splitOf(config, 'train');
    throw new Error(`${s.key} '${s.spec}' selects no rows from ${s.from}`);
  }
  const evalConfigured = evaluates(config);
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
  o: { resume: ResumePoint | undefined; restart: boolean; hash: string; backend: BackendName; step: number; totalSteps: number; log: (line: string) => void },
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
