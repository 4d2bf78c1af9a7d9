import type { RewardProcessor } from './reward-processor.js';
import type { JointReward, StagedLLMDecPOMDP } from './staged.js';
import type { AgentHistory, GlobalFeatures, GlobalInfo, JointHistory, StepResult } from './types.js';

/** A value or a promise of it. */
export type Awaitable<T> = T | Promise<T>;

/**
 * A CoMLRL formatter: the prompt agent i sees for a dataset item. At turn 0 `externalPrompt` is
 * undefined; on later turns (without passthrough) the item's `prompt` is the feedback text and
 * `externalPrompt` repeats it.
 */
export type Formatter<Item> = (item: Item, externalPrompt?: string) => string;

/** What a {@link CoMLRLRewardFunc} knows besides the completions. */
export interface RewardContext<Item> {
  /** The dataset item (CoMLRL's `batch_items=[item]`). */
  item: Item;
  /** Each agent's prompt for this turn (CoMLRL passes agent 0's as `prompts`). */
  prompts: readonly string[];
  /** 0-based turn index. */
  turn: number;
}

/** A reward with task details (breakdowns) that end up in {@link StepResult.info}. */
export interface RewardWithInfo {
  reward: number;
  info?: Record<string, unknown>;
}

/**
 * A CoMLRL reward function over per-agent completion lists, `completions[agent][sample]`. The
 * adapter calls it once per joint action with single-element lists and reads element 0 of a list
 * result, as MAGRPO does. Returning {@link RewardWithInfo} (a comlrl addition) passes details on.
 */
export type CoMLRLRewardFunc<Item> = (
  completions: readonly (readonly string[])[],
  context: RewardContext<Item>,
) => Awaitable<number | readonly number[] | RewardWithInfo>;

/** CoMLRL's keyword arguments to `external_transition` (camel-cased), plus the item. */
export interface ExternalTransitionArgs<Item> {
  /** `item.prompt` of the original dataset item ('' when the item has none). */
  prompt: string;
  /** This turn's completion of each agent. */
  agentCompletions: readonly string[];
  numAgents: number;
  /** Each agent's prompts so far, this turn's included. */
  promptHistoryPerAgent: readonly (readonly string[])[];
  /** Each agent's completions so far, this turn's included. */
  responseHistoryPerAgent: readonly (readonly string[])[];
  /** The dataset item (CoMLRL code reaches it through closures or a `prompt` key resolver). */
  item: Item;
  /** This turn's joint reward (comlrl addition; CoMLRL feedback recomputes it when it needs it). */
  reward: JointReward;
}

/** Multi-turn feedback: returns the next prompt of each agent (exactly N strings). */
export type ExternalTransition<Item> = (args: ExternalTransitionArgs<Item>) => Awaitable<readonly string[]>;

/** What a CoMLRL-style task's numeric m_t is computed from, at s_0 and after every step. */
export interface CoMLRLFeatureContext<Item> {
  readonly item: Item;
  /** Turns played so far (0 at s_0). */
  readonly turn: number;
  /** Horizon H. */
  readonly numTurns: number;
  /** Processed rewards r_0 … r_{turn-1}. */
  readonly rewards: readonly number[];
  /** The reward function's raw value of the last turn, null at s_0. */
  readonly lastRawReward: number | null;
  /** The reward function's info of the last turn (`RewardWithInfo.info`: breakdowns), null at s_0 or without one. */
  readonly lastInfo: Readonly<Record<string, unknown>> | null;
}

/**
 * A CoMLRL-style task's numeric m_t (comlrl addition; see {@link GlobalFeatures}): computed once
 * per state from the turn, the rewards and the last reward's info, and stored in the state.
 */
export interface CoMLRLGlobalFeatures<Item> {
  /** Declared length of every vector (≥ 1). */
  readonly size: number;
  /** What each entry is, in order. */
  readonly names?: readonly string[];
  of(context: CoMLRLFeatureContext<Item>): readonly number[];
}

