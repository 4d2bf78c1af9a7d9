/**
 * One training run of the paper's comparison in miniature (`npm run bench -- paper`, bench/paper.ts)
 * on the hidden-cue relay (envs/hidden-cue/relay.ts), with tiny word-level qwen3 checkpoints, at a
 * matched budget of completions generated per agent.
 *
 * Settings every method shares: actors of hidden 32 and 1 layer, one word per completion
 * (max_new_tokens 1), temperature 1, no nucleus/top-k, no early termination (training and
 * evaluation), γ = 0.9, actor learning rate 5e-3, {@link TRAIN_TASKS} training tasks, and
 * {@link EVAL_EPISODES} sampled evaluation episodes at the fractions 0, 1/s, …, 1 of the method's
 * own budget (s = `segments`; bench/paper-stats.ts `evalItems`). The figure of an evaluation is the
 * mean per-turn score of its episodes (what both payments amount to).
 *
 * Actor-critic (CoLLM-DC, CoLLM-CC): one completion per agent per turn, so the budget is
 * epochs × 16 × H completions per agent; one buffer flush per epoch (16 episodes) in minibatches
 * of {@link CRITIC_BATCH} transitions, {@link UPDATE_EPOCHS} update epochs; no critic warm-up; the
 * library's defaults otherwise (the paper's h_t and m_t: CC's critic reads the joint history, DC's
 * its own agent's, both with m_t, which the relay fills with its progress; value clip 0.2; δ
 * z-scored per turn group unless the arm asks for the raw δ). Critics are qwen3 checkpoints of
 * hidden 32 and 1 layer with a word vocabulary that reads every critic text whole ({@link CRITIC_WORDS}),
 * random-init or pretrained (bench/critic-pretrain.ts), learning rate
 * {@link CRITIC_LR}. Controls: a frozen critic (learning rate 0) and a blind one (it reads only
 * m_t's turn index, so it can learn a per-turn baseline and nothing of the history).
 * MAGRPO: K samples per node (K = 2 or 4), a K-ary tree of Σ_t K^t completions per agent and task,
 * buffer of 8, as many whole trees as fit in the actor-critic budget (none: the arm is not run).
 */
import { join } from 'node:path';
import type { CriticLM } from '../src/critic/value-model.js';
import { CRITIC_LAYOUT_WORDS, criticWordsOf, formatGlobalInfo } from '../src/critic/inputs.js';
import type { Agent } from '../src/decpomdp/agent.js';
import type { EvalEpisode } from '../trainers/core/eval.js';
import type { GenerationSettings } from '../trainers/core/generation.js';
import { createTinyModel } from '../src/model/tiny.js';
import { loadCausalLM } from '../src/model/load.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import type { Tokenizer } from '../src/tokenizer/types.js';
import { mean } from '../src/util/stats.js';
import { hiddenCueWords } from '../envs/hidden-cue/index.js';
import { HiddenCueRelayEnv, relayEpisodeScore, relayProgress, relayTasks, RELAY_PROGRESS_WORDS, type RelayPayment, type RelayState, type RelayTask } from '../envs/hidden-cue/relay.js';
import { CoLLMCCTrainer } from '../trainers/collm/centralized.js';
import { CoLLMDCTrainer } from '../trainers/collm/decentralized.js';
import { MAGRPOTrainer } from '../trainers/magrpo/trainer.js';
import { evalItems } from './paper-stats.js';

/** Training tasks per epoch. */
export const TRAIN_TASKS = 16;
/** Evaluation episodes per evaluation (one per eval task). */
export const EVAL_EPISODES = 64;
/** Transitions per critic/actor minibatch. */
export const CRITIC_BATCH = 8;
/** Update epochs per flush. */
export const UPDATE_EPOCHS = 2;
/** Critic learning rate (both critic arms). */
export const CRITIC_LR = 3e-3;
const ACTOR_LR = 5e-3;
/** Critics are larger than the actors: they read the joint history. */
export const CRITIC_SIZE = { hiddenSize: 32, numLayers: 1 } as const;
/** A task variant of the bench. */
export interface PaperVariant {
  readonly name: string;
  readonly horizon: number;
  readonly payment: RelayPayment;
}

