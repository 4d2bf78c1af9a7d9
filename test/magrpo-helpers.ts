/** Shared setup of the MAGRPO / trainer-common tests: real tiny checkpoints in temp dirs; the learning tests' mutation and multi-turn task. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Agent, ChatFormat } from '../src/decpomdp/agent.js';
import { createTinyModel, type TinyModelOptions } from '../src/model/tiny.js';
import { loadCausalLM } from '../src/model/load.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import type { GlobalInfo, LLMDecPOMDP, StepResult } from '../src/decpomdp/types.js';
import { ToyCoordEnv, toyFirstWord, toyScore, toyWords, type ToyState, type ToyTask } from '../envs/toy/index.js';
import { MAGRPOTrainer, type RolloutNode } from '../trainers/magrpo/trainer.js';

/** One tiny agent to build. */
export interface TinyAgentSpec {
  name: string;
  arch: TinyModelOptions['arch'];
  seed: number;
  tokenizer?: 'bpe' | 'word';
  words?: readonly string[];
  hiddenSize?: number;
  numLayers?: number;
  chat?: ChatFormat | false;
}

/** A fresh temp dir and its remover. */
export async function tempDir(prefix: string): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), `comlrl-${prefix}-`));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** Writes each checkpoint under `dir/<name>` and loads it as an Agent (call initBackend first). */
export async function tinyAgents(dir: string, specs: readonly TinyAgentSpec[]): Promise<Agent[]> {
  const agents: Agent[] = [];
  for (const s of specs) {
    const d = join(dir, s.name);
    await createTinyModel({
      dir: d,
      arch: s.arch,
      seed: s.seed,
      tokenizer: s.tokenizer ?? 'word',
      ...(s.words ? { words: [...s.words] } : {}),
      hiddenSize: s.hiddenSize ?? 32,
      numLayers: s.numLayers ?? 1,
    });
    agents.push({ name: s.name, model: await loadCausalLM(d), tokenizer: await loadTokenizer(d), chat: s.chat ?? false });
  }
  return agents;
}

/** Frees the agents' weights. */
export function disposeAgents(agents: readonly Agent[]): void {
  for (const a of agents) a.model.dispose();
}

/** The toy env with every reward negated: the mutation's training signal. */
export class NegatedToyEnv implements LLMDecPOMDP<ToyTask, ToyState> {
  private readonly inner = new ToyCoordEnv();
  readonly name = this.inner.name;
  readonly numAgents = this.inner.numAgents;
  readonly horizon = this.inner.horizon;
  initialState(task: ToyTask): ToyState {
    return this.inner.initialState(task);
  }
  observe(state: ToyState, agent: number): string {
    return this.inner.observe(state, agent);
  }
  async step(state: ToyState, joint: readonly string[]): Promise<StepResult<ToyState>> {
    const r = await this.inner.step(state, joint);
    return { ...r, reward: -r.reward };
  }
  globalInfo(state: ToyState) {
    return this.inner.globalInfo(state);
  }
}

/** Every node of a rollout tree with its returns negated. */
export function negatedReturns<S>(node: RolloutNode<S>): RolloutNode<S> {
  return { ...node, returns: node.returns.map((r) => -r), children: node.children.map((c) => (c === null ? null : negatedReturns(c))) };
}

/**
 * The learning tests' mutation of MAGRPO: every advantage sign-flipped. The tree is expanded with
 * the true rewards (early termination included), then its returns are negated before the samples
 * are taken from it; the group-relative advantage of −R is −A in every mode that subtracts a
 * baseline (and under the z-score), so each update pushes the other way.
 */
export class SignFlippedMAGRPOTrainer<T, S> extends MAGRPOTrainer<T, S> {
  override async rolloutTree(task: T): Promise<RolloutNode<S>> {
    return negatedReturns(await super.rolloutTree(task));
  }
}

/** State of a {@link RetryEnv} episode (frozen). */
export interface RetryState {
  readonly task: ToyTask;
  readonly turn: number;
  /** The words said on the previous turn (null before the first). */
  readonly previous: readonly (string | null)[] | null;
  readonly lastReward: number | null;
}

const TOY_KNOWN = new Set(toyWords);

/**
 * The multi-turn MAGRPO learning test's task: the toy coordination game (envs/toy: a cue, two
 * answers each, 0.25 per agent that answers, 0.5 more when both say the same one) played for up
 * to H = 2 turns, every turn paid its own score — a failed first turn can be made up on the second,
 * discounted, and early termination ends a good one. Turn 1 shows `cue <c>`; turn 2 agent i sees
 * `partner <w_other> cue <c>` (the cue last, where a tiny policy reads it on both turns).
 */
export class RetryEnv implements LLMDecPOMDP<ToyTask, RetryState> {
  readonly name = 'toy-retry';
  readonly numAgents = 2;
  readonly horizon = 2;

  initialState(task: ToyTask): RetryState {
    return Object.freeze({ task, turn: 0, previous: null, lastReward: null });
  }

  observe(state: RetryState, agent: number): string {
    const cue = `cue ${state.task.cue}`;
    if (state.previous === null) return cue;
    const w = state.previous[1 - agent];
    return `partner ${w !== null && TOY_KNOWN.has(w) ? w : 'none'} ${cue}`;
  }

  async step(state: RetryState, jointAction: readonly string[]): Promise<StepResult<RetryState>> {
    if (state.turn >= this.horizon) throw new Error(`${this.name}: step on a finished episode`);
    const said = Object.freeze(jointAction.map(toyFirstWord));
    const reward = toyScore(state.task.cue, said[0], said[1]);
    const turn = state.turn + 1;
    return { reward, next: Object.freeze({ task: state.task, turn, previous: said, lastReward: reward }), done: turn >= this.horizon, info: {} };
  }

  globalInfo(state: RetryState): GlobalInfo {
    return { turn: state.turn, numTurns: this.horizon, lastReward: state.lastReward, maxReward: 1 };
  }
}
