/**
 * `npm run bench -- items`: seconds per training item, split into phases, for MAGRPO, CoLLM-DC and
 * CoLLM-CC with 2 LoRA agents (and, for CoLLM, LoRA critics) on one frozen base, each run with
 * `joint_passes: true` and `joint_passes: false` alternately for a few rounds in one process.
 *
 * The phases come from the trainers' own timers (the `time/*_s` figures each item logs):
 * generation; scoring (the rollout's behaviour log-probs plus the update's teacher-forced forward
 * passes); backward; optimizer (clipping and the AdamW step); reward (the env's rewards and
 * transitions); critic (CoLLM: value predictions and the critics' whole updates); other (the rest
 * of the item: row preparation, bookkeeping, logging). The split of the update into forward,
 * backward and optimizer is what `accumulateGradients` and `applyGradients` (trainers/core/loss.ts)
 * report; an update that bypassed them would land in `other`.
 *
 * Both modes train identical copies (same adapters, same seeds) on the same items, so they sample
 * the same tokens (joint passes change how rows are batched, not what is drawn).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { z } from 'zod';
import { activeBackend, torchBackend } from '../src/backend/index.js';
import { initBackend } from '../src/backend/init.js';
import type { CriticLM } from '../src/critic/value-model.js';
import type { Agent } from '../src/decpomdp/agent.js';
import type { GlobalInfo, LLMDecPOMDP, StepResult } from '../src/decpomdp/types.js';
import { loraSectionSchema, loraSettings } from '../src/model/lora/config.js';
import { loadCausalLM } from '../src/model/load.js';
import { createTinyModel, TINY_MODEL_PRESETS, type TinyModelOptions } from '../src/model/tiny.js';
import type { TfCausalLM } from '../src/model/index.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { writeTinyTokenizer } from '../src/tokenizer/tiny.js';
import { ToyCoordEnv, toyTrainTasks, toyWords, type ToyState, type ToyTask } from '../envs/toy/index.js';
import type { TrainerCallback } from '../trainers/core/callbacks.js';
import type { TrainOptions } from '../trainers/core/trainer.js';
import { CoLLMCCTrainer } from '../trainers/collm/centralized.js';
import { CoLLMDCTrainer } from '../trainers/collm/decentralized.js';
import { MAGRPOTrainer } from '../trainers/magrpo/trainer.js';
import { BENCH_LORA, BENCH_SHAPE } from './model.js';

/** The trainers the section times. */
export const ITEM_TRAINERS = ['magrpo', 'collm-dc', 'collm-cc'] as const;
export type ItemTrainer = (typeof ITEM_TRAINERS)[number];

/** `joint`: `joint_passes: true`; `per-agent`: `joint_passes: false`. */
export const PASS_MODES = ['joint', 'per-agent'] as const;
export type PassMode = (typeof PASS_MODES)[number];

/** The phases of an item, in print order (`critic`: the CoLLM trainers only). */
export const ITEM_PHASES = ['generation', 'scoring', 'backward', 'optimizer', 'reward', 'critic', 'other'] as const;
export type ItemPhase = (typeof ITEM_PHASES)[number];

/** The phases a trainer's items have. */
export function phasesOf(trainer: ItemTrainer): ItemPhase[] {
  return ITEM_PHASES.filter((p) => p !== 'critic' || trainer !== 'magrpo');
}

const TRAINER_LABELS: Record<ItemTrainer, string> = { magrpo: 'MAGRPO', 'collm-dc': 'CoLLM-DC', 'collm-cc': 'CoLLM-CC' };

const positiveInt = z.number().int().positive();