/** The four variants: sparse and dense payment, H = 4 and 6. */
export const PAPER_VARIANTS: readonly PaperVariant[] = [
  { name: 'sparse H=4', horizon: 4, payment: 'sparse' },
  { name: 'sparse H=6', horizon: 6, payment: 'sparse' },
  { name: 'dense H=4', horizon: 4, payment: 'dense' },
  { name: 'dense H=6', horizon: 6, payment: 'dense' },
];

/**
 * Every m_t line a critic of the bench's variants can read: each turn, last reward (none, or a
 * multiple of 1/(4H), which both payments pay), its maximum, and progress (hits, score a multiple
 * of 1/4, slot). Their numbers are words of their own to a word tokenizer (`0.0625` is 0 . 0625).
 */
function relayGlobalInfoLines(): string[] {
  const lines: string[] = [];
  for (const v of PAPER_VARIANTS) {
    const h = v.horizon;
    const rewards = [null, ...Array.from({ length: 4 * h + 1 }, (_, k) => k / (4 * h))];
    for (let turn = 0; turn < h; turn++) {
      for (const lastReward of rewards) lines.push(formatGlobalInfo({ turn, numTurns: h, lastReward, maxReward: v.payment === 'dense' ? 1 / h : 1, progress: relayProgress(0, 0, null) }));
    }
    for (let hits = 0; hits <= h; hits++) {
      for (let k = 0; k <= 4 * h; k++) for (const slot of [null, 0, 1]) lines.push(relayProgress(hits, k / 4, slot));
    }
  }
  return lines;
}

/** Every word a relay critic reads (a word-level vocabulary, so that no critic input has an unknown token). */
export const CRITIC_WORDS: readonly string[] = [...new Set([...hiddenCueWords, ...CRITIC_LAYOUT_WORDS, ...RELAY_PROGRESS_WORDS, ...criticWordsOf(relayGlobalInfoLines())])];

/**
 * Orders of the critic vocabulary: the same words, different token ids, so a different initial
 * weight for each word. `bench`: {@link CRITIC_WORDS}. `pre-5b1078f`: the order before commit
 * 5b1078f, where `);` stood among the layout words right after the digits (that commit dropped it
 * from `CRITIC_LAYOUT_WORDS`, moving it and every word after it). A gate figure that moves with
 * the order measures the init, not the critic (bench/critic-gate.ts).
 */
export const CRITIC_VOCAB_ORDERS = ['bench', 'pre-5b1078f'] as const;
/** See {@link CRITIC_VOCAB_ORDERS}. */
export type CriticVocabOrder = (typeof CRITIC_VOCAB_ORDERS)[number];

/** The critic vocabulary in `order`. */
export function criticWords(order: CriticVocabOrder): readonly string[] {
  if (order === 'bench') return CRITIC_WORDS;
  const layout = [...CRITIC_LAYOUT_WORDS];
  layout.splice(layout.indexOf('9') + 1, 0, ');');
  return [...new Set([...hiddenCueWords, ...layout, ...RELAY_PROGRESS_WORDS, ...criticWordsOf(relayGlobalInfoLines())])];
}

/** The vocabulary order of the bench's pretrained critics: $COMLRL_CRITIC_VOCAB_ORDER, default `bench`. */
export function benchVocabOrder(): CriticVocabOrder {
  const v = process.env.COMLRL_CRITIC_VOCAB_ORDER ?? 'bench';
  const order = CRITIC_VOCAB_ORDERS.find((o) => o === v);
  if (order === undefined) throw new Error(`COMLRL_CRITIC_VOCAB_ORDER must be one of ${CRITIC_VOCAB_ORDERS.join(', ')}, got '${v}'`);
  return order;
}

