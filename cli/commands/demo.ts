/**
 * `comlrl demo`: two tiny agents learn a collaborative word game end to end, through the same
 * config, trainer, environment, reward, checkpoint and logging code as `comlrl train`.
 *
 * The task (envs/toy): both agents see a cue word (`cue red`) and score 0.25 each for answering
 * with one of the cue's two words, plus 0.5 when they both say the same one; 1 means they agreed.
 * Uniform random play scores 16/225 ≈ 0.071; the demo reports the evaluated reward before and after
 * and what the agents wrote for two fixed prompts before and after (demo-transcripts.ts).
 */
import { existsSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { toyRandomBaseline, toyWords } from '../../envs/toy/task.js';
import { activeBackend, BACKEND_CHOICES, type BackendChoice } from '../../src/backend/init.js';
import { stableStringify } from '../../src/config/hash.js';
import { memorySettingsOf, parseRunConfig } from '../../src/config/schema.js';
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
import { playFixedPrompts, transcriptTable } from './demo-transcripts.js';
import type { CentralizedMAGRPOConfigInput } from '../../trainers/centralized-magrpo/config.js';
import type { CoLLMCCConfigInput, CoLLMDCConfigInput } from '../../trainers/collm/config.js';
import type { MADPOConfigInput } from '../../trainers/madpo/config.js';
import type { MAGRPOConfigInput } from '../../trainers/magrpo/config.js';
import type { MARLHFConfigInput } from '../../trainers/marlhf/config.js';
import type { MAREINFORCEConfigInput, MAReMaxConfigInput, MARLOOConfigInput } from '../../trainers/reinforce/config.js';

/** A trainer's demo settings: its config section, default steps, trainer config, and the tiny models it loads. */
interface DemoTrainer<Config> {
  readonly section: string;
  readonly steps: number;
  readonly config: Readonly<Config>;
  /** Agent models: one per agent (2), or one joint policy (CentralizedMAGRPO). */
  readonly agents: 1 | 2;
  /** Critic LMs: one per agent (CoLLM-DC), one (CoLLM-CC's centralized critic, MARLHF's reward model) or none. */
  readonly critics: 0 | 1 | 2;
}

/** MAGRPO's demo config: 8 one- or two-word samples per agent and task, a short buffer. */
const MAGRPO_DEMO = {
  num_turns: 1,
  num_generations: 8,
  max_new_tokens: 2,
  agent_learning_rate: 3e-3,
  rollout_buffer_size: 2,
  early_termination_threshold: null,
} as const satisfies MAGRPOConfigInput;

/** CoLLM-DC and CoLLM-CC share their demo settings: the trainers differ in critic layout only. */
const ACTOR_CRITIC_DEMO = {
  num_turns: 1,
  num_generations: 8,
  max_new_tokens: 2,
  agent_learning_rate: 3e-3,
  critic_learning_rate: 1e-3,
  rollout_buffer_size: 16,
  early_termination_threshold: null,
} as const satisfies CoLLMDCConfigInput & CoLLMCCConfigInput;

/**
 * Every built-in trainer's demo (tuned on 2 CPU cores; docs/cli.md lists the measured times). The
 * keys are the trainer registry's names: test/docs.test.ts keeps them equal.
 */
const DEMO_TRAINERS: Readonly<Record<string, DemoTrainer<object>>> = {
  magrpo: { section: 'magrpo', steps: 320, config: MAGRPO_DEMO, agents: 2, critics: 0 } satisfies DemoTrainer<MAGRPOConfigInput>,
  'collm-dc': { section: 'collm_dc', steps: 320, config: ACTOR_CRITIC_DEMO, agents: 2, critics: 2 } satisfies DemoTrainer<CoLLMDCConfigInput>,
  'collm-cc': { section: 'collm_cc', steps: 320, config: ACTOR_CRITIC_DEMO, agents: 2, critics: 1 } satisfies DemoTrainer<CoLLMCCConfigInput>,
  // The REINFORCE family with its baselines and the default z-scored returns.
  mareinforce: { section: 'mareinforce', steps: 320, config: MAGRPO_DEMO, agents: 2, critics: 0 } satisfies DemoTrainer<MAREINFORCEConfigInput>,
  maremax: { section: 'maremax', steps: 320, config: MAGRPO_DEMO, agents: 2, critics: 0 } satisfies DemoTrainer<MAReMaxConfigInput>,
  marloo: { section: 'marloo', steps: 320, config: MAGRPO_DEMO, agents: 2, critics: 0 } satisfies DemoTrainer<MARLOOConfigInput>,
  // One joint policy answers for both roles (the toy task's centralized adapter).
  'centralized-magrpo': { section: 'centralized_magrpo', steps: 320, config: { ...MAGRPO_DEMO, num_agents: 2 }, agents: 1, critics: 0 } satisfies DemoTrainer<CentralizedMAGRPOConfigInput>,
  madpo: {
    section: 'madpo',
    steps: 320,
    // test/madpo-learning.test.ts's settings: one AdamW step per item on its 16 largest-gap pairs.
    config: { num_generations: 8, max_new_tokens: 2, agent_learning_rate: 3e-3, dpo_beta: 0.5, preference_pairs_per_sample: 16, rollout_buffer_size: 16, train_batch_size: 16 },
    agents: 2,
    critics: 0,
  } satisfies DemoTrainer<MADPOConfigInput>,
  // test/marlhf-learning.test.ts's settings: phase 1 fits the reward model on 32 random pairs of 32
  // one-word candidates per task (random agents rarely agree: fewer leave too few pairs to rank
  // by); phase 2 is MAGRPO on its score.
  marlhf: {
    section: 'marlhf',
    steps: 320,
    config: {
      ...MAGRPO_DEMO,
      max_new_tokens: 1,
      preference_num_candidates: 32,
      preference_pairs_per_sample: 32,
      pair_selection: 'random',
      reward_learning_rate: 3e-3,
      reward_num_train_epochs: 4,
      reward_train_batch_size: 16,
    },
    agents: 2,
    critics: 1,
  } satisfies DemoTrainer<MARLHFConfigInput>,
};

/** The trainers the demo runs, in the registry's order. */
export const DEMO_TRAINER_NAMES: readonly string[] = Object.keys(DEMO_TRAINERS);

const OPTIONS: readonly OptionSpec[] = [
  { name: 'trainer', kind: 'string', value: DEMO_TRAINER_NAMES.join('|'), help: 'which trainer learns (default magrpo)' },
  { name: 'steps', kind: 'string', value: 'N', help: 'training items (rounded to whole epochs of 16 above 16; default per trainer)' },
  { name: 'seed', kind: 'string', value: 'N', help: 'run seed (default 0)' },
  { name: 'out', kind: 'string', value: 'DIR', help: 'run directory (default runs/demo-<trainer>-<time>)' },
  { name: 'cache', kind: 'string', value: 'DIR', help: 'where the tiny checkpoints are cached (default $COMLRL_CACHE or .cache/comlrl)' },
  { name: 'backend', kind: 'string', value: 'NAME', help: `tensor backend (${BACKEND_CHOICES.join(', ')}; default $COMLRL_BACKEND or auto)` },
];

export const DEMO_USAGE = formatUsage(
  `comlrl demo [--trainer ${DEMO_TRAINER_NAMES.join('|')}] [--steps N] [--seed N] [--out DIR]`,
  [
    'Trains two tiny agents to agree on an answer in a toy collaboration game, end to end: tiny',
    'Hugging Face checkpoints (made once and cached), the real trainer, environment and reward,',
    'a progress bar, evaluation before and after, what the agents wrote for two prompts before',
    'and after, and a run directory with config.yaml, metrics.jsonl, plots.html (the curves),',
    'checkpoints and the final models. Needs nothing but `npm install`.',
    'Ctrl-C stops at the next item with a checkpoint (exit 130); `npx comlrl train --resume DIR` continues it.',
  ].join('\n'),
  OPTIONS,
);

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
export async function demoConfigDocument(opts: { trainer: string; steps?: number; seed: number; out: string; cache: string; backend?: BackendChoice }): Promise<Record<string, unknown>> {
  const d = demoTrainer(opts.trainer);
  const steps = opts.steps ?? d.steps;
  // 16 training items per epoch; short runs use a prefix of one epoch.
  const epochs = steps <= 16 ? 1 : Math.max(1, Math.round(steps / 16));
  const items = steps <= 16 ? steps : 16;
  const agents = [await cachedTinyModel(opts.cache, 'agent-a', 1)];
  if (d.agents === 2) agents.push(await cachedTinyModel(opts.cache, 'agent-b', 2));
  const model: Record<string, unknown> = { agents, use_chat_template: false, temperature: 1, top_p: 1, top_k: 0 };
  const critics = [];
  if (d.critics >= 1) critics.push(await cachedTinyModel(opts.cache, 'critic-a', 5));
  if (d.critics === 2) critics.push(await cachedTinyModel(opts.cache, 'critic-b', 6));
  if (critics.length > 0) model.critics = critics;
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

/** The demo settings of `name`. @throws UsageError naming the trainers the demo runs. */
function demoTrainer(name: string): DemoTrainer<object> {
  const d = Object.hasOwn(DEMO_TRAINERS, name) ? DEMO_TRAINERS[name] : undefined;
  if (d === undefined) throw new UsageError(`--trainer must be one of ${DEMO_TRAINER_NAMES.join(', ')}, got '${name}'`, 'demo');
  return d;
}
const isBackendChoice = (s: string): s is BackendChoice => BACKEND_CHOICES.some((b) => b === s);

/** `comlrl demo`. */
export async function demoCommand(argv: readonly string[], ctx: CommandContext): Promise<number> {
  const args = commandArgs(argv, OPTIONS, 'demo', DEMO_USAGE, ctx.out);
  if (args === null) return 0;
  const trainer = stringOpt(args, 'trainer') ?? 'magrpo';
  demoTrainer(trainer);
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
    const seconds = (performance.now() - t0) / 1000;
    // Played after training, both sides: the starting checkpoints are the cached ones, untouched.
    const before = await playFixedPrompts(config, { base: true });
    const after = await playFixedPrompts(config, { runDir: result.runDir });
    ctx.out(`demo: what the agents wrote for ${before.length} fixed prompts, greedy (an answer is its first word; reward 1 = both gave the same answer for the cue)`);
    ctx.out(transcriptTable(before, after, formatNumber));
    ctx.out(demoReport(result, seconds));
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
      `demo: evaluated reward ${formatNumber(r.before.episodeReward)} → ${formatNumber(r.after.episodeReward)} (margin ${margin >= 0 ? '+' : ''}${formatNumber(margin)}; 1 = the agents always agree, uniform random play ${formatNumber(toyRandomBaseline)}) in ${formatDuration(seconds)}`,
    );
    if (margin <= 0) lines.push('demo: the reward did not rise this time; try more --steps or another --seed');
  }
  lines.push(`demo: run directory ${rel} (plots.html: the curves; config.yaml, metrics.jsonl, final/)`);
  lines.push(`demo: train it again with: npx comlrl train --config ${path.join(rel, 'config.yaml')} --set output.dir=${rel}-again`);
  return lines.join('\n');
}
