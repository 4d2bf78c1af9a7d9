/**
 * What differs between CoLLM-DC and CoLLM-CC: which critics there are, what each reads, whose
 * advantage each gives, how each steps and where it is saved. {@link CoLLMTrainer} runs Algorithm 1
 * over any such set; decentralized.ts and centralized.ts hold the three kinds the papers use
 * (a separate critic LM per agent, a value head on each actor's backbone, one centralized critic).
 */
import type { JointTransition } from '../../src/buffer/replay.js';
import type { ValueModel } from '../../src/critic/value-model.js';
import type { GlobalInfo } from '../../src/decpomdp/types.js';
import type { CriticPart } from './rollout.js';

/** One joint step as critics read it: every agent's observation and action at turn t. */
export interface CriticView {
  /** m_t. */
  readonly globalInfo: GlobalInfo;
  /** o_{i,t} per agent. */
  readonly observations: readonly string[];
  /** o_{i,t} encoded for agent i (the env's rendering applied); computed on first use where costly. */
  promptIds(agent: number): readonly number[];
  /** a_{i,t} per agent (text). */
  readonly actions: readonly string[];
  /** a_{i,t} per agent (token ids). */
  readonly actionIds: readonly (readonly number[])[];
}

/** One critic of a set. */
export interface CriticSlot {
  /** Its value model (an LM + head, or a head on an actor's backbone). */
  readonly model: ValueModel;
  /** The agent whose own history it reads (decentralized), or null: the joint history (centralized). */
  readonly owner: number | null;
  /**
   * A head on its owner's backbone: the actor's AdamW trains it too, and its loss joins the
   * actor's in one step (during a warm-up it steps alone). Otherwise it has its own AdamW.
   */
  readonly sharesActor: boolean;
}

/** Where a set's critics live in a saved run, next to `dir/agent_i/`. */
export interface CriticLayout {
  /** Critic LM directories (with tokenizer), in slot order; empty for heads on the actors. */
  readonly critics: string[];
  /** Directories holding each slot's `value_head.*`, in slot order. */
  readonly heads: string[];
}

/** The critics of a CoLLM trainer (see the module comment). */
export interface CriticSet {
  /** `CoLLM-DC` / `CoLLM-CC`: labels of errors and logs. */
  readonly label: string;
  readonly slots: readonly CriticSlot[];
  /** The slot whose advantage agent i's actor trains on. */
  slotOf(agent: number): number;
  /** Slot c's input ids at one joint step, after the earlier steps `history` (empty unless `critic_history: full`). */
  input(slot: number, step: CriticView, history: readonly CriticView[]): number[];
  /** Slot c's part of a buffered transition. */
  partOf(transition: JointTransition, slot: number): CriticPart;
  /** A transition's critic data from each slot's part: per agent, and the joint one. */
  transitionParts(parts: readonly CriticPart[], numAgents: number): { agents: CriticPart[]; joint: CriticPart | null };
  /** The critic directories of a run saved under `dir` (the layout {@link CriticSet.save} writes). */
  layout(dir: string): CriticLayout;
  /** Writes every critic under `dir` (the agents are saved by the trainer); returns the top-level directories it added. */
  save(dir: string): Promise<string[]>;
}
