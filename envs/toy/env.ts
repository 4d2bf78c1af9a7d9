import type { GlobalInfo, LLMDecPOMDP, StepResult } from '../../src/decpomdp/types.js';
import type { RewardProcessor } from '../../src/decpomdp/reward-processor.js';
import { toyFirstWord, toyScore, toyWords, type ToyTask } from './task.js';

/** Options of {@link ToyCoordEnv}. */
export interface ToyCoordOptions {
  /**
   * 1: single-turn, reward = the turn's score. More: sparse, reward 0 until the last turn, which
   * pays the mean score over all turns; from turn 2 on each agent also sees its partner's previous
   * word (`cue red partner rose`). Default 1.
   */
  numTurns?: number;
  /** Applied to the raw reward (e.g. a shift). */
  rewardProcessor?: RewardProcessor;
}

/** State of the toy task (frozen). */
export interface ToyState {
  readonly task: ToyTask;
  readonly turn: number;
  /** First words per played turn, `[turn][agent]` (null: nothing said). */
  readonly words: readonly (readonly (string | null)[])[];
  readonly lastReward: number | null;
  readonly done: boolean;
}

const KNOWN = new Set(toyWords);

/** The two-agent toy coordination task as an LLM Dec-POMDP (see task.ts for the rules). */
export class ToyCoordEnv implements LLMDecPOMDP<ToyTask, ToyState> {
  readonly name: string;
  readonly numAgents = 2;
  readonly horizon: number;
  private readonly processor: RewardProcessor | undefined;

  constructor(options: ToyCoordOptions = {}) {
    const turns = options.numTurns ?? 1;
    if (!Number.isInteger(turns) || turns < 1) throw new Error(`numTurns must be an integer ≥ 1, got ${turns}`);
    this.horizon = turns;
    this.name = turns === 1 ? 'toy-coord' : `toy-coord-${turns}turn`;
    this.processor = options.rewardProcessor;
  }

  initialState(task: ToyTask): ToyState {
    return Object.freeze({ task, turn: 0, words: Object.freeze([]), lastReward: null, done: false });
  }

  observe(state: ToyState, agent: number): string {
    if (state.done) throw new Error(`observe: the episode is over (turn ${state.turn})`);
    if (agent !== 0 && agent !== 1) throw new Error(`observe: agent ${agent} out of range [0, 2)`);
    const base = `cue ${state.task.cue}`;
    if (state.turn === 0) return base;
    const partner = state.words[state.turn - 1][1 - agent];
    // Keep prompts inside the vocabulary: anything that is not a toy word shows as `none`.
    return `${base} partner ${partner !== null && KNOWN.has(partner) ? partner : 'none'}`;
  }

  async step(state: ToyState, jointAction: readonly string[]): Promise<StepResult<ToyState>> {
    if (state.done) throw new Error(`${this.name}: step on a finished episode`);
    if (jointAction.length !== 2) throw new Error(`${this.name}: joint action has ${jointAction.length} completions for 2 agents`);
    const said = Object.freeze(jointAction.map(toyFirstWord));
    const words = Object.freeze([...state.words, said]);
    const turn = state.turn + 1;
    const done = turn >= this.horizon;
    const scores = words.map((w) => toyScore(state.task.cue, w[0], w[1]));
    // Sparse: only the last turn pays, and it pays for every turn.
    const raw = done ? scores.reduce((a, b) => a + b, 0) / scores.length : 0;
    const reward = this.processor ? this.processor(raw) : raw;
    const next: ToyState = Object.freeze({ task: state.task, turn, words, lastReward: reward, done });
    return { reward, next, done, info: { rawReward: raw, words: said, turnScore: scores[scores.length - 1] } };
  }

  globalInfo(state: ToyState): GlobalInfo {
    // The raw maximum is 1; processors are monotone maps (scale/shift), so this is the processed maximum.
    return { turn: state.turn, numTurns: this.horizon, lastReward: state.lastReward, maxReward: this.processor ? this.processor(1) : 1 };
  }
}
