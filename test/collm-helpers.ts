/** Shared setup of the CoLLM-DC / CoLLM-CC tests: real tiny checkpoints in temp dirs; the learning tests' task and runs. */
import { join } from 'node:path';
import { CRITIC_LAYOUT_WORDS } from '../src/critic/inputs.js';
import type { CriticLM } from '../src/critic/value-model.js';
import { createTinyModel } from '../src/model/tiny.js';
import { loadCausalLM } from '../src/model/load.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { toyWords } from '../envs/toy/index.js';
import { hiddenCueAnswers, hiddenCueScore, hiddenCueWord, hiddenCueWords } from '../envs/hidden-cue/index.js';
import type { GlobalFeatures, GlobalInfo, LLMDecPOMDP, StepResult } from '../src/decpomdp/types.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { CoLLMCCTrainer } from '../trainers/collm/centralized.js';
import { CoLLMDCTrainer } from '../trainers/collm/decentralized.js';
import { agentsPolicy, exactEpisodeValue, OneTokenPolicies, type TextDistribution } from './exact-eval.js';
import { disposeAgents } from './magrpo-helpers.js';
import { blindTokenizer } from '../bench/paper-runs.js';

/** Writes a tiny word-level critic checkpoint whose vocabulary also covers the critic layouts. */
export async function tinyCritic(
  dir: string,
  name: string,
  seed: number,
  words: readonly string[],
  opts: { hiddenSize?: number; numLayers?: number } = {},
): Promise<CriticLM> {
  const d = join(dir, name);
  const vocab = [...new Set([...words, ...CRITIC_LAYOUT_WORDS])];
  await createTinyModel({ dir: d, arch: 'qwen3', seed, tokenizer: 'word', words: vocab, hiddenSize: opts.hiddenSize ?? 32, numLayers: opts.numLayers ?? 1 });
  return { name, model: await loadCausalLM(d), tokenizer: await loadTokenizer(d) };
}

/**
 * The toy-task critics the CoLLM suites share: two decentralized ones (`c0`, `c1`: one per agent)
 * and a centralized one (`cc`), each its own checkpoint.
 */
export async function toyCritics(dir: string): Promise<CriticLM[]> {
  return [await tinyCritic(dir, 'c0', 3, toyWords), await tinyCritic(dir, 'c1', 4, toyWords), await tinyCritic(dir, 'cc', 5, toyWords)];
}

/** Frees the critics' weights. */
export function disposeCritics(critics: readonly CriticLM[]): void {
  for (const c of critics) c.model.dispose();
}

/**
 * Numeric m_t of the learning tests' tasks (config `critic_global_features`): the turn as a share
 * of the horizon and the last reward (0 before any), the same facts as their text m_t — nothing of
 * the words said, which critics must still read from the history.
 */
export function turnAndRewardFeatures<S extends { readonly turn: number; readonly lastReward: number | null }>(horizon: number): GlobalFeatures<S> {
  return { size: 2, names: ['turn/H', 'last reward'], of: (state) => [state.turn / horizon, state.lastReward ?? 0] };
}

/** A task of {@link SparseAgreeEnv} (one game; tasks only name the episodes). */
export interface SparseAgreeTask {
  readonly id: string;
}

/** State of a {@link SparseAgreeEnv} episode (frozen). */
export interface SparseAgreeState {
  readonly task: SparseAgreeTask;
  readonly turn: number;
  /** The words said on turn 1, once played (null: nothing recognisable). */
  readonly committed: readonly (string | null)[] | null;
  readonly lastReward: number | null;
}

const AGREE_WORDS = new Set(hiddenCueWords);

/**
 * The actor-critic learning tests' task: sparse, H = 2, two agents, the hidden-cue words and
 * scoring for two `red` cues (envs/hidden-cue): 0.25 per agent that says `apple` or `rose`, plus
 * 0.5 when both say the same one — a coordination game with two equilibria. On turn 1 both agents
 * see `cue red`; on turn 2 agent i sees `cue red partner <w_other> <w_i>`, both committed words
 * with its own last. Turn 1 pays 0; turn 2 pays the score of turn 1's words (turn 2's words do not
 * count). So the first turn gets credit only through the critic's bootstrap V(h_2) → V(h_1), and
 * with a frozen critic none at all.
 *
 * Both committed words end every critic input that reads turn 2 (the joint one, and each agent's
 * own with its own word last) because a tiny random-init critic reads mostly the last tokens. On
 * the hidden-cue task with its two cues set to red (turn 2 shows only the partner's word), with a
 * CoLLM-CC critic reading the current observations, the agent whose word ended the critic's input
 * learned to answer and the other did not, in every run tried on wasm (and the other way round with
 * the words swapped). Uniform random play over the 9 words scores 10/81 (`hiddenCueRandomBaseline`).
 */