/** Options of {@link benchItems}. */
export const itemsBenchOptionsSchema = z.strictObject({
  /** A published checkpoint's shapes (random weights, its real tokenizer) instead of the bench model. */
  like: z.enum(TINY_MODEL_PRESETS).nullable().default(null),
  /** Rounds; each runs every trainer in both modes, alternating, and the figures are medians over rounds. */
  rounds: positiveInt.default(3),
  /** Timed items per trainer, mode and round (the round's figure is their mean). */
  items: positiveInt.default(2),
  /** Untimed items per trainer and mode before the first round (V8 compiles the code paths over the first ones). */
  warmupItems: z.number().int().min(0).default(1),
  /** New tokens per completion (every turn). */
  maxNewTokens: positiveInt.default(BENCH_SHAPE.newTokens),
  /** MAGRPO's completions per agent (K); the CoLLM trainers play 2 turns of one completion each. */
  generations: z.number().int().min(2).default(4),
  trainers: z.array(z.enum(ITEM_TRAINERS)).min(1).default([...ITEM_TRAINERS]),
  /** Shape fields that override the model's (a smaller model for tests). */
  shape: z
    .strictObject({
      vocabSize: positiveInt,
      hiddenSize: positiveInt,
      numLayers: positiveInt,
      numHeads: positiveInt,
      numKvHeads: positiveInt,
      headDim: positiveInt,
      intermediateSize: positiveInt,
    })
    .partial()
    .default({}),
});
export type ItemsBenchOptions = z.input<typeof itemsBenchOptionsSchema>;
type Settings = z.output<typeof itemsBenchOptionsSchema>;

const phaseFigures = z.partialRecord(z.enum(ITEM_PHASES), z.number());

/** One trainer and mode: seconds per item (mean over the items it covers) and per phase. */
const itemFiguresSchema = z.object({
  trainer: z.enum(ITEM_TRAINERS),
  mode: z.enum(PASS_MODES),
  item_s: z.number(),
  phases: phaseFigures,
});
export type ItemFigures = z.infer<typeof itemFiguresSchema>;

/** What {@link benchItems} measured (also the JSON its child process prints). */
export const itemsBenchResultSchema = z.object({
  backend: z.string(),
  /** Intra-op threads of the backend (torch: its count; wasm: its thread pool), null when not known. */
  threads: z.number().nullable(),
  cores: z.number(),
  cpu: z.string(),
  node: z.string(),
  /** os.loadavg() (1, 5, 15 minutes) when the section started and when it ended. */
  loadBefore: z.array(z.number()),
  loadAfter: z.array(z.number()),
  model: z.string(),
  parameters: z.number(),
  /** Trainable parameters of one agent's adapter. */
  adapterParameters: z.number(),
  settings: z.object({ rounds: z.number(), items: z.number(), warmupItems: z.number(), maxNewTokens: z.number(), generations: z.number() }),
  /** Every round's figures, in the order they ran. */
  rounds: z.array(itemFiguresSchema.extend({ round: z.number() })),
  /** Per trainer and mode: medians over the rounds. */
  medians: z.array(itemFiguresSchema),
  /** Per trainer: per-agent time / joint time of the item and of each phase (null where joint's is 0). */
  ratios: z.array(z.object({ trainer: z.enum(ITEM_TRAINERS), item: z.number().nullable(), phases: z.partialRecord(z.enum(ITEM_PHASES), z.number().nullable()) })),
  seconds: z.number(),
});
export type ItemsBenchResult = z.infer<typeof itemsBenchResultSchema>;

/**
 * The toy coordination task with a reward that also pays for the completions' length: the toy
 * pays 0 to random text, every group's rewards would be equal and MAGRPO's zero-advantage rows
 * are never scored, which would leave nothing to time in the update.
 */
class LengthPaidToyEnv implements LLMDecPOMDP<ToyTask, ToyState> {
  readonly name: string;
  readonly numAgents = 2;
  readonly horizon: number;
  private readonly toy: ToyCoordEnv;

  constructor(numTurns: number) {
    this.toy = new ToyCoordEnv({ numTurns });
    this.name = `${this.toy.name}-length-paid`;
    this.horizon = this.toy.horizon;
  }

  initialState(task: ToyTask): ToyState {
    return this.toy.initialState(task);
  }

  observe(state: ToyState, agent: number): string {
    return this.toy.observe(state, agent);
  }