/** Options of {@link fromCoMLRL}. */
export interface CoMLRLTaskOptions<Item> {
  /** Environment name for logs. Default 'comlrl-task'. */
  name?: string;
  numAgents: number;
  /** Horizon H. More than 1 requires `externalTransition`. */
  numTurns: number;
  /**
   * One formatter for all agents or one per agent. Default: the external prompt when given,
   * else `item.prompt`.
   */
  formatters?: Formatter<Item> | readonly Formatter<Item>[];
  rewardFunc: CoMLRLRewardFunc<Item>;
  externalTransition?: ExternalTransition<Item>;
  /**
   * true: the transition's strings are the next prompts verbatim. false (CoMLRL's default): each
   * is put into a copy of the item as `prompt` and sent through the agent's formatter again.
   */
  externalPromptPassthrough?: boolean;
  /** Applied to every raw reward; its output is r_t. */
  rewardProcessor?: RewardProcessor;
  /**
   * Ends the episode early when the processed reward is strictly greater than this. Leave unset
   * for MAGRPO, whose rule looks at the mean of a sibling group (the trainer applies it).
   */
  earlyTerminationThreshold?: number | null;
  /** Largest attainable processed reward per turn, reported in {@link GlobalInfo.maxReward}. */
  maxReward?: number | null;
  /** Numeric m_t for critics that read it (comlrl addition); absent: the env has none. */
  globalFeatures?: CoMLRLGlobalFeatures<Item>;
}

/** One agent's history inside a {@link CoMLRLState}: o_0, a_0, …, o_t (frozen). */
export interface FrozenAgentHistory {
  readonly observations: readonly string[];
  readonly actions: readonly string[];
}

/** The immutable state of a {@link CoMLRLTaskEnv} (a frozen plain object). */
export interface CoMLRLState<Item> {
  /** The dataset item (shared, never mutated by the env). */
  readonly item: Item;
  /** Turns played so far; the index of the turn to play next. */
  readonly turn: number;
  /** o_{i,turn} per agent; empty once the episode is over. */
  readonly prompts: readonly string[];
  /** Per-agent histories; while not done each ends with the pending observation. */
  readonly histories: readonly FrozenAgentHistory[];
  /** Processed rewards r_0 … r_{turn-1}. */
  readonly rewards: readonly number[];
  /** r_{turn-1}, or null at turn 0. */
  readonly lastReward: number | null;
  readonly done: boolean;
  /** Why the episode ended: reached the horizon, or the early-termination threshold fired. */
  readonly endReason: 'horizon' | 'early' | null;
  /** Numeric m_t of this state (the task's `globalFeatures` option); absent without it. */
  readonly features?: readonly number[];
}

function frozenArray<T>(xs: T[]): readonly T[] {
  return Object.freeze(xs);
}

function freezeHistory(observations: string[], actions: string[]): FrozenAgentHistory {
  return Object.freeze({ observations: frozenArray(observations), actions: frozenArray(actions) });
}

function makeState<Item>(fields: CoMLRLState<Item>): CoMLRLState<Item> {
  return Object.freeze({ ...fields });
}

function isRewardWithInfo(v: unknown): v is RewardWithInfo {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && typeof (v as RewardWithInfo).reward === 'number';
}

function itemPrompt(item: unknown): string | undefined {
  if (item !== null && typeof item === 'object' && 'prompt' in item) {
    const p = (item as { prompt: unknown }).prompt;
    if (typeof p === 'string') return p;
  }
  return undefined;
}

function defaultFormatter<Item>(item: Item, externalPrompt?: string): string {
  if (externalPrompt !== undefined) return externalPrompt;
  const p = itemPrompt(item);
  if (p === undefined) throw new Error('default formatter: the item has no string field `prompt`; pass formatters');
  return p;
}

/**
 * An LLM Dec-POMDP built from CoMLRL-style parts (formatters, a reward over per-agent completion
 * lists, an external transition), with CoMLRL's meaning.
 *
 * Deliberate choice: the prompt history passed to the transition holds the prompts the agents
 * actually saw (as CoMLRL's actor-critic trainers record them); CoMLRL's MAGRPO records the raw
 * transition strings instead, which differ only when passthrough is off.
 */
export class CoMLRLTaskEnv<Item extends object> implements StagedLLMDecPOMDP<Item, CoMLRLState<Item>> {
  readonly name: string;
  readonly numAgents: number;
  readonly horizon: number;
  private readonly formatters: readonly Formatter<Item>[];
  private readonly options: CoMLRLTaskOptions<Item>;
  /** Numeric m_t (the `globalFeatures` option), read from the state. */
  readonly globalFeatures?: GlobalFeatures<CoMLRLState<Item>>;