export class SparseAgreeEnv implements LLMDecPOMDP<SparseAgreeTask, SparseAgreeState> {
  readonly name = 'sparse-agree';
  readonly numAgents = 2;
  readonly horizon = 2;
  readonly globalFeatures = turnAndRewardFeatures<SparseAgreeState>(this.horizon);

  initialState(task: SparseAgreeTask): SparseAgreeState {
    return Object.freeze({ task, turn: 0, committed: null, lastReward: null });
  }

  observe(state: SparseAgreeState, agent: number): string {
    if (state.committed === null) return 'cue red';
    const shown = (w: string | null) => (w !== null && AGREE_WORDS.has(w) ? w : 'none');
    return `cue red partner ${shown(state.committed[1 - agent])} ${shown(state.committed[agent])}`;
  }

  async step(state: SparseAgreeState, jointAction: readonly string[]): Promise<StepResult<SparseAgreeState>> {
    if (state.turn >= this.horizon) throw new Error(`${this.name}: step on a finished episode`);
    const committed = state.committed ?? Object.freeze(jointAction.map(hiddenCueWord));
    const turn = state.turn + 1;
    const done = turn >= this.horizon;
    const reward = done ? hiddenCueScore(['red', 'red'], committed) : 0;
    return { reward, next: Object.freeze({ task: state.task, turn, committed, lastReward: reward }), done, info: {} };
  }

  globalInfo(state: SparseAgreeState): GlobalInfo {
    return { turn: state.turn, numTurns: this.horizon, lastReward: state.lastReward, maxReward: 1 };
  }
}

/** State of a {@link SparseEchoEnv} episode (frozen). */
export interface SparseEchoState {
  readonly task: SparseAgreeTask;
  readonly turn: number;
  /** Agent 0's turn-1 word and agent 1's (null: nothing recognisable), once played. */
  readonly said: readonly (string | null)[] | null;
  readonly lastReward: number | null;
}

const RED_ANSWERS: readonly string[] = hiddenCueAnswers.red;

/**
 * A sparse relay, H = 2, two agents, the hidden-cue words: on turn 1 both see `cue red` and agent 0
 * must answer it (`apple` or `rose`); on turn 2 agent 1 sees `cue red partner <w_0>` and must say
 * agent 0's word back, while agent 0 sees `cue red partner <w_1> <w_0>` (its own word last). Turn 1
 * pays 0 and turn 2 pays 0.5·[w_0 answers] + 0.5·[w_0 answers and agent 1's turn-2 word is w_0];
 * agent 1's turn-1 word and agent 0's turn-2 word do not count. Uniform random play over the 9
 * words: 0.5·2/9 + 0.5·(2/9)(1/9) = 10/81.
 *
 * Agent 0's answer is credited only through the critic's bootstrap V(h_2) → V(h_1), and V(h_2) must
 * read w_0 from the history: with the joint layout it is the last word of the critic's input (agent
 * 1's observation), where a tiny random-init critic reads best (see {@link SparseAgreeEnv}). A
 * critic that reads only the turn index gives agent 0's turn 1 a constant advantage, so nothing.
 */
export class SparseEchoEnv implements LLMDecPOMDP<SparseAgreeTask, SparseEchoState> {
  readonly name = 'sparse-echo';
  readonly numAgents = 2;
  readonly horizon = 2;
  readonly globalFeatures = turnAndRewardFeatures<SparseEchoState>(this.horizon);

  initialState(task: SparseAgreeTask): SparseEchoState {
    return Object.freeze({ task, turn: 0, said: null, lastReward: null });
  }

  observe(state: SparseEchoState, agent: number): string {
    if (state.said === null) return 'cue red';
    const shown = (w: string | null) => (w !== null && AGREE_WORDS.has(w) ? w : 'none');
    return agent === 0 ? `cue red partner ${shown(state.said[1])} ${shown(state.said[0])}` : `cue red partner ${shown(state.said[0])}`;
  }

