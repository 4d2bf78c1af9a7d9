/**
 * The actor-critic replay buffer: joint transitions (h_t, m_t, a_t, r_t, o_{t+1}, m_{t+1}) with the
 * behaviour log-probs and the values stored at rollout time.
 *
 * Policy between flushes: **nothing is kept**. A flush drains every transition; the buffer is
 * on-policy data for the actors that produced it (the stored behaviour log-probs and values are
 * only meaningful for those weights), so replaying it after the actors moved on would need
 * off-policy corrections the method does not make. Within one flush the same data is reused for
 * `update_epochs` passes, which the importance ratio and its clipping account for; each
 * transition carries the critic inputs of h_t and h_{t+1}, so every pass can take its targets
 * from the current critic. Whatever is
 * left when training ends is flushed by the trainer (CoMLRL's end-of-epoch flush).
 */
import type { GlobalInfo } from '../decpomdp/types.js';
import type { Rng } from '../util/rng.js';
import { groupItemsByTurn } from '../util/stats.js';

/** One agent's part of a joint transition. */
export interface AgentTransition {
  /** The text the actor read (h_{i,t} as rendered for the model). */
  readonly prompt: string;
  /** o_{i,t}: the observation the environment gave. */
  readonly observation: string;
  /** Actor input ids of the prompt. */
  readonly promptIds: readonly number[];
  /** a_{i,t} as generated ids (EOS included when generated, never padding). */
  readonly completionIds: readonly number[];
  /** a_{i,t} decoded. */
  readonly action: string;
  /** log π_old(a_{i,t} | h_{i,t}): the summed teacher-forced log-prob under the behaviour weights. */
  readonly behaviourLogProb: number;
  /** The actor's update count when it acted; the ratio is exactly 1 while it is unchanged. */
  readonly policyVersion: number;
  /** This agent's critic input ids at h_{i,t} (decentralized critic or shared head); empty for CC. */
  readonly criticIds: readonly number[];
  /**
   * The critic input at h_{i,t+1} (for Q with a_{i,t+1}), what the target bootstraps from; null
   * after the episode's last step (no bootstrap) and for CC. Kept so that an update can recompute
   * the target with its current critic even when the episode's next step is in another flush.
   */
  readonly nextCriticIds: readonly number[] | null;
  /** Numeric m_t the critic's head reads beside `criticIds` (config `critic_global_features`); absent when off and for CC. */
  readonly criticFeatures?: readonly number[];
  /** Numeric m_{t+1} beside `nextCriticIds` (null where that is null); absent when off and for CC. */
  readonly nextCriticFeatures?: readonly number[] | null;
  /** The critic value at rollout time (V(h_{i,t}) or Q; for CC the joint value). */
  readonly value: number;
  /**
   * The target y_{i,t} from the rollout-time values over the whole episode (what `recompute_targets:
   * false` trains on): the one-step TD target, or the return `critic_target` names.
   */
  readonly target: number;
  /** Discounted Monte-Carlo return G_t (logging only). */
  readonly return: number;
  /** KL of a_{i,t} to the agent's reference policy, when the trainer measures it (logging; the penalty is already in the reward). */
  readonly referenceKl?: number;
  /** The reference policy's log-prob of each token of a_{i,t} (the actor's KL loss term, `kl_mode: loss`). */
  readonly referenceLogProbs?: readonly number[];
}

/** The centralized critic's part of a joint transition (CoLLM-CC). */
export interface JointCriticTransition {
  /** Centralized critic input ids (joint history, m_t, and for Q the joint action). */
  readonly criticIds: readonly number[];
  /** The input at h_{t+1} (for Q with a_{t+1}); null after the episode's last step. */
  readonly nextCriticIds: readonly number[] | null;
  /** Numeric m_t the head reads beside `criticIds` (config `critic_global_features`); absent when off. */
  readonly criticFeatures?: readonly number[];
  /** Numeric m_{t+1} beside `nextCriticIds` (null where that is null); absent when off. */
  readonly nextCriticFeatures?: readonly number[] | null;
  /** V(h_t) or Q(h_t, a_t) at rollout time. */
  readonly value: number;
  /** y_t = r_t + γ·V(h_{t+1}) from the rollout-time values (no bootstrap at the end), or the return `critic_target` names. */
  readonly target: number;
}

