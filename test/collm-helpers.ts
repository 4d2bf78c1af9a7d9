/** Shared setup of the CoLLM-DC / CoLLM-CC tests: real tiny checkpoints in temp dirs; the learning tests' task and runs. */
import { join } from 'node:path';
import { CRITIC_LAYOUT_WORDS } from '../src/critic/inputs.js';
import type { CriticLM } from '../src/critic/value-model.js';
import { createTinyModel } from '../src/model/tiny.js';
import { loadCausalLM } from '../src/model/load.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { toyWords } from '../envs/toy/index.js';
import { hiddenCueScore, hiddenCueWord, hiddenCueWords } from '../envs/hidden-cue/index.js';
import type { GlobalInfo, LLMDecPOMDP, StepResult } from '../src/decpomdp/types.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { CoLLMCCTrainer } from '../trainers/collm/centralized.js';
import { CoLLMDCTrainer } from '../trainers/collm/decentralized.js';
import { agentsPolicy, exactEpisodeValue, OneTokenPolicies, type TextDistribution } from './exact-eval.js';
import { disposeAgents } from './magrpo-helpers.js';

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

/** One actor-critic learning run's settings (see {@link actorCriticLearningRun}). */
export interface ActorCriticLearningOptions {
  readonly method: 'collm-dc' | 'collm-cc';
  /** Seeds the actors', critics' and heads' init and the sampling / minibatch streams. */
  readonly seed: number;
  /** The mutation: critics that never learn (critic learning rate 0). */
  readonly frozenCritic: boolean;
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
 * Trains two tiny word-level actors (qwen3, hidden 32, 1 layer) with CoLLM-DC or CoLLM-CC on
 * {@link SparseAgreeEnv} and returns the exact expected final reward of the trained policies (see
 * exact-eval.ts) and the run's seconds. Critics: tiny qwen3 checkpoints of hidden 32, 1 layer.
 * The config is the trainers' defaults (paper-aligned: full history, m_t, value clip 0.2, ratio
 * clip, z-scored δ) except: one word per completion at temperature 1 without top-p / top-k, no early
 * termination, γ = 0.9, actor learning rate 5e-3, critic learning rate 3e-3, one buffer flush of
 * 16 episodes per epoch in minibatches of 4 with 2 update epochs, 20 epochs, the first 3 a critic
 * warm-up (z-scored δ from a random critic moves the actors as hard as a fitted one would: without
 * it, some runs' actors settled on non-answers before the critic could tell them apart).
 */
export async function actorCriticLearningRun(opts: ActorCriticLearningOptions): Promise<ActorCriticLearningResult> {
  const t0 = performance.now();
  const { method, seed, dir } = opts;
  const tag = `${method}-s${seed}${opts.frozenCritic ? '-frozen' : ''}`;
  const agents: Agent[] = [];
  const critics: CriticLM[] = [];
  try {
    for (let i = 0; i < 2; i++) {
      const d = join(dir, `${tag}-a${i}`);
      await createTinyModel({ dir: d, arch: 'qwen3', seed: 1000 * seed + 1 + i, tokenizer: 'word', words: [...hiddenCueWords], hiddenSize: 32, numLayers: 1 });
      agents.push({ name: `a${i}`, model: await loadCausalLM(d), tokenizer: await loadTokenizer(d), chat: false });
    }
    const criticCount = method === 'collm-cc' ? 1 : 2;
    for (let c = 0; c < criticCount; c++) critics.push(await tinyCritic(dir, `${tag}-c${c}`, 1000 * seed + 10 + c, hiddenCueWords));
    const env = new SparseAgreeEnv();
    const trainTasks = Array.from({ length: AGREE_EPISODES }, (_, i) => ({ id: `agree-${i}` }));
    const config = {
      num_turns: 2,
      max_new_tokens: 1,
      temperature: 1,
      top_p: 1,
      top_k: 0,
      early_termination_threshold: null,
      discount: 0.9,
      agent_learning_rate: 5e-3,
      critic_learning_rate: opts.frozenCritic ? 0 : 3e-3,
      num_train_epochs: 20,
      rollout_buffer_size: 2 * AGREE_EPISODES, // one flush per epoch
      train_batch_size: 4,
      update_epochs: 2,
      critic_warmup_items: 3 * AGREE_EPISODES,
      eval_interval: 0,
      logging_steps: 1_000_000,
      seed,
      ...opts.config,
    };
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
    if (opts.measureStart !== true) return { finalReward: value.finalReward, seconds };
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
      return { finalReward: value.finalReward, seconds, startReward: startValue.finalReward, firstTurnKl: kl / agents.length };
    } finally {
      disposeAgents(start);
    }
  } finally {
    disposeAgents(agents);
    disposeCritics(critics);
  }
}