/** The λ values the sweep tries on held-out seeds before the `cc-pre-lambda` arm runs with the best. */
export const LAMBDA_SWEEP: readonly number[] = [0.5, 0.8, 0.95];

/** One arm: a method with its settings. */
export interface PaperArm {
  readonly id: string;
  readonly label: string;
  /** The plot legend's label (vega-lite cuts long ones). */
  readonly short: string;
  readonly method: 'magrpo' | 'collm-dc' | 'collm-cc';
  /** MAGRPO's K. */
  readonly k?: 2 | 4;
  readonly critic?: 'random' | 'pretrained';
  readonly control?: 'frozen' | 'blind';
  /** The equations' raw δ instead of the default z-scored one (`advantage_normalization: false`). */
  readonly rawDelta?: boolean;
  /** Run on this payment's variants only (the controls: sparse, where credit must travel back). */
  readonly only?: RelayPayment;
  /** The critic also reads the relay's numeric m_t (`critic_global_features`: turn/H, score/H, hits/H, slot). */
  readonly features?: boolean;
  /** λ-returns (`critic_target: lambda`) with this λ, or the one the sweep chose on held-out seeds (bench/paper.ts). */
  readonly lambda?: number | 'chosen';
  /** A sweep arm: run on held-out seeds only, to choose the `chosen` λ; not a comparison arm. */
  readonly sweep?: boolean;
}

/** The arms, in table order. The controls (random-init, frozen and blind critics) run on the sparse variants only. */
export const PAPER_ARMS: readonly PaperArm[] = [
  { id: 'magrpo-k2', label: 'MAGRPO K=2', short: 'MAGRPO K=2', method: 'magrpo', k: 2 },
  { id: 'magrpo-k4', label: 'MAGRPO K=4', short: 'MAGRPO K=4', method: 'magrpo', k: 4 },
  { id: 'dc-pre', label: 'CoLLM-DC, pretrained critic', short: 'DC', method: 'collm-dc', critic: 'pretrained' },
  { id: 'cc-pre', label: 'CoLLM-CC, pretrained critic', short: 'CC', method: 'collm-cc', critic: 'pretrained' },
  { id: 'cc-pre-raw', label: 'CoLLM-CC, pretrained critic, raw δ', short: 'CC raw δ', method: 'collm-cc', critic: 'pretrained', rawDelta: true },
  { id: 'cc-random', label: 'CoLLM-CC, random-init critic', short: 'CC random-init', method: 'collm-cc', critic: 'random', only: 'sparse' },
  { id: 'cc-pre-frozen', label: 'CoLLM-CC, frozen critic (pretrained)', short: 'CC frozen', method: 'collm-cc', critic: 'pretrained', control: 'frozen', only: 'sparse' },
  { id: 'cc-pre-blind', label: 'CoLLM-CC, blind critic (pretrained)', short: 'CC blind', method: 'collm-cc', critic: 'pretrained', control: 'blind', only: 'sparse' },
  { id: 'cc-pre-mt', label: 'CoLLM-CC, pretrained critic, numeric m_t', short: 'CC numeric m_t', method: 'collm-cc', critic: 'pretrained', features: true },
  { id: 'cc-pre-lambda', label: 'CoLLM-CC, pretrained critic, λ-returns (λ from the sweep)', short: 'CC λ-returns', method: 'collm-cc', critic: 'pretrained', lambda: 'chosen' },
  { id: 'cc-pre-mt-lambda', label: 'CoLLM-CC, pretrained critic, numeric m_t and λ-returns (λ from the sweep)', short: 'CC m_t + λ', method: 'collm-cc', critic: 'pretrained', features: true, lambda: 'chosen' },
  ...LAMBDA_SWEEP.map((lambda): PaperArm => ({ id: `cc-pre-lambda-${lambda}`, label: `CoLLM-CC, pretrained critic, λ = ${lambda} (sweep, held-out seeds)`, short: `CC λ=${lambda} (sweep)`, method: 'collm-cc', critic: 'pretrained', lambda, sweep: true, only: 'sparse' })),
];