  async step(state: ToyState, jointAction: readonly string[]): Promise<StepResult<ToyState>> {
    const r = await this.toy.step(state, jointAction);
    const chars = jointAction.reduce((s, a) => s + a.length, 0);
    return { ...r, reward: r.reward + chars / 1000 };
  }

  globalInfo(state: ToyState): GlobalInfo {
    return this.toy.globalInfo(state);
  }
}

/** Writes the checkpoint the section trains on into `dir`; returns its description. */
async function writeModel(dir: string, s: Settings): Promise<{ description: string; parameters: number }> {
  if (s.like !== null) {
    const info = await createTinyModel({ dir, like: s.like, seed: 0, tokenizer: 'qwen3', ...s.shape });
    const c = info.config;
    return {
      description: `${s.like}-like (random weights, Qwen3 tokenizer): hidden ${String(c.hidden_size)}, ${String(c.num_hidden_layers)} layers, vocab ${String(c.vocab_size)}`,
      parameters: info.parameters,
    };
  }
  // The bench model's shapes with a word tokenizer of exactly its vocabulary (the toy's words, then
  // fillers), so every sampled id decodes to a word and the prompts encode without unknowns.
  const vocab = s.shape.vocabSize ?? BENCH_SHAPE.vocab;
  const probe = await writeTinyTokenizer(dir, { kind: 'word', words: [...toyWords] });
  if (vocab < probe.vocabSize) throw new Error(`items bench: vocabSize ${vocab} is below the toy tokenizer's ${probe.vocabSize} entries`);
  const fillers = Array.from({ length: vocab - probe.vocabSize }, (_, i) => `w${i}`);
  const b = BENCH_SHAPE;
  const options: TinyModelOptions = {
    dir,
    arch: 'qwen3',
    seed: 0,
    tokenizer: 'word',
    words: [...toyWords, ...fillers],
    vocabSize: vocab,
    hiddenSize: b.hidden,
    numLayers: b.layers,
    numHeads: b.heads,
    numKvHeads: b.kvHeads,
    headDim: b.headDim,
    intermediateSize: b.intermediate,
    tieWordEmbeddings: true,
    ...s.shape,
  };
  const info = await createTinyModel(options);
  const c = info.config;
  return {
    description: `the bench model's shape (random Qwen3, word tokenizer): hidden ${String(c.hidden_size)}, ${String(c.num_hidden_layers)} layers, vocab ${String(c.vocab_size)}`,
    parameters: info.parameters,
  };
}

/** What the section drives: a trainer's `train` and `dispose`. */
interface Runner {
  train(options: TrainOptions): Promise<void>;
  dispose(): void;
}

/** A trainer with its LoRA models (freed with it). */
interface Built {
  runner: Runner;
  models: TfCausalLM[];
}

const LORA = loraSettings(loraSectionSchema.parse(BENCH_LORA));

/**
 * Builds `trainer` in `mode` on the checkpoint in `dir`. Adapter seeds depend on the trainer and
 * role only, so both modes start from the same weights.
 */