  async step(state: SparseEchoState, jointAction: readonly string[]): Promise<StepResult<SparseEchoState>> {
    if (state.turn >= this.horizon) throw new Error(`${this.name}: step on a finished episode`);
    const words = jointAction.map(hiddenCueWord);
    const said = state.said ?? Object.freeze(words);
    const turn = state.turn + 1;
    const done = turn >= this.horizon;
    const answered = said[0] !== null && RED_ANSWERS.includes(said[0]);
    const reward = done && answered ? 0.5 + (words[1] === said[0] ? 0.5 : 0) : 0;
    return { reward, next: Object.freeze({ task: state.task, turn, said, lastReward: reward }), done, info: {} };
  }

  globalInfo(state: SparseEchoState): GlobalInfo {
    return { turn: state.turn, numTurns: this.horizon, lastReward: state.lastReward, maxReward: 1 };
  }
}

/** The learning tests' sparse tasks: `agree` ({@link SparseAgreeEnv}) and `echo` ({@link SparseEchoEnv}). */
export type SparseTaskName = 'agree' | 'echo';

/** One actor-critic learning run's settings (see {@link actorCriticLearningRun}). */
export interface ActorCriticLearningOptions {
  readonly method: 'collm-dc' | 'collm-cc';
  /** The task (default `agree`). */
  readonly task?: SparseTaskName;
  /** Seeds the actors', critics' and heads' init and the sampling / minibatch streams. */
  readonly seed: number;
  /**
   * A mutation of the critics: `frozen` never learn (critic learning rate 0); `blind` read only
   * m_t's turn index (bench/paper-runs.ts `blindTokenizer`), so they can learn a per-turn baseline
   * and nothing of the history. Absent: the critics as configured.
   */
  readonly control?: 'frozen' | 'blind';
  /** Each critic checkpoint's size (default hidden 32, 1 layer). */
  readonly criticSize?: { readonly hiddenSize: number; readonly numLayers: number };
  /** Scratch directory for the tiny checkpoints. */
  readonly dir: string;
  /** Config fields over the run's own (below). */
  readonly config?: Record<string, unknown>;
  /**
   * Also measure the starting policies (each actor's checkpoint as written, which is the frozen
   * reference of a run with `reference_kl_enabled`): their exact expected final reward, and the
   * trained actors' KL to them at the first turn.
   */
  readonly measureStart?: boolean;
}

/** What {@link actorCriticLearningRun} measured. */
export interface ActorCriticLearningResult {
  /** The trained policies' exact expected final reward. */
  readonly finalReward: number;
  readonly seconds: number;
  /** CPU seconds of this process over the run (user + system; the wall time moves with the machine's load). */
  readonly cpuSeconds: number;
  /** `measureStart`: the starting policies' exact expected final reward. */
  readonly startReward?: number;
  /**
   * `measureStart`: KL(π_trained ‖ π_start) of each actor's first-turn completion (the one the
   * reward depends on), exact over the one-word texts, averaged over the actors.
   */
  readonly firstTurnKl?: number;
}

/** KL(p ‖ q) of two distributions over the same texts. */
export function textKl(p: TextDistribution, q: TextDistribution): number {
  let kl = 0;
  for (const [text, pt] of p) if (pt > 0) kl += pt * Math.log(pt / (q.get(text) ?? 0));
  return kl;
}

/** Training episodes per epoch (one buffer flush each). */
const AGREE_EPISODES = 16;

/**
 * The config of an {@link actorCriticLearningRun} (its comment lists the settings): the run's own
 * settings, then `opts.config` over them, then the control's (`frozen`: critic learning rate 0).
 */
export function actorCriticLearningConfig(opts: Pick<ActorCriticLearningOptions, 'seed' | 'config' | 'control'>): Record<string, unknown> {
  return {
    num_turns: 2,
    max_new_tokens: 1,
    temperature: 1,
    top_p: 1,
    top_k: 0,
    early_termination_threshold: null,
    discount: 0.9,
    agent_learning_rate: 5e-3,
    critic_learning_rate: 3e-3,
    num_train_epochs: 20,
    rollout_buffer_size: 2 * AGREE_EPISODES, // one flush per epoch
    train_batch_size: 4,
    update_epochs: 2,
    critic_warmup_items: 3 * AGREE_EPISODES,
    eval_interval: 0,
    logging_steps: 1_000_000,
    seed: opts.seed,
    ...opts.config,
    ...(opts.control === 'frozen' ? { critic_learning_rate: 0 } : {}),
  };
}