/** Completions per agent of a MAGRPO tree with K samples per node over H turns: Σ_{t=1..H} K^t. */
export function treeCompletions(k: number, h: number): number {
  let total = 0;
  for (let t = 1; t <= h; t++) total += k ** t;
  return total;
}

/** The actor-critic budget: completions per agent in `epochs` epochs of H turns. */
export function acBudget(horizon: number, epochs: number): number {
  return epochs * TRAIN_TASKS * horizon;
}

/** Training tasks MAGRPO with K gets for that budget: as many whole trees as fit in it (0: not even one, not run). */
export function magrpoTasks(k: number, horizon: number, epochs: number): number {
  return Math.floor(acBudget(horizon, epochs) / treeCompletions(k, horizon));
}

/** Critic optimizer steps of one actor-critic run: per epoch one flush of 16·H transitions in minibatches, {@link UPDATE_EPOCHS} times. */
export function criticStepsPerRun(horizon: number, epochs: number): number {
  return epochs * Math.ceil((TRAIN_TASKS * horizon) / CRITIC_BATCH) * UPDATE_EPOCHS;
}

/** One run's settings. */
export interface PaperRunOptions {
  readonly arm: PaperArm;
  readonly variant: PaperVariant;
  /** Seeds the actors', critics' and heads' init and the sampling/minibatch streams. */
  readonly seed: number;
  /** Actor-critic epochs; MAGRPO gets the nearest number of completions per agent. */
  readonly epochs: number;
  /** Evaluations at the fractions 0, 1/segments, …, 1 of the budget. */
  readonly segments: number;
  /** Scratch directory for the tiny checkpoints. */
  readonly dir: string;
  /** The pretrained critic's checkpoint (arms with a pretrained critic). */
  readonly pretrainedDir?: string;
  /** The λ of an arm whose λ is `chosen`. */
  readonly lambda?: number;
}

/** One run's results. */
export interface PaperRunResult {
  /** Mean per-turn score of the eval episodes at each evaluation. */
  readonly curve: number[];
  readonly completionsPerAgent: number;
  /** Mean over turns of the critic's explained variance at each flush (actor-critic only). */
  readonly explainedVariance: number[];
  /**
   * The critic's explained variance for the Monte-Carlo returns at each flush (`critic/ev_mc/turn_k`,
   * DC: mean over its agents' critics), mean over turns 2..H, where a critic must carry reward
   * back (turn 1's return is paid by every later turn alike). Actor-critic only.
   */
  readonly evMc?: number[];
  readonly seconds: number;
  /** CPU time of the run (this process), seconds: what a run costs on an idle core, also on a loaded machine. */
  readonly cpuSeconds: number;
  /** The part of {@link PaperRunResult.cpuSeconds} spent evaluating. */
  readonly evalCpuSeconds: number;
}

/** CPU seconds (user + system) of this process since `start`. */
export function cpuSince(start: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(start);
  return (d.user + d.system) / 1e6;
}

/** The training tasks of a run (one episode each per epoch). */
export const trainTasks = (h: number) => relayTasks(TRAIN_TASKS, h, 'relay-train');
const evalTasks = (h: number) => relayTasks(EVAL_EPISODES, h, 'relay-eval');

/** The actors' sampling: one word, temperature 1, no top-p or top-k filter. */
export const ACTOR_SAMPLING: GenerationSettings = { maxNewTokens: 1, temperature: 1, topP: 1, topK: 0 };
/** Every method's discount γ. */
export const DISCOUNT = 0.9;

async function tinyLM(dir: string, seed: number, words: readonly string[], size: { hiddenSize: number; numLayers: number }) {
  await createTinyModel({ dir, arch: 'qwen3', seed, tokenizer: 'word', words: [...words], ...size });
  return { model: await loadCausalLM(dir), tokenizer: await loadTokenizer(dir) };
}