async function build(trainer: ItemTrainer, mode: PassMode, dir: string, s: Settings): Promise<Built> {
  const models: TfCausalLM[] = [];
  const lora = async (role: string): Promise<TfCausalLM> => {
    const m = await loadCausalLM(dir, { lora: { settings: LORA, seed: `items:${trainer}:${role}` } });
    models.push(m);
    return m;
  };
  try {
    const tokenizer = await loadTokenizer(dir);
    const agents: Agent[] = [];
    for (let i = 0; i < 2; i++) agents.push({ name: `agent_${i}`, model: await lora(`agent_${i}`), tokenizer, chat: false });
    const critic = async (role: string): Promise<CriticLM> => ({ name: role, model: await lora(role), tokenizer });
    const joint_passes = mode === 'joint';
    const common = {
      max_new_tokens: s.maxNewTokens,
      temperature: 1,
      top_p: 1,
      top_k: 0,
      eval_interval: 0,
      num_train_epochs: 1_000,
      logging_steps: 1,
      joint_passes,
    };
    let runner: Runner;
    if (trainer === 'magrpo') {
      // One turn, K completions per agent, a buffer of one node: an update every item.
      runner = new MAGRPOTrainer({
        agents,
        env: new LengthPaidToyEnv(1),
        trainTasks: toyTrainTasks,
        config: { ...common, num_turns: 1, num_generations: s.generations, rollout_buffer_size: 1 },
      });
    } else {
      // Two turns of one completion per agent (the CoopHE settings' shape), a buffer of one episode.
      const config = { ...common, num_turns: 2, num_generations: 1, early_termination_threshold: null, rollout_buffer_size: 2, update_epochs: 1 };
      const env = new LengthPaidToyEnv(2);
      runner =
        trainer === 'collm-cc'
          ? new CoLLMCCTrainer({ agents, critic: await critic('critic'), env, trainTasks: toyTrainTasks, config })
          : new CoLLMDCTrainer({ agents, critics: [await critic('critic_0'), await critic('critic_1')], env, trainTasks: toyTrainTasks, config });
    }
    return { runner, models };
  } catch (err) {
    for (const m of models) m.dispose();
    throw err;
  }
}

function dispose(b: Built): void {
  b.runner.dispose();
  for (const m of b.models) m.dispose();
}

/** Seconds of `time/<key>_s` summed over `keys`. */
function logged(metrics: Record<string, number>, keys: readonly string[]): number {
  return keys.reduce((a, k) => a + (metrics[`time/${k}_s`] ?? 0), 0);
}

/** Which logged timer phases make up each item phase (`other` is the item's remainder). */
const PHASE_SOURCES: Record<Exclude<ItemPhase, 'other'>, readonly string[]> = {
  generation: ['generation'],
  scoring: ['scoring', 'training_forward'],
  backward: ['training_backward'],
  optimizer: ['training_optimizer'],
  reward: ['reward', 'transition'],
  critic: ['critic', 'critic_training'],
};

/** One timed item: its wall time and the `time/*_s` figures it logged, summed. */
interface TimedItem {
  seconds: number;
  times: Record<string, number>;
}

/**
 * Runs `count` items and returns each one's wall time (first `onItemBegin` to `onItemEnd`) with
 * the `time/*_s` figures it logged, summed.
 * @throws Error when an item logged no times (its update did not run inside it).
 */
async function runItems(runner: Runner, count: number): Promise<TimedItem[]> {
  const out: TimedItem[] = [];
  let t0 = 0;
  let times: Record<string, number> | null = null;
  const callback: TrainerCallback = {
    onItemBegin: () => {
      times = {};
      t0 = performance.now();
    },
    onLog: ({ metrics }) => {
      if (times === null) return;
      for (const [k, v] of Object.entries(metrics)) if (k.startsWith('time/')) times[k] = (times[k] ?? 0) + v;
    },
    onItemEnd: () => {
      const seconds = (performance.now() - t0) / 1000;
      if (times === null || Object.keys(times).length === 0) throw new Error('items bench: an item logged no phase times (no update inside it)');
      out.push({ seconds, times });
      times = null;
    },
  };
  await runner.train({ maxItems: count, callbacks: [callback] });
  return out;
}