/** One joint step of one episode. */
export interface JointTransition {
  /** Index of the episode (rollout) it came from. */
  readonly episode: number;
  /** 0-based turn t. */
  readonly turn: number;
  /** Which of the K joint samples (single-turn with num_generations K); 0 otherwise. */
  readonly generation: number;
  /** m_t. */
  readonly globalInfo: GlobalInfo;
  /** m_{t+1}, null after the last step. */
  readonly nextGlobalInfo: GlobalInfo | null;
  /** r_t (the joint reward). */
  readonly reward: number;
  /** True when the episode ended with this step (horizon or early termination). */
  readonly done: boolean;
  /** o_{i,t+1} of every agent, null after the last step. */
  readonly nextObservations: readonly string[] | null;
  /** Per-agent parts, in agent order. */
  readonly agents: readonly AgentTransition[];
  /** The centralized critic's part, or null (CoLLM-DC). */
  readonly joint: JointCriticTransition | null;
}

/** A per-agent sample view of a joint transition (what a decentralized learner sees). */
export interface AgentSample {
  readonly agent: number;
  readonly turn: number;
  readonly transition: JointTransition;
  readonly step: AgentTransition;
}

/** One agent's view of a list of joint transitions, same order. */
export function agentView(transitions: readonly JointTransition[], agent: number): AgentSample[] {
  return transitions.map((tr) => {
    const step = tr.agents[agent];
    if (!step) throw new Error(`agentView: transition of episode ${tr.episode} turn ${tr.turn} has no agent ${agent}`);
    return { agent, turn: tr.turn, transition: tr, step };
  });
}

/**
 * A bounded buffer of joint transitions. `push` reports when it is full; `drain` empties it (see
 * the module comment for what is kept between flushes: nothing).
 */
export class ReplayBuffer {
  private items: JointTransition[] = [];

  /** @param capacity number of joint transitions that triggers a flush (CoMLRL's `rollout_buffer_size`). */
  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error(`ReplayBuffer: capacity must be an integer >= 1 (got ${capacity})`);
  }

  /** Number of stored transitions. */
  get size(): number {
    return this.items.length;
  }

  /** Whether the buffer holds `capacity` transitions. */
  get full(): boolean {
    return this.items.length >= this.capacity;
  }

  /** Adds one transition; returns true when the buffer is now full. Refuses to overfill. */
  push(transition: JointTransition): boolean {
    if (this.full) throw new Error(`ReplayBuffer: full (${this.capacity} transitions); drain it before pushing more`);
    this.items.push(transition);
    return this.full;
  }

  /** The stored transitions, oldest first (read-only view). */
  contents(): readonly JointTransition[] {
    return this.items;
  }

  /** One agent's view of the stored transitions. */
  agentView(agent: number): AgentSample[] {
    return agentView(this.items, agent);
  }

  /** Removes and returns every stored transition. */
  drain(): JointTransition[] {
    const out = this.items;
    this.items = [];
    return out;
  }
}

/** One minibatch in an update plan: indices into the drained transitions. */
export interface PlannedMinibatch {
  /** 0-based update epoch (pass over the buffer). */
  readonly epoch: number;
  /** The turn group the minibatch belongs to. */
  readonly turn: number;
  /** Indices into the transition list, in shuffled order. */
  readonly indices: readonly number[];
}

/**
 * The order of updates for one flush: for each update epoch, for each turn group in ascending
 * turn order, the group's indices shuffled by `rng` and cut into minibatches of `batchSize` (the
 * last one may be smaller). Each epoch reshuffles. With one epoch this is CoMLRL's order.
 */
export function planMinibatches(
  turns: readonly number[],
  options: { batchSize: number; epochs: number; rng: Rng },
): PlannedMinibatch[] {
  const { batchSize, epochs, rng } = options;
  if (!Number.isInteger(batchSize) || batchSize < 1) throw new Error(`planMinibatches: batchSize must be an integer >= 1 (got ${batchSize})`);
  if (!Number.isInteger(epochs) || epochs < 1) throw new Error(`planMinibatches: epochs must be an integer >= 1 (got ${epochs})`);
  const groups = groupByTurn(turns);
  const plan: PlannedMinibatch[] = [];
  for (let epoch = 0; epoch < epochs; epoch++) {
    for (const [turn, members] of groups) {
      const order = rng.shuffle([...members]);
      for (let i = 0; i < order.length; i += batchSize) {
        plan.push({ epoch, turn, indices: order.slice(i, i + batchSize) });
      }
    }
  }
  return plan;
}

/** Indices grouped by turn, groups in ascending turn order, indices ascending within a group. */
export function groupByTurn(turns: readonly number[]): Array<[number, number[]]> {
  return groupItemsByTurn(turns.map((_, i) => i), (i) => turns[i]).map((g): [number, number[]] => [g.turn, g.items]);
}
