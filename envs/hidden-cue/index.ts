/**
 * Hidden-cue: a two-agent toy task family with real partial observability and a controllable
 * horizon, small enough for tiny random-init models (word-level vocabulary of 9 words).
 *
 * Each task deals a private cue to each agent: c_0, c_1 ∈ {red, blue}, drawn independently. Agent i
 * sees only its own cue (`cue red`); from turn 2 on it also sees the word its partner said on the
 * previous turn (`cue red partner sky`). Each cue has two answers, in two slots:
 *
 *   red → apple (slot 0), rose (slot 1)      blue → sky (slot 0), sea (slot 1)
 *
 * The words said on the FIRST turn are the agents' commitments; the score of a task is
 *   0.25·ok_0 + 0.25·ok_1 + 0.5·[ok_0 ∧ ok_1 ∧ slot(w_0) = slot(w_1)],   ok_i = w_i answers c_i,
 * so the agents must each answer their own cue and agree on a slot (a convention: two equilibria).
 * Later turns are waiting turns: what is said there does not count.
 *
 * - Dense, H = 1: the score is the reward of the single turn.
 * - Sparse, H ≥ 2: every turn pays 0 except the last, which pays the score of the first turn's
 *   words. Credit for the first turn must travel back H − 1 steps through the critic: with a
 *   frozen critic the first turn gets no signal at all, which is what the learning tests check.
 *
 * Why the centralized critic's information matters: the reward depends on both cues, but agent i's
 * own history never shows its partner's cue (it sees the partner's word, not whether that word
 * answers the partner's cue). A centralized critic reads both histories and can value h_t exactly;
 * a decentralized one must average over the cue it cannot see.
 */
import type { GlobalInfo, LLMDecPOMDP, StepResult } from '../../src/decpomdp/types.js';

/** The cues (each agent's private information). */
export const hiddenCueCues = ['red', 'blue'] as const;
export type HiddenCue = (typeof hiddenCueCues)[number];

/** Answers per cue, by slot. */
export const hiddenCueAnswers: Readonly<Record<HiddenCue, readonly [string, string]>> = {
  red: ['apple', 'rose'],
  blue: ['sky', 'sea'],
};

/** Every word of prompts and answers (9), for a word-level tiny tokenizer. */
export const hiddenCueWords: readonly string[] = [
  'cue',
  'partner',
  'none',
  ...hiddenCueCues,
  ...hiddenCueCues.flatMap((c) => hiddenCueAnswers[c]),
];

/** One task: the two private cues. */
export interface HiddenCueTask {
  readonly id: string;
  readonly cues: readonly [HiddenCue, HiddenCue];
}

/** `n` tasks cycling through the four cue pairs (red/red, red/blue, blue/red, blue/blue, …). */
export function hiddenCueTasks(n: number, prefix = 'hc'): HiddenCueTask[] {
  return Array.from({ length: n }, (_, i) => {
    const pair = i % 4;
    return { id: `${prefix}-${i}`, cues: [hiddenCueCues[pair >> 1], hiddenCueCues[pair & 1]] as const };
  });
}

/** The word an agent said: the first whitespace-separated piece of its completion, lowercased. */
export function hiddenCueWord(completion: string): string | null {
  const first = completion.split(/\s+/).find((w) => w !== '');
  return first === undefined ? null : first.toLowerCase();
}

/** Score of the committed words (module comment). Range [0, 1]. */
export function hiddenCueScore(cues: readonly [HiddenCue, HiddenCue], words: readonly (string | null)[]): number {
  const slot = (i: number) => (words[i] === null ? -1 : hiddenCueAnswers[cues[i]].indexOf(words[i] as string));
  const s0 = slot(0);
  const s1 = slot(1);
  return (s0 >= 0 ? 0.25 : 0) + (s1 >= 0 ? 0.25 : 0) + (s0 >= 0 && s0 === s1 ? 0.5 : 0);
}

/**
 * Expected score of a uniform random policy over the W = 9 words: each agent answers its cue with
 * probability 2/W, and both answer in the same slot with probability 2/W² (two slots, 1/W per word
 * and agent): E = 2·0.25·2/9 + 0.5·2/81 = 1/9 + 1/81 = 10/81 ≈ 0.1235.
 */
export const hiddenCueRandomBaseline = 10 / 81;

/** Options of {@link HiddenCueEnv}. */
export interface HiddenCueOptions {
  /** Horizon H: 1 = dense, ≥ 2 = sparse (module comment). Default 1. */
  numTurns?: number;
}

/** State of a hidden-cue episode (frozen). */
export interface HiddenCueState {
  readonly task: HiddenCueTask;
  readonly turn: number;
  /** The words said per played turn, `[turn][agent]`. */
  readonly words: readonly (readonly (string | null)[])[];
  readonly lastReward: number | null;
  readonly done: boolean;
}

const KNOWN = new Set(hiddenCueWords);

/** The hidden-cue task family as an LLM Dec-POMDP (module comment). */
export class HiddenCueEnv implements LLMDecPOMDP<HiddenCueTask, HiddenCueState> {
  readonly name: string;
  readonly numAgents = 2;
  readonly horizon: number;

  constructor(options: HiddenCueOptions = {}) {
    const h = options.numTurns ?? 1;
    if (!Number.isInteger(h) || h < 1) throw new Error(`hidden-cue: numTurns must be an integer >= 1, got ${h}`);
    this.horizon = h;
    this.name = h === 1 ? 'hidden-cue-dense' : `hidden-cue-sparse-${h}`;
  }

  initialState(task: HiddenCueTask): HiddenCueState {
    return Object.freeze({ task, turn: 0, words: Object.freeze([]), lastReward: null, done: false });
  }

  observe(state: HiddenCueState, agent: number): string {
    if (state.done) throw new Error(`${this.name}: observe after the episode ended (turn ${state.turn})`);
    if (agent !== 0 && agent !== 1) throw new Error(`${this.name}: agent ${agent} out of range [0, 2)`);
    const own = `cue ${state.task.cues[agent]}`;
    if (state.turn === 0) return own;
    const said = state.words[state.turn - 1][1 - agent];
    // Prompts stay inside the vocabulary: anything else shows as `none`.
    return `${own} partner ${said !== null && KNOWN.has(said) ? said : 'none'}`;
  }

  async step(state: HiddenCueState, jointAction: readonly string[]): Promise<StepResult<HiddenCueState>> {
    if (state.done) throw new Error(`${this.name}: step on a finished episode`);
    if (jointAction.length !== 2) throw new Error(`${this.name}: joint action has ${jointAction.length} completions for 2 agents`);
    const said = Object.freeze(jointAction.map(hiddenCueWord));
    const words = Object.freeze([...state.words, said]);
    const turn = state.turn + 1;
    const done = turn >= this.horizon;
    const score = hiddenCueScore(state.task.cues, words[0]);
    const reward = done ? score : 0;
    const next: HiddenCueState = Object.freeze({ task: state.task, turn, words, lastReward: reward, done });
    return { reward, next, done, info: { committed: words[0], score } };
  }

  globalInfo(state: HiddenCueState): GlobalInfo {
    return { turn: state.turn, numTurns: this.horizon, lastReward: state.lastReward, maxReward: 1 };
  }
}