  constructor(options: CoMLRLTaskOptions<Item>) {
    const { numAgents, numTurns } = options;
    if (!Number.isInteger(numAgents) || numAgents < 1) throw new Error(`numAgents must be an integer ≥ 1, got ${numAgents}`);
    if (!Number.isInteger(numTurns) || numTurns < 1) throw new Error(`numTurns must be an integer ≥ 1, got ${numTurns}`);
    if (numTurns > 1 && options.externalTransition === undefined) {
      throw new Error(`numTurns is ${numTurns}: a multi-turn task needs externalTransition`);
    }
    const f = options.formatters;
    let formatters: readonly Formatter<Item>[];
    if (f === undefined) formatters = Array.from({ length: numAgents }, () => defaultFormatter<Item>);
    else if (typeof f === 'function') formatters = Array.from({ length: numAgents }, () => f);
    else {
      if (f.length !== numAgents) throw new Error(`formatters: ${f.length} given for numAgents ${numAgents}`);
      formatters = [...f];
    }
    this.name = options.name ?? 'comlrl-task';
    this.numAgents = numAgents;
    this.horizon = numTurns;
    this.formatters = formatters;
    this.options = options;
    const features = options.globalFeatures;
    if (features) {
      this.globalFeatures = {
        size: features.size,
        ...(features.names ? { names: features.names } : {}),
        of: (state) => {
          if (state.features === undefined) throw new Error(`${this.name}: the state has no global features (made by another env?)`);
          return state.features;
        },
      };
    }
  }

  /** The `features` field of a new state: the option's vector for it, or nothing without the option. */
  private featuresOf(context: CoMLRLFeatureContext<Item>): { features?: readonly number[] } {
    const f = this.options.globalFeatures;
    return f ? { features: Object.freeze([...f.of(context)]) } : {};
  }

  initialState(item: Item): CoMLRLState<Item> {
    const prompts = this.formatters.map((fmt, i) => this.checkPrompt(fmt(item), i, 0));
    return makeState({
      item,
      turn: 0,
      prompts: frozenArray(prompts),
      histories: frozenArray(prompts.map((p) => freezeHistory([p], []))),
      rewards: frozenArray([]),
      lastReward: null,
      done: false,
      endReason: null,
      ...this.featuresOf({ item, turn: 0, numTurns: this.horizon, rewards: [], lastRawReward: null, lastInfo: null }),
    });
  }

  observe(state: CoMLRLState<Item>, agent: number): string {
    if (state.done) throw new Error(`observe: the episode is over (turn ${state.turn})`);
    if (!Number.isInteger(agent) || agent < 0 || agent >= this.numAgents) {
      throw new Error(`observe: agent ${agent} out of range [0, ${this.numAgents})`);
    }
    return state.prompts[agent];
  }

  globalInfo(state: CoMLRLState<Item>): GlobalInfo {
    return { turn: state.turn, numTurns: this.horizon, lastReward: state.lastReward, maxReward: this.options.maxReward ?? null };
  }

  async step(state: CoMLRLState<Item>, jointAction: readonly string[]): Promise<StepResult<CoMLRLState<Item>>> {
    return this.transition(state, jointAction, await this.rewardOf(state, jointAction));
  }

  async rewardOf(state: CoMLRLState<Item>, jointAction: readonly string[]): Promise<JointReward> {
    this.checkAction(state, jointAction);
    const value = await this.options.rewardFunc(
      jointAction.map((a) => [a]),
      { item: state.item, prompts: state.prompts, turn: state.turn },
    );
    const raw = typeof value === 'number' ? value : isRewardWithInfo(value) ? value.reward : value[0];
    if (typeof raw !== 'number' || !Number.isFinite(raw)) {
      throw new Error(`${this.name}: the reward function returned ${String(raw)} at turn ${state.turn} (need a finite number)`);
    }
    const reward = this.options.rewardProcessor ? this.options.rewardProcessor(raw) : raw;
    if (!Number.isFinite(reward)) throw new Error(`${this.name}: the reward processor returned ${reward} for raw reward ${raw}`);
    return isRewardWithInfo(value) && value.info !== undefined ? { raw, reward, info: value.info } : { raw, reward };
  }

