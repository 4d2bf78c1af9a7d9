/**
 * `comlrl eval`: a task's paper metric on its eval split, for the base models of a config or for
 * trained agents (a run's final/ or a checkpoint).
 */
import { existsSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { activeBackend, initBackend } from '../../src/backend/init.js';
import { memorySettingsOf } from '../../src/config/schema.js';
import { inMemoryCrashWords } from '../../src/memory/errors.js';
import { budgetBytes } from '../../src/memory/settings.js';
import { CheckpointError, listCheckpoints, MANIFEST_FILE, verifyCheckpoint, writeFileAtomically } from '../../src/checkpoint/atomic.js';
import { ProgressBar } from '../../src/logging/progress.js';
import { handleInterrupts, yieldToEventLoop } from '../interrupt.js';
import { testPauseBlocking } from '../test-pause.js';
import { formatNumber } from '../../src/logging/format.js';
import { rngFor } from '../../src/util/rng.js';
import { runEvalEpisodes } from '../../trainers/core/eval.js';
import { agentDir } from '../../trainers/core/save.js';
import { generationSettingsOf } from '../../trainers/core/trainer.js';
import { agentSampling } from '../../trainers/core/generation.js';
import { describeSampling } from '../../src/sampling/defaults.js';
import { getTrainer } from '../../trainers/registry.js';
import { commandArgs, formatUsage, intOpt, listOpt, stringOpt, UsageError, type OptionSpec } from '../args.js';
import type { CommandContext } from '../context.js';
import { outputFileProblem } from '../paths.js';
import { RUN_FILES } from '../run.js';
import { episodeReward, setupTask, splitOf, splitOverlapWarning, type AnyEpisode, type TaskSetup } from '../tasks.js';
import { agentDirsFromConfig, loadAgents, numAgentsOf } from '../trainer.js';
import { loadConfig, type RunConfig } from '../schemas.js';
import type { Agent } from '../../src/decpomdp/agent.js';
import { getTask, registeredTasks } from '../../src/tasks/registry.js';

const OPTIONS: readonly OptionSpec[] = [
  { name: 'config', short: 'c', kind: 'string', value: 'FILE', help: "run config (a run directory's config.yaml works); its model paths are the base models" },
  { name: 'set', kind: 'string', value: 'KEY=VALUE', repeat: true, help: 'override a config key' },
  { name: 'checkpoint', kind: 'string', value: 'DIR', help: 'evaluate trained agents: a run directory (final/ or newest checkpoint), final/ or a checkpoint' },
  { name: 'samples', kind: 'string', value: 'N', help: 'episodes sampled per eval item (default 10 for coophe, for pass@10; else 1)' },
  { name: 'k', kind: 'string', value: 'LIST', help: 'pass@k values, comma-separated (default 1,3,5,10)' },
  { name: 'limit', kind: 'string', value: 'N', help: 'evaluate only the first N eval items' },
  { name: 'greedy', kind: 'flag', help: 'argmax decoding (one sample per item)' },
  { name: 'out', kind: 'string', value: 'FILE', help: 'also write the metrics as JSON here' },
];

export const EVAL_USAGE = formatUsage(
  'comlrl eval --config FILE.yaml [--checkpoint DIR] [--samples N] [--k 1,3,5,10] [--limit N] [--greedy] [--out FILE]',
  [
    "Plays the task's eval split (dataset.eval_split) with the agents and prints the paper metrics:",
    ...registeredTasks().map((t) => `  ${t.name.padEnd(11)} ${t.metricsSummary}`),
    'Sampling follows the trainer section (temperature, top_p, top_k, max_new_tokens, num_turns).',
    'Without --checkpoint the base models of the config are evaluated.',
  ].join('\n'),
  OPTIONS,
);

/**
 * The agent directories of a trained run, checkpoint or final/ folder. A run directory gives its
 * final/ (when that verifies) or else its newest checkpoint, with a note on stderr.
 */
export async function trainedAgentsRoot(dir: string, note: (line: string) => void = () => {}): Promise<string> {
  const abs = path.resolve(dir);
  if (existsSync(agentDir(abs, 0))) return abs;
  const final = path.join(abs, RUN_FILES.final);
  const ckpts = await listCheckpoints(path.join(abs, RUN_FILES.checkpoints));
  if (existsSync(final)) {
    try {
      await verifyCheckpoint(final);
      return final;
    } catch (err) {
      // A final/ without a manifest or with a damaged file is never evaluated as the trained models.
      const why = err instanceof CheckpointError ? err.message : String(err);
      if (ckpts.length === 0) throw new Error(`--checkpoint ${dir}: final/ is incomplete or damaged (${why}); rebuild it with npx comlrl train --resume ${dir}`);
      note(`[comlrl eval] warning: final/ is incomplete or damaged (${why}); evaluating the newest checkpoint ${ckpts[0]} instead (npx comlrl train --resume ${dir} rebuilds final/)`);
      return ckpts[0];
    }
  }
  if (ckpts.length > 0) {
    note(`[comlrl eval] ${dir} has no final/ (the run has not finished): evaluating its newest checkpoint ${path.basename(ckpts[0])}`);
    return ckpts[0];
  }
  throw new Error(`--checkpoint ${dir}: no agent_0/ there, no final/ and no checkpoints/ (expected a run directory, its final/ or a checkpoint)`);
}

/** `comlrl eval`. */
/** What `comlrl eval` was asked for, read from its arguments and config. */
interface EvalRequest {
  readonly config: RunConfig;
  readonly ks: number[];
  readonly greedy: boolean;
  /** Episodes per eval item. */
  readonly samples: number;
  readonly limit: number | undefined;
  readonly out: string | undefined;
  readonly checkpoint: string | undefined;
}

/** Parses and checks the arguments (a bad --out is refused before any work); null after --help. */
function evalRequest(argv: readonly string[], ctx: CommandContext): EvalRequest | null {
  const args = commandArgs(argv, OPTIONS, 'eval', EVAL_USAGE, ctx.out);
  if (args === null) return null;
  const configFile = stringOpt(args, 'config');
  if (configFile === undefined) throw new UsageError('--config FILE is required', 'eval');
  const config = loadConfig(configFile, listOpt(args, 'set'));
  const ks = (stringOpt(args, 'k') ?? '1,3,5,10').split(',').map((s) => {
    const k = Number(s.trim());
    if (!Number.isInteger(k) || k < 1) throw new UsageError(`--k must list integers >= 1, got '${s}'`, 'eval');
    return k;
  });
  const greedy = args.flags.has('greedy');
  const asked = intOpt(args, 'samples', 'eval', 1) ?? getTask(config.dataset.task).defaultEvalSamples?.(ks) ?? 1;
  const limit = intOpt(args, 'limit', 'eval', 1);
  const out = stringOpt(args, 'out');
  const outProblem = out !== undefined ? outputFileProblem(out, '--out') : undefined;
  if (outProblem !== undefined) throw new UsageError(outProblem, 'eval');
  return { config, ks, greedy, samples: greedy ? 1 : asked, limit, out, checkpoint: stringOpt(args, 'checkpoint') };
}

/**
 * The agent directories to evaluate: a trained run's (where its trainer's layout put them, the
 * weights verified against the manifest first) or the config's base models; and the trained root.
 */
async function evalAgentDirs(request: EvalRequest, numAgents: number, note: (line: string) => void): Promise<{ dirs: string[]; root: string | undefined }> {
  const { config, checkpoint } = request;
  if (checkpoint === undefined) return { dirs: agentDirsFromConfig(config, numAgents), root: undefined };
  const root = await trainedAgentsRoot(checkpoint, note);
  if (existsSync(path.join(root, MANIFEST_FILE))) await verifyCheckpoint(root);
  else if (path.basename(root) === RUN_FILES.final) {
    throw new Error(`--checkpoint ${checkpoint}: ${root} has no ${MANIFEST_FILE}: it is incomplete (cut short while being written); npx comlrl train --resume ${path.dirname(root)} rebuilds it`);
  }
  return { dirs: [...getTrainer(config.trainer).layout(config.trainerConfig, root, numAgents).agents], root };
}

/**
 * Plays `repeated` batch by batch (one shared RNG, so the episodes are those of a single call):
 * progress between batches, and a Ctrl-C acted on at the next batch (null: interrupted).
 */
async function playEvalBatches(request: EvalRequest, task: TaskSetup, agents: readonly Agent[], repeated: readonly unknown[], ctx: CommandContext): Promise<AnyEpisode[] | null> {
  const { config, greedy } = request;
  const tc = config.trainerConfig;
  const batchSize = tc.eval_batch_size;
  const rng = rngFor(config.seed, 'eval');
  const episodes: AnyEpisode[] = [];
  if (!greedy) {
    // `top_k: null` takes each agent's checkpoint value: say what sampling runs.
    for (const [i, agent] of agents.entries()) ctx.err(`[comlrl eval] agent ${i} samples with ${describeSampling(agentSampling(agent, generationSettingsOf(tc)))}`);
  }
  const bar = new ProgressBar({ total: repeated.length, label: 'eval', ...(ctx.progress ? { stream: ctx.progress } : {}) });
  const interrupts = handleInterrupts(ctx.err, 'stopping after the current batch of episodes; no metrics are written');
  try {
    for (let b = 0; b < repeated.length; b += batchSize) {
      const eps = await runEvalEpisodes<unknown, unknown>({
        agents,
        env: task.env,
        tasks: repeated.slice(b, b + batchSize),
        numTurns: tc.num_turns,
        batchSize,
        settings: { ...generationSettingsOf(tc), greedy },
        rng,
        discount: tc.discount,
        // As the trainer's own evaluation ends its episodes (the trainer registry says how).
        earlyTerminationThreshold: getTrainer(config.trainer).evalEarlyTermination(tc),
      });
      episodes.push(...eps);
      bar.update(episodes.length, { reward: episodes.reduce((s, e) => s + episodeReward(e), 0) / episodes.length });
      testPauseBlocking('eval-batch', episodes.length);
      await yieldToEventLoop();
      if (interrupts.signal.aborted && episodes.length < repeated.length) {
        bar.finish();
        ctx.err(`[comlrl eval] interrupted after ${episodes.length} of ${repeated.length} episodes; nothing written (run it again to evaluate)`);
        return null;
      }
    }
    return episodes;
  } finally {
    bar.finish();
    interrupts.dispose();
  }
}

export async function evalCommand(argv: readonly string[], ctx: CommandContext): Promise<number> {
  const request = evalRequest(argv, ctx);
  if (request === null) return 0;
  const { config, samples, limit, out } = request;
  const taskName = config.dataset.task;
  const backend = await initBackend(config.backend);
  // As the trainer's agents play the task (CentralizedMAGRPO: one joint agent through the task's adapter).
  const setup = await setupTask(config);
  const task = { ...setup, ...getTrainer(config.trainer).playTask(config.trainerConfig, setup) };
  try {
    const { dirs, root } = await evalAgentDirs(request, numAgentsOf(config, task.env.numAgents), ctx.err);
    const agents = await loadAgents(config, dirs);
    try {
      const items = limit !== undefined ? task.evalTasks.slice(0, limit) : task.evalTasks;
      if (items.length === 0) {
        const s = splitOf(config, 'eval');
        throw new Error(`the eval split is empty: ${s.key} '${s.spec}' selects no rows from ${s.from}`);
      }
      const overlap = splitOverlapWarning(config, task);
      if (overlap !== undefined) ctx.err(`[comlrl eval] ${overlap}`);
      const repeated = items.flatMap((it) => Array.from({ length: samples }, () => it));
      ctx.err(`[comlrl eval] ${taskName}: ${items.length} eval items × ${samples} sample(s), ${config.trainerConfig.num_turns} turn(s), ${root ? `trained agents ${root}` : 'base models'} · backend ${backend}`);
      const t0 = performance.now();
      const episodes = await playEvalBatches(request, task, agents, repeated, ctx);
      if (episodes === null) return 130;
      const grouped: AnyEpisode[][] = items.map((_, j) => episodes.slice(j * samples, (j + 1) * samples));
      const metrics: Record<string, number> = {
        ...task.paperMetrics(grouped, request.ks),
        episode_reward_mean: episodes.reduce((s, e) => s + episodeReward(e), 0) / episodes.length,
        eval_items: items.length,
        samples_per_item: samples,
        seconds: (performance.now() - t0) / 1000,
      };
      for (const [k, v] of Object.entries(metrics)) ctx.out(`${k.padEnd(32)} ${formatNumber(v)}`);
      if (out !== undefined) {
        const report = { task: taskName, models: root ?? 'base', agents: dirs, backend, greedy: request.greedy, metrics };
        await fs.mkdir(path.dirname(path.resolve(out)), { recursive: true });
        await writeFileAtomically(out, `${JSON.stringify(report, null, 2)}\n`);
        ctx.err(`[comlrl eval] wrote ${out}`);
      }
      return 0;
    } finally {
      for (const a of agents) a.model.dispose();
    }
  } catch (err) {
    throw inMemoryCrashWords(err, activeBackend(), budgetBytes(memorySettingsOf(config.memory)));
  } finally {
    await task.close();
  }
}