/** The two actors of seed `seed`'s runs at init (the same for every arm), written under `dir`. The caller disposes their models. */
export async function paperActors(dir: string, tag: string, seed: number): Promise<Agent[]> {
  const agents: Agent[] = [];
  for (let i = 0; i < 2; i++) agents.push({ name: `${tag}-a${i}`, chat: false, ...(await tinyLM(join(dir, `${tag}-a${i}`), 1000 * seed + i + 1, hiddenCueWords, { hiddenSize: 32, numLayers: 1 })) });
  return agents;
}

/** The critic text a blind critic keeps: m_t's turn index (`[Global Info] turn 2 of 4`), nothing else. */
export function blindText(text: string): string {
  return /\[Global Info\] turn \d+ of \d+/.exec(text)?.[0] ?? '[Global Info]';
}

/** A tokenizer that encodes only {@link blindText} of what it is given: the blind-critic control. */
export function blindTokenizer(inner: Tokenizer): Tokenizer {
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === 'encode') return (text: string, options?: { addSpecialTokens?: boolean }) => target.encode(blindText(text), options);
      const v: unknown = Reflect.get(target, prop, target);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/** Mean per-turn score of eval episodes. */
function score(episodes: readonly EvalEpisode<RelayTask, RelayState>[], payment: RelayPayment): number {
  return mean(episodes.map((e) => relayEpisodeScore(e.rewards, payment)));
}

/** The settings every method's run shares (trainer config keys). */
function sharedConfig(h: number, seed: number) {
  return {
    num_turns: h,
    max_new_tokens: ACTOR_SAMPLING.maxNewTokens,
    temperature: ACTOR_SAMPLING.temperature,
    top_p: ACTOR_SAMPLING.topP,
    top_k: ACTOR_SAMPLING.topK,
    early_termination_threshold: null,
    discount: DISCOUNT,
    agent_learning_rate: ACTOR_LR,
    eval_interval: 0,
    eval_num_samples: EVAL_EPISODES,
    eval_batch_size: EVAL_EPISODES,
    logging_steps: 1,
    seed,
  } as const;
}

/**
 * The CoLLM config of an actor-critic arm's run at horizon `h` (the critic-fit gate,
 * bench/critic-gate.ts, takes the run's critic update schedule from it).
 */
export function actorCriticConfig(arm: PaperArm, h: number, seed: number, epochs: number, lambda?: number) {
  if (arm.lambda !== undefined && (arm.lambda === 'chosen' ? lambda : arm.lambda) === undefined) throw new Error(`paper bench: arm ${arm.id} needs the λ the sweep chose`);
  const returns = arm.lambda === undefined ? {} : { critic_target: 'lambda' as const, critic_lambda: arm.lambda === 'chosen' ? (lambda as number) : arm.lambda };
  return {
    ...returns,
    ...(arm.features === true ? { critic_global_features: true } : {}),
    ...sharedConfig(h, seed),
    num_train_epochs: epochs,
    critic_learning_rate: arm.control === 'frozen' ? 0 : CRITIC_LR,
    rollout_buffer_size: TRAIN_TASKS * h, // one flush per epoch
    train_batch_size: CRITIC_BATCH,
    update_epochs: UPDATE_EPOCHS,
    critic_warmup_items: 0,
    advantage_normalization: arm.rawDelta !== true,
  };
}

/** A critic's per-turn EV against Monte-Carlo returns: CC's `critic/ev_mc/turn_k`, DC's `agent_i/critic_ev_mc/turn_k`. */
const EV_MC_KEY = /^(critic\/|agent_\d+\/critic_)ev_mc\/turn_(\d+)$/;

