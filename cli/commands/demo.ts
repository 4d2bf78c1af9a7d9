/**
 * `comlrl demo`: two tiny agents learn a collaborative word game end to end, through the same
 * config, trainer, environment, reward, checkpoint and logging code as `comlrl train`.
 *
 * The task (envs/toy): both agents see a cue word (`cue red`) and score 0.25 each for answering
 * with one of the cue's two words, plus 0.5 when they both say the same one; 1 means they agreed.
 * Random agents score about 0.07; the demo reports the evaluated reward before and after.
 */
import { existsSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { toyWords } from '../../envs/toy/task.js';
import { activeBackend, BACKEND_CHOICES, type BackendChoice } from '../../src/backend/init.js';
import { stableStringify } from '../../src/config/hash.js';
import { memorySettingsOf, parseRunConfig, TRAINER_NAMES, type TrainerName } from '../../src/config/schema.js';
import { formatNumber, formatDuration } from '../../src/logging/format.js';
import { inMemoryCrashWords } from '../../src/memory/errors.js';
import { budgetBytes } from '../../src/memory/settings.js';
import { createTinyModel } from '../../src/model/tiny.js';
import { commandArgs, formatUsage, intOpt, stringOpt, UsageError, type OptionSpec } from '../args.js';
import type { CommandContext } from '../context.js';
import { handleInterrupts } from '../interrupt.js';
import { displayPath, runTraining, type RunResult } from '../run.js';
import { resumeCommandFor } from '../training/run-dir.js';
import { TRAINER_CONFIG_SCHEMAS } from '../schemas.js';
import type { CoLLMCCConfigInput, CoLLMDCConfigInput } from '../../trainers/collm/config.js';
import type { MAGRPOConfigInput } from '../../trainers/magrpo/config.js';

const OPTIONS: readonly OptionSpec[] = [
  { name: 'trainer', kind: 'string', value: 'magrpo|collm-dc|collm-cc', help: 'which trainer learns (default magrpo)' },
  { name: 'steps', kind: 'string', value: 'N', help: 'training items (rounded to whole epochs of 16 above 16; default per trainer)' },
  { name: 'seed', kind: 'string', value: 'N', help: 'run seed (default 0)' },
  { name: 'out', kind: 'string', value: 'DIR', help: 'run directory (default runs/demo-<trainer>-<time>)' },
  { name: 'cache', kind: 'string', value: 'DIR', help: 'where the tiny checkpoints are cached (default $COMLRL_CACHE or .cache/comlrl)' },
  { name: 'backend', kind: 'string', value: 'NAME', help: `tensor backend (${BACKEND_CHOICES.join(', ')}; default $COMLRL_BACKEND or auto)` },
];

export const DEMO_USAGE = formatUsage(
  'comlrl demo [--trainer magrpo|collm-dc|collm-cc] [--steps N] [--seed N] [--out DIR]',
  [
    'Trains two tiny agents to agree on an answer in a toy collaboration game, end to end: tiny',
    'Hugging Face checkpoints (made once and cached), the real trainer, environment and reward,',
    'a progress bar, evaluation before and after, and a run directory with config.yaml,',
    'metrics.jsonl, plots, checkpoints and the final models. Needs nothing but `npm install`.',
    'Ctrl-C stops at the next item with a checkpoint (exit 130); `npx comlrl train --resume DIR` continues it.',
  ].join('\n'),
  OPTIONS,
);

/** CoLLM-DC and CoLLM-CC share their demo settings: the trainers differ in critic layout only. */
const ACTOR_CRITIC_DEMO = {
  steps: 320,
  config: {
    num_turns: 1,
    num_generations: 8,
    max_new_tokens: 2,
    agent_learning_rate: 3e-3,
    critic_learning_rate: 1e-3,
    rollout_buffer_size: 16,
    early_termination_threshold: null,
  },
};

/** Per-trainer demo settings (tuned on 2 CPU cores; see docs/cli.md for the measured times). */
/** A trainer's demo settings: its config section name, steps and trainer config. */
interface DemoTrainer<Config> {
  readonly section: string;
  readonly steps: number;
  readonly config: Readonly<Config>;
}

const DEMO_TRAINERS: { readonly magrpo: DemoTrainer<MAGRPOConfigInput>; readonly 'collm-dc': DemoTrainer<CoLLMDCConfigInput>; readonly 'collm-cc': DemoTrainer<CoLLMCCConfigInput> } = {
  magrpo: {
    section: 'magrpo',
    steps: 320,
    config: {
      num_turns: 1,
      num_generations: 8,
      max_new_tokens: 2,
      agent_learning_rate: 3e-3,
      rollout_buffer_size: 2,
      early_termination_threshold: null,
    },
  },
  'collm-dc': { section: 'collm_dc', ...ACTOR_CRITIC_DEMO },
  'collm-cc': { section: 'collm_cc', ...ACTOR_CRITIC_DEMO },
};

/** Sizes of the demo's tiny checkpoints. */
const DEMO_MODEL = { arch: 'qwen3' as const, hiddenSize: 32, numLayers: 1, numHeads: 4, tokenizer: 'word' as const };

/** The cache root: `--cache`, else `$COMLRL_CACHE`, else `.cache/comlrl` under the working directory. */
export function cacheRoot(option?: string): string {
  return path.resolve(option ?? process.env.COMLRL_CACHE ?? path.join('.cache', 'comlrl'));
}

/**
 * Writes (once) a tiny checkpoint for the demo under `root/demo/<name>`; a complete one is reused.
 * Written into a temporary directory and renamed, so an interrupted write is never reused.
 */
export async function cachedTinyModel(root: string, name: string, seed: number): Promise<string> {
  const spec = { ...DEMO_MODEL, seed, words: [...toyWords], version: 1 };
  const dir = path.join(root, 'demo', name);
  const marker = path.join(dir, 'comlrl-demo.json');
  if (existsSync(marker)) {
    try {
      if (stableStringify(JSON.parse(await fs.readFile(marker, 'utf8'))) === stableStringify(spec)) return dir;
    } catch {
      // Unreadable marker: rebuild below.
    }
  }
  const tmp = `${dir}.tmp-${process.pid}`;
  await fs.rm(tmp, { recursive: true, force: true });
  await createTinyModel({ dir: tmp, arch: spec.arch, seed, tokenizer: spec.tokenizer, words: spec.words, hiddenSize: spec.hiddenSize, numLayers: spec.numLayers, numHeads: spec.numHeads });
  await fs.writeFile(path.join(tmp, 'comlrl-demo.json'), `${JSON.stringify(spec, null, 2)}\n`);
  await fs.rm(dir, { recursive: true, force: true });
  await fs.mkdir(path.dirname(dir), { recursive: true });
  await fs.rename(tmp, dir);
  return dir;
}

/** The run-config document of a demo run. */
export async function demoConfigDocument(opts: { trainer: TrainerName; steps?: number; seed: number; out: string; cache: string; backend?: BackendChoice }): Promise<Record<string, unknown>> {
  const d = DEMO_TRAINERS[opts.trainer];
  const steps = opts.steps ?? d.steps;
  // 16 training items per epoch; short runs use a prefix of one epoch.
  const epochs = steps <= 16 ? 1 : Math.max(1, Math.round(steps / 16));
  const items = steps <= 16 ? steps : 16;
  const agents = [await cachedTinyModel(opts.cache, 'agent-a', 1), await cachedTinyModel(opts.cache, 'agent-b', 2)];
  const model: Record<string, unknown> = { agents, use_chat_template: false, temperature: 1, top_p: 1, top_k: null };
  if (opts.trainer === 'collm-dc') model.critics = [await cachedTinyModel(opts.cache, 'critic-a', 5), await cachedTinyModel(opts.cache, 'critic-b', 6)];
  if (opts.trainer === 'collm-cc') model.critics = [await cachedTinyModel(opts.cache, 'critic-a', 5)];
  const total = epochs * items;
  return {
    model,
    dataset: { task: 'toy-coord', ...(items < 16 ? { train_split: `[:${items}]` } : {}) },
    [d.section]: {
      ...d.config,
      num_train_epochs: epochs,
      logging_steps: 1,
      // An evaluation every epoch (16 episodes) draws the learning curve in the plots.
      eval_interval: 16,
      eval_num_samples: 16,
      eval_batch_size: 16,
    },
    output: { dir: opts.out, save_steps: Math.max(1, Math.floor(total / 2)), save_final_model: true, plots: true },
    seed: opts.seed,
    ...(opts.backend ? { backend: opts.backend } : {}),
  };
}

const isTrainerName = (s: string): s is TrainerName => TRAINER_NAMES.some((t) => t === s);
const isBackendChoice = (s: string): s is BackendChoice => BACKEND_CHOICES.some((b) => b === s);

/** `comlrl demo`. */
export async function demoCommand(argv: readonly string[], ctx: CommandContext): Promise<number> {
  const args = commandArgs(argv, OPTIONS, 'demo', DEMO_USAGE, ctx.out);
  if (args === null) return 0;
  const trainer = stringOpt(args, 'trainer') ?? 'magrpo';
  if (!isTrainerName(trainer)) throw new UsageError(`--trainer must be one of ${TRAINER_NAMES.join(', ')}, got '${trainer}'`, 'demo');
  const backend = stringOpt(args, 'backend');
  if (backend !== undefined && !isBackendChoice(backend)) throw new UsageError(`--backend must be one of ${BACKEND_CHOICES.join(', ')}`, 'demo');
  const steps = intOpt(args, 'steps', 'demo', 1);
  const seed = intOpt(args, 'seed', 'demo', 0) ?? 0;
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  const out = path.resolve(stringOpt(args, 'out') ?? path.join('runs', `demo-${trainer}-${stamp}`));
  const t0 = performance.now();
  ctx.err(`[comlrl demo] two tiny agents learn to agree on an answer (toy-coord), trainer ${trainer}`);
  const doc = await demoConfigDocument({ trainer, ...(steps !== undefined ? { steps } : {}), seed, out, cache: cacheRoot(stringOpt(args, 'cache')), ...(backend ? { backend } : {}) });
  const config = parseRunConfig(doc, TRAINER_CONFIG_SCHEMAS, 'demo');
  // Ctrl-C / SIGTERM stop the demo like `train`: at the next item, with a checkpoint to resume from.
  const interrupts = handleInterrupts(ctx.err, 'stopping after the current item and writing a checkpoint', undefined, resumeCommandFor);
  try {
    const result = await runTraining({ config, log: ctx.err, label: `demo ${trainer}`, outOption: '--out', signal: interrupts.signal, ...(ctx.progress ? { progress: ctx.progress } : {}) });
    if (!result.completed) return 130;
    ctx.out(demoReport(result, (performance.now() - t0) / 1000));
    return 0;
  } catch (err) {
    throw inMemoryCrashWords(err, activeBackend(), budgetBytes(memorySettingsOf(config.memory)));
  } finally {
    interrupts.dispose();
  }
}

/** The demo's closing lines on stdout: the margin and where everything is. */
export function demoReport(r: RunResult, seconds: number): string {
  const rel = displayPath(r.runDir);
  const lines: string[] = [];
  if (r.before && r.after) {
    const margin = r.after.episodeReward - r.before.episodeReward;
    lines.push(
      `demo: evaluated reward ${formatNumber(r.before.episodeReward)} → ${formatNumber(r.after.episodeReward)} (margin ${margin >= 0 ? '+' : ''}${formatNumber(margin)}; 1 = the agents always agree, random ≈ 0.07) in ${formatDuration(seconds)}`,
    );
    if (margin <= 0) lines.push('demo: the reward did not rise this time; try more --steps or another --seed');
  }
  lines.push(`demo: run directory ${rel} (config.yaml, metrics.jsonl, rewards.png, losses.png, final/)`);
  lines.push(`demo: train it again with: npx comlrl train --config ${path.join(rel, 'config.yaml')} --set output.dir=${rel}-again`);
  return lines.join('\n');
}