/** Mean seconds per item and per phase over `items`. */
function itemFigures(trainer: ItemTrainer, mode: PassMode, items: readonly TimedItem[]): ItemFigures {
  const n = items.length;
  const item = items.reduce((a, x) => a + x.seconds, 0) / n;
  const phases: Partial<Record<ItemPhase, number>> = {};
  let named = 0;
  for (const p of phasesOf(trainer)) {
    if (p === 'other') continue;
    const v = items.reduce((a, x) => a + logged(x.times, PHASE_SOURCES[p]), 0) / n;
    phases[p] = v;
    named += v;
  }
  phases.other = item - named;
  return { trainer, mode, item_s: item, phases };
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Per trainer and mode, the median over rounds of the item and of each phase. */
export function medianFigures(rounds: readonly ItemFigures[]): ItemFigures[] {
  const out: ItemFigures[] = [];
  for (const trainer of ITEM_TRAINERS) {
    for (const mode of PASS_MODES) {
      const rs = rounds.filter((r) => r.trainer === trainer && r.mode === mode);
      if (rs.length === 0) continue;
      const phases: Partial<Record<ItemPhase, number>> = {};
      for (const p of phasesOf(trainer)) phases[p] = median(rs.map((r) => r.phases[p] ?? 0));
      out.push({ trainer, mode, item_s: median(rs.map((r) => r.item_s)), phases });
    }
  }
  return out;
}

/** Per trainer with both modes: per-agent / joint of the item and of each phase. */
export function passRatios(medians: readonly ItemFigures[]): ItemsBenchResult['ratios'] {
  const ratio = (perAgent: number | undefined, joint: number | undefined): number | null =>
    perAgent === undefined || joint === undefined || joint <= 0 ? null : perAgent / joint;
  const out: ItemsBenchResult['ratios'] = [];
  for (const trainer of ITEM_TRAINERS) {
    const joint = medians.find((m) => m.trainer === trainer && m.mode === 'joint');
    const perAgent = medians.find((m) => m.trainer === trainer && m.mode === 'per-agent');
    if (!joint || !perAgent) continue;
    const phases: Partial<Record<ItemPhase, number | null>> = {};
    for (const p of phasesOf(trainer)) phases[p] = ratio(perAgent.phases[p], joint.phases[p]);
    out.push({ trainer, item: ratio(perAgent.item_s, joint.item_s), phases });
  }
  return out;
}

async function backendThreads(): Promise<number | null> {
  const backend = activeBackend();
  if (backend === 'torch') {
    const t = torchBackend();
    return t === null ? null : Number(t.addon.runtime('get_threads', 0));
  }
  if (backend === 'wasm') {
    const wasm = await import('@tensorflow/tfjs-backend-wasm');
    return wasm.getThreadsCount();
  }
  return null;
}

/**
 * Times training items on the current backend (`COMLRL_BACKEND`, else the default): per round,
 * every trainer of `options.trainers` runs `items` items with joint passes and then as many with
 * per-agent passes (after `warmupItems` untimed items of each before the first round). With
 * `like`, each trainer and mode is built just before its items and freed after them (a real-size
 * base is held once throughout), so only one trainer's adapters and optimizer state live at a time.
 */
export async function benchItems(input: ItemsBenchOptions = {}): Promise<ItemsBenchResult> {
  const s = itemsBenchOptionsSchema.parse(input);
  const start = performance.now();
  const loadBefore = os.loadavg();
  await initBackend();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-bench-items-'));
  const built = new Map<string, Built>();
  let anchor: TfCausalLM | null = null;
  try {
    const model = await writeModel(dir, s);
    // Holds the frozen base while trainers come and go, so it is read from disk once.
    anchor = await loadCausalLM(dir, { lora: { settings: LORA, seed: 'items:anchor' } });
    const adapterParameters = anchor.trainableVariables().reduce((a, v) => a + v.size, 0);
    const keep = s.like === null;
    const get = async (trainer: ItemTrainer, mode: PassMode): Promise<Built> => {
      const key = `${trainer}/${mode}`;
      let b = built.get(key);
      if (!b) {
        b = await build(trainer, mode, dir, s);
        if (keep) built.set(key, b);
      }
      return b;
    };
    const run = async (trainer: ItemTrainer, mode: PassMode, count: number): Promise<TimedItem[]> => {
      const b = await get(trainer, mode);
      try {
        return await runItems(b.runner, count);
      } finally {
        if (!keep) dispose(b);
      }
    };
    if (s.warmupItems > 0) {
      for (const trainer of s.trainers) for (const mode of PASS_MODES) await run(trainer, mode, s.warmupItems);
    }
    const rounds: ItemsBenchResult['rounds'] = [];
    for (let round = 1; round <= s.rounds; round++) {
      for (const trainer of s.trainers) {
        for (const mode of PASS_MODES) rounds.push({ ...itemFigures(trainer, mode, await run(trainer, mode, s.items)), round });
      }
    }
    const medians = medianFigures(rounds);
    return {
      backend: activeBackend() ?? 'unknown',
      threads: await backendThreads(),
      cores: os.cpus().length,
      cpu: os.cpus()[0]?.model ?? 'cpu',
      node: process.version,
      loadBefore,
      loadAfter: os.loadavg(),
      model: model.description,
      parameters: model.parameters,
      adapterParameters,
      settings: { rounds: s.rounds, items: s.items, warmupItems: s.warmupItems, maxNewTokens: s.maxNewTokens, generations: s.generations },
      rounds,
      medians,
      ratios: passRatios(medians),
      seconds: (performance.now() - start) / 1000,
    };
  } finally {
    for (const b of built.values()) dispose(b);
    anchor?.dispose();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const num = (x: number | null | undefined, digits: number): string => (x === null || x === undefined || !Number.isFinite(x) ? '–' : x.toFixed(digits));
const loads = (l: readonly number[]): string => l.map((x) => x.toFixed(2)).join(' ');

/** The section's tables as markdown lines: medians with the ratios, then every round. */
export function itemsTable(r: ItemsBenchResult): string[] {
  const L: string[] = [];
  const st = r.settings;
  L.push(`\n## Time per training item (s): ${r.backend}, ${r.threads === null ? 'threads unknown' : `${r.threads} thread${r.threads === 1 ? '' : 's'}`}\n`);
  L.push(
    `${r.model}, ${(r.parameters / 1e6).toFixed(1)} M parameters; 2 LoRA agents (r = ${BENCH_LORA.r} on ${BENCH_LORA.target_modules.join(', ')}, ${r.adapterParameters} parameters each) on one frozen base, ` +
      `CoLLM critics LoRA on it too; MAGRPO: 1 turn, K = ${st.generations}; CoLLM-DC / CoLLM-CC: 2 turns, 1 completion each, an update every item; ${st.maxNewTokens} new tokens per completion. ` +
      `${st.rounds} round${st.rounds === 1 ? '' : 's'} alternating joint and per-agent passes, ${st.items} timed item${st.items === 1 ? '' : 's'} per trainer and mode per round after ${st.warmupItems} untimed; medians over rounds. ` +
      `${r.cores} cores (${r.cpu}), node ${r.node}; load average ${loads(r.loadBefore)} before, ${loads(r.loadAfter)} after; ${r.seconds.toFixed(0)} s in all.`,
  );
  L.push('');
  const head = ['trainer', 'passes', 'item', ...ITEM_PHASES];
  L.push(`| ${head.join(' | ')} |`);
  L.push(`|${head.map(() => '---').join('|')}|`);
  for (const trainer of ITEM_TRAINERS) {
    for (const m of r.medians.filter((x) => x.trainer === trainer)) {
      L.push(`| ${TRAINER_LABELS[trainer]} | ${m.mode} | ${num(m.item_s, 3)} | ${ITEM_PHASES.map((p) => num(m.phases[p], 3)).join(' | ')} |`);
    }
    const q = r.ratios.find((x) => x.trainer === trainer);
    if (q) L.push(`| ${TRAINER_LABELS[trainer]} | per-agent / joint | ${num(q.item, 2)}× | ${ITEM_PHASES.map((p) => (q.phases[p] === undefined ? '–' : `${num(q.phases[p], 2)}×`)).join(' | ')} |`);
  }
  L.push('');
  L.push('Every round (s per item):');
  L.push('');
  const roundHead = ['round', 'trainer', 'passes', 'item', ...ITEM_PHASES];
  L.push(`| ${roundHead.join(' | ')} |`);
  L.push(`|${roundHead.map(() => '---').join('|')}|`);
  for (const x of r.rounds) L.push(`| ${x.round} | ${TRAINER_LABELS[x.trainer]} | ${x.mode} | ${num(x.item_s, 3)} | ${ITEM_PHASES.map((p) => num(x.phases[p], 3)).join(' | ')} |`);
  return L;
}