/** Runs one arm on one variant with one seed (see the module comment). */
export async function paperRun(opts: PaperRunOptions): Promise<PaperRunResult> {
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const { arm, variant, seed, epochs, dir } = opts;
  const h = variant.horizon;
  const tag = `${arm.id}-${variant.payment}${h}-s${seed}`;
  const agents: Agent[] = [];
  const critics: CriticLM[] = [];
  try {
    agents.push(...(await paperActors(dir, tag, seed)));
    const env = new HiddenCueRelayEnv({ numTurns: h, payment: variant.payment });
    const ev: number[] = [];
    const evMc: number[] = [];
    const logger = {
      log: (_step: number, m: Record<string, number>) => {
        const e = Object.entries(m).filter(([k]) => /^turn_\d+\/explained_variance$/.test(k)).map(([, v]) => v);
        if (e.length > 0) ev.push(mean(e));
        const mc = Object.entries(m).flatMap(([k, v]) => {
          const turn = EV_MC_KEY.exec(k)?.[2];
          return turn !== undefined && turn !== '1' ? [v] : [];
        });
        if (mc.length > 0) evMc.push(mean(mc));
      },
    };
    const shared = sharedConfig(h, seed);
    const common = { agents, env, trainTasks: trainTasks(h), evalTasks: evalTasks(h), logger };
    let trainer: MAGRPOTrainer<RelayTask, RelayState> | CoLLMCCTrainer<RelayTask, RelayState> | CoLLMDCTrainer<RelayTask, RelayState>;
    let items: number;
    let completions: number;
    if (arm.method === 'magrpo') {
      const k = arm.k ?? 2;
      items = magrpoTasks(k, h, epochs);
      if (items === 0) throw new Error(`${tag}: one MAGRPO tree (${treeCompletions(k, h)} completions) is over the budget`);
      completions = items * treeCompletions(k, h);
      trainer = new MAGRPOTrainer({ ...common, config: { ...shared, num_generations: k, num_train_epochs: Math.ceil(items / TRAIN_TASKS), rollout_buffer_size: 8 } });
    } else {
      items = epochs * TRAIN_TASKS;
      completions = acBudget(h, epochs);
      const config = actorCriticConfig(arm, h, seed, epochs, opts.lambda);
      const critic = async (i: number): Promise<CriticLM> => {
        let lm;
        if (arm.critic === 'pretrained') {
          if (!opts.pretrainedDir) throw new Error(`${tag}: a pretrained critic needs pretrainedDir`);
          lm = { model: await loadCausalLM(opts.pretrainedDir), tokenizer: await loadTokenizer(opts.pretrainedDir) };
        } else {
          lm = await tinyLM(join(dir, `${tag}-c${i}`), 1000 * seed + 10 + i, CRITIC_WORDS, CRITIC_SIZE);
        }
        const c: CriticLM = { name: `${tag}-c${i}`, model: lm.model, tokenizer: arm.control === 'blind' ? blindTokenizer(lm.tokenizer) : lm.tokenizer };
        critics.push(c);
        return c;
      };
      trainer =
        arm.method === 'collm-cc'
          ? new CoLLMCCTrainer({ ...common, critic: await critic(0), config })
          : new CoLLMDCTrainer({ ...common, critics: [await critic(0), await critic(1)], config });
    }
    const at = evalItems(items, opts.segments);
    const curve: number[] = [];
    let evalCpu = 0;
    for (let i = 0; i < at.length; i++) {
      if (i > 0 && at[i] > at[i - 1]) await trainer.train({ maxItems: at[i] - at[i - 1] });
      const c = process.cpuUsage();
      curve.push(score((await trainer.evaluate()).episodes, variant.payment));
      evalCpu += cpuSince(c);
    }
    trainer.dispose();
    return { curve, completionsPerAgent: completions, explainedVariance: ev, evMc, seconds: (performance.now() - t0) / 1000, cpuSeconds: cpuSince(cpu0), evalCpuSeconds: evalCpu };
  } finally {
    for (const a of agents) a.model.dispose();
    for (const c of critics) c.model.dispose();
  }
}