/**
 * Trains two tiny word-level actors (qwen3, hidden 32, 1 layer) with CoLLM-DC or CoLLM-CC on
 * {@link SparseAgreeEnv} or {@link SparseEchoEnv} and returns the exact expected final reward of
 * the trained policies (see exact-eval.ts), the run's seconds and CPU seconds. Critics: tiny qwen3
 * checkpoints of hidden 32, 1 layer (`criticSize`). The config ({@link actorCriticLearningConfig})
 * is the trainers' defaults (paper-aligned: full joint or own history, m_t as text, TD(0)
 * targets, value clip 0.2, ratio clip, z-scored δ) except: one word per completion at
 * temperature 1 without top-p / top-k, no early termination, γ = 0.9, actor learning rate 5e-3, critic learning rate 3e-3, one buffer flush of
 * 16 episodes per epoch in minibatches of 4 with 2 update epochs, 20 epochs, the first 3 a critic
 * warm-up (z-scored δ from a random critic moves the actors as hard as a fitted one would: without
 * it, some runs' actors settled on non-answers before the critic could tell them apart).
 */
export async function actorCriticLearningRun(opts: ActorCriticLearningOptions): Promise<ActorCriticLearningResult> {
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const { method, seed, dir } = opts;
  const tag = `${method}-${opts.task ?? 'agree'}-s${seed}${opts.control ? `-${opts.control}` : ''}`;
  const agents: Agent[] = [];
  const critics: CriticLM[] = [];
  try {
    for (let i = 0; i < 2; i++) {
      const d = join(dir, `${tag}-a${i}`);
      await createTinyModel({ dir: d, arch: 'qwen3', seed: 1000 * seed + 1 + i, tokenizer: 'word', words: [...hiddenCueWords], hiddenSize: 32, numLayers: 1 });
      agents.push({ name: `a${i}`, model: await loadCausalLM(d), tokenizer: await loadTokenizer(d), chat: false });
    }
    const criticCount = method === 'collm-cc' ? 1 : 2;
    for (let c = 0; c < criticCount; c++) {
      const critic = await tinyCritic(dir, `${tag}-c${c}`, 1000 * seed + 10 + c, hiddenCueWords, opts.criticSize);
      critics.push(opts.control === 'blind' ? { ...critic, tokenizer: blindTokenizer(critic.tokenizer) } : critic);
    }
    const env: LLMDecPOMDP<SparseAgreeTask, unknown> = opts.task === 'echo' ? new SparseEchoEnv() : new SparseAgreeEnv();
    const trainTasks = Array.from({ length: AGREE_EPISODES }, (_, i) => ({ id: `agree-${i}` }));
    const config = actorCriticLearningConfig(opts);
    const trainer =
      method === 'collm-cc'
        ? new CoLLMCCTrainer({ agents, critic: critics[0], env, trainTasks, config })
        : new CoLLMDCTrainer({ agents, critics, env, trainTasks, config });
    try {
      await trainer.train();
    } finally {
      trainer.dispose();
    }
    const episode = { numTurns: 2, discount: 0.9, earlyTerminationThreshold: null } as const;
    const value = await exactEpisodeValue(env, [{ id: 'agree-eval' }], agentsPolicy(agents), episode);
    const seconds = (performance.now() - t0) / 1000;
    const used = process.cpuUsage(cpu0);
    const cpuSeconds = (used.user + used.system) / 1e6;
    if (opts.measureStart !== true) return { finalReward: value.finalReward, seconds, cpuSeconds };
    // The checkpoints on disk still hold the starting weights (training never writes them back).
    const start: Agent[] = [];
    try {
      for (let i = 0; i < agents.length; i++) {
        const d = join(dir, `${tag}-a${i}`);
        start.push({ name: `start${i}`, model: await loadCausalLM(d), tokenizer: await loadTokenizer(d), chat: false });
      }
      const startValue = await exactEpisodeValue(env, [{ id: 'agree-eval' }], agentsPolicy(start), episode);
      const first = env.observe(env.initialState({ id: 'agree-eval' }), 0);
      const trained = new OneTokenPolicies(agents);
      const reference = new OneTokenPolicies(start);
      let kl = 0;
      for (let i = 0; i < agents.length; i++) kl += textKl((await trained.distributions(i, [first]))[0], (await reference.distributions(i, [first]))[0]);
      return { finalReward: value.finalReward, seconds, cpuSeconds, startReward: startValue.finalReward, firstTurnKl: kl / agents.length };
    } finally {
      disposeAgents(start);
    }
  } finally {
    disposeAgents(agents);
    disposeCritics(critics);
  }
}