  async transition(
    state: CoMLRLState<Item>,
    jointAction: readonly string[],
    joint: JointReward,
  ): Promise<StepResult<CoMLRLState<Item>>> {
    const { raw, reward } = joint;
    this.checkAction(state, jointAction);
    const turn = state.turn + 1;
    const threshold = this.options.earlyTerminationThreshold;
    const early = turn < this.horizon && threshold !== undefined && threshold !== null && reward > threshold;
    const done = turn >= this.horizon || early;
    const rewards = frozenArray([...state.rewards, reward]);
    const info: Record<string, unknown> = { ...joint.info, rawReward: raw, turn: state.turn, earlyTerminated: early };
    const acted = state.histories.map((h, i) => [...h.actions, jointAction[i]]);
    const features = this.featuresOf({ item: state.item, turn, numTurns: this.horizon, rewards, lastRawReward: raw, lastInfo: joint.info ?? null });

    if (done) {
      const next = makeState({
        item: state.item,
        turn,
        prompts: frozenArray([]),
        histories: frozenArray(state.histories.map((h, i) => freezeHistory([...h.observations], acted[i]))),
        rewards,
        lastReward: reward,
        done: true,
        endReason: early ? 'early' : 'horizon',
        ...features,
      });
      return { reward, next, done: true, info };
    }

    const transitionFn = this.options.externalTransition;
    if (transitionFn === undefined) throw new Error(`${this.name}: no externalTransition for turn ${turn}`);
    const external = await transitionFn({
      prompt: itemPrompt(state.item) ?? '',
      agentCompletions: [...jointAction],
      numAgents: this.numAgents,
      promptHistoryPerAgent: state.histories.map((h) => [...h.observations]),
      responseHistoryPerAgent: acted.map((a) => [...a]),
      item: state.item,
      reward: joint,
    });
    if (!Array.isArray(external) || external.length !== this.numAgents || external.some((s) => typeof s !== 'string')) {
      throw new Error(`${this.name}: externalTransition must return ${this.numAgents} strings (turn ${turn})`);
    }
    const prompts = external.map((text, i) => {
      if (this.options.externalPromptPassthrough) return text;
      // CoMLRL: a copy of the item with `prompt` replaced, formatted again with the external prompt.
      const copy = { ...state.item, prompt: text } as Item;
      return this.checkPrompt(this.formatters[i](copy, text), i, turn);
    });
    info.externalPrompts = [...external];
    const next = makeState({
      item: state.item,
      turn,
      prompts: frozenArray(prompts),
      histories: frozenArray(state.histories.map((h, i) => freezeHistory([...h.observations, prompts[i]], acted[i]))),
      rewards,
      lastReward: reward,
      done: false,
      endReason: null,
      ...features,
    });
    return { reward, next, done: false, info };
  }

  /** h_{i,t} of a state as a plain (mutable copy) {@link AgentHistory}. */
  agentHistory(state: CoMLRLState<Item>, agent: number): AgentHistory {
    const h = state.histories[agent];
    return { observations: [...h.observations], actions: [...h.actions] };
  }

  /** The joint history of a state (copies). */
  jointHistory(state: CoMLRLState<Item>): JointHistory {
    return { agents: state.histories.map((_, i) => this.agentHistory(state, i)), rewards: [...state.rewards] };
  }

  private checkAction(state: CoMLRLState<Item>, jointAction: readonly string[]): void {
    if (state.done) throw new Error(`${this.name}: step on a finished episode (turn ${state.turn})`);
    if (jointAction.length !== this.numAgents) {
      throw new Error(`${this.name}: joint action has ${jointAction.length} completions for ${this.numAgents} agents`);
    }
  }

  private checkPrompt(prompt: unknown, agent: number, turn: number): string {
    if (typeof prompt !== 'string') throw new Error(`${this.name}: formatter of agent ${agent} returned ${typeof prompt} at turn ${turn} (need a string)`);
    return prompt;
  }
}

/** Builds a {@link CoMLRLTaskEnv}: CoMLRL users bring their formatters, reward and transition unchanged in meaning. */
export function fromCoMLRL<Item extends object>(options: CoMLRLTaskOptions<Item>): CoMLRLTaskEnv<Item> {
  return new CoMLRLTaskEnv(options);
}
