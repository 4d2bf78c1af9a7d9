/**
 * Hidden-cue relay: the hidden-cue task (./index.ts) made so that every turn counts, for the
 * CoLLM paper's comparison in miniature (`npm run bench -- paper`).
 *
 * Each turn deals each agent a fresh private cue (fixed per task and turn). Agent i sees
 * `cue <its cue>`, from turn 2 on followed by `partner <the word its partner said last turn>`.
 * Every turn's words are scored, with the same 9 words and two slots as hidden-cue:
 *
 *   s_t = 0.25·ok_0 + 0.25·ok_1 + 0.5·[ok_0 ∧ ok_1 ∧ slot(w_0) = slot(w_1) = agreed],
 *
 * where "agreed" is the slot of the first turn whose bonus was paid (before that, any common
 * slot pays and becomes the agreed one). So the agents must answer their cue in the agreed slot
 * every turn, a convention that is set once and then has to be kept.
 *
 * - `sparse`: every turn pays 0 except the last, which pays the mean per-turn score (1/H)·Σ s_t.
 * - `dense`: every turn pays s_t / H (as HouseBuild pays each turn), so the undiscounted return
 *   equals the sparse payment and the two variants share one scale.
 *
 * m_t (`globalInfo`) carries the task's progress as the paper's global information does (§5.2):
 * `hits <turns whose bonus was paid>; score <Σ s so far>; slot <agreed slot or none>`.
 *
 * The same m_t as numbers (`globalFeatures`, the paper's §4.1 numerical m_t; see
 * {@link relayFeatures}): `turn/H` (turns played), `score/H` (Σ s so far over H: the sparse
 * payment earned so far), `hits/H` (bonus turns so far over H), `slot` (the agreed slot, signed:
 * 0 before any bonus, −1 for slot 0, +1 for slot 1).
 */
import type { GlobalFeatures, GlobalInfo, LLMDecPOMDP, StepResult } from '../../src/decpomdp/types.js';
import { createRng } from '../../src/util/rng.js';
import { formatCriticNumber } from '../../src/critic/inputs.js';
import { hiddenCueAnswers, hiddenCueCues, hiddenCueWord, hiddenCueWords, type HiddenCue } from './index.js';

/** How a relay episode pays (module comment). */
export const RELAY_PAYMENTS = ['sparse', 'dense'] as const;
/** See {@link RELAY_PAYMENTS}. */
export type RelayPayment = (typeof RELAY_PAYMENTS)[number];

/** One relay task: the two private cues of every turn. */
export interface RelayTask {
  readonly id: string;
  /** `[turn][agent]`; at least as many turns as the env's horizon. */
  readonly cues: readonly (readonly [HiddenCue, HiddenCue])[];
}

/** Words of the relay's m_t progress that a word-level critic vocabulary needs besides digits. */
export const RELAY_PROGRESS_WORDS: readonly string[] = ['hits', 'score', 'slot', 'none', ';', '.'];

/**
 * `n` tasks of `horizon` turns. Turn 1 cycles through the four cue pairs (as hiddenCueTasks
 * does), later turns' pairs are drawn from a stream seeded by the task id, so the set is fixed.
 */
export function relayTasks(n: number, horizon: number, prefix = 'relay'): RelayTask[] {
  return Array.from({ length: n }, (_, i) => {
    const id = `${prefix}-${i}`;
    const rng = createRng(id);
    const cues = Array.from({ length: horizon }, (_, t) => {
      const pair = t === 0 ? i % 4 : rng.int(4);
      return [hiddenCueCues[pair >> 1], hiddenCueCues[pair & 1]] as const;
    });
    return { id, cues };
  });
}

/** The slot of `word` among `cue`'s answers, or −1 (also for no word). */
function slotOf(cue: HiddenCue, word: string | null): number {
  return word === null ? -1 : hiddenCueAnswers[cue].indexOf(word);
}

/** One turn's score and the agreed slot after it (module comment). `agreed`: null before any bonus. */
export function relayTurnScore(
  cues: readonly [HiddenCue, HiddenCue],
  words: readonly (string | null)[],
  agreed: number | null,
): { score: number; bonus: boolean; agreed: number | null } {
  const s0 = slotOf(cues[0], words[0] ?? null);
  const s1 = slotOf(cues[1], words[1] ?? null);
  const bonus = s0 >= 0 && s0 === s1 && (agreed === null || s0 === agreed);
  return { score: (s0 >= 0 ? 0.25 : 0) + (s1 >= 0 ? 0.25 : 0) + (bonus ? 0.5 : 0), bonus, agreed: agreed ?? (bonus ? s0 : null) };
}

/** Options of {@link HiddenCueRelayEnv}. */
export interface RelayOptions {
  /** Horizon H ≥ 1. */
  numTurns: number;
  /** How the episode pays (module comment). */
  payment: RelayPayment;
}

/** State of a relay episode (frozen). */
export interface RelayState {
  readonly task: RelayTask;
  readonly turn: number;
  /** The words said per played turn, `[turn][agent]`. */
  readonly words: readonly (readonly (string | null)[])[];
  /** Per-turn scores s_t so far. */
  readonly scores: readonly number[];
  /** Turns whose bonus was paid so far. */
  readonly hits: number;
  /** The agreed slot, or null before the first bonus. */
  readonly agreed: number | null;
  readonly lastReward: number | null;
  readonly done: boolean;
}

const KNOWN = new Set(hiddenCueWords);

/** Names of the relay's numeric m_t entries, in order (module comment). */
export const RELAY_FEATURE_NAMES: readonly string[] = ['turn/H', 'score/H', 'hits/H', 'slot'];

/**
 * The relay's numeric m_t: [turn/H, score/H, hits/H, slot] with the score and hits so far and the
 * agreed slot signed (0 none, −1 slot 0, +1 slot 1). Signed, because which slot is worth more
 * depends on the convention the agents settle on: a linear head can rank either convention above
 * no agreement and the other below it; with 0/1/2 it could not put "none" between them.
 */
export function relayFeatures(state: Pick<RelayState, 'turn' | 'scores' | 'hits' | 'agreed'>, horizon: number): number[] {
  const score = state.scores.reduce((a, b) => a + b, 0);
  const slot = state.agreed === null ? 0 : state.agreed === 0 ? -1 : 1;
  return [state.turn / horizon, score / horizon, state.hits / horizon, slot];
}

/** The hidden-cue relay as an LLM Dec-POMDP (module comment). */
export class HiddenCueRelayEnv implements LLMDecPOMDP<RelayTask, RelayState> {
  readonly name: string;
  readonly numAgents = 2;
  readonly horizon: number;
  readonly payment: RelayPayment;
  /** Numeric m_t (module comment; {@link relayFeatures}). */
  readonly globalFeatures: GlobalFeatures<RelayState>;

  constructor(options: RelayOptions) {
    const h = options.numTurns;
    if (!Number.isInteger(h) || h < 1) throw new Error(`hidden-cue relay: numTurns must be an integer >= 1, got ${h}`);
    if (!RELAY_PAYMENTS.includes(options.payment)) throw new Error(`hidden-cue relay: payment must be 'sparse' or 'dense', got '${String(options.payment)}'`);
    this.horizon = h;
    this.payment = options.payment;
    this.name = `hidden-cue-relay-${options.payment}-${h}`;
    this.globalFeatures = { size: RELAY_FEATURE_NAMES.length, names: RELAY_FEATURE_NAMES, of: (state) => relayFeatures(state, h) };
  }

  initialState(task: RelayTask): RelayState {
    if (task.cues.length < this.horizon) throw new Error(`${this.name}: task ${task.id} has cues for ${task.cues.length} turns, the horizon is ${this.horizon}`);
    return Object.freeze({ task, turn: 0, words: Object.freeze([]), scores: Object.freeze([]), hits: 0, agreed: null, lastReward: null, done: false });
  }

  observe(state: RelayState, agent: number): string {
    if (state.done) throw new Error(`${this.name}: observe after the episode ended (turn ${state.turn})`);
    if (agent !== 0 && agent !== 1) throw new Error(`${this.name}: agent ${agent} out of range [0, 2)`);
    const own = `cue ${state.task.cues[state.turn][agent]}`;
    if (state.turn === 0) return own;
    const said = state.words[state.turn - 1][1 - agent];
    // Prompts stay inside the vocabulary: anything else shows as `none`.
    return `${own} partner ${said !== null && KNOWN.has(said) ? said : 'none'}`;
  }

  async step(state: RelayState, jointAction: readonly string[]): Promise<StepResult<RelayState>> {
    if (state.done) throw new Error(`${this.name}: step on a finished episode`);
    if (jointAction.length !== 2) throw new Error(`${this.name}: joint action has ${jointAction.length} completions for 2 agents`);
    const said = Object.freeze(jointAction.map(hiddenCueWord));
    const turn = state.turn + 1;
    const done = turn >= this.horizon;
    const t = relayTurnScore(state.task.cues[state.turn], said, state.agreed);
    const scores = Object.freeze([...state.scores, t.score]);
    const reward = this.payment === 'dense' ? t.score / this.horizon : done ? scores.reduce((a, b) => a + b, 0) / this.horizon : 0;
    const next: RelayState = Object.freeze({
      task: state.task,
      turn,
      words: Object.freeze([...state.words, said]),
      scores,
      hits: state.hits + (t.bonus ? 1 : 0),
      agreed: t.agreed,
      lastReward: reward,
      done,
    });
    return { reward, next, done, info: { score: t.score, agreed: t.agreed } };
  }

  globalInfo(state: RelayState): GlobalInfo {
    const score = state.scores.reduce((a, b) => a + b, 0);
    return {
      turn: state.turn,
      numTurns: this.horizon,
      lastReward: state.lastReward,
      maxReward: this.payment === 'dense' ? 1 / this.horizon : 1,
      progress: relayProgress(state.hits, score, state.agreed),
    };
  }
}

/** The progress part of the relay's m_t (module comment). */
export function relayProgress(hits: number, score: number, agreed: number | null): string {
  return `hits ${hits}; score ${formatCriticNumber(score)}; slot ${agreed ?? 'none'}`;
}

/** The mean per-turn score of an episode: what both payments amount to (sparse's last reward, dense's reward sum). */
export function relayEpisodeScore(rewards: readonly number[], payment: RelayPayment): number {
  return payment === 'sparse' ? (rewards[rewards.length - 1] ?? 0) : rewards.reduce((a, b) => a + b, 0);
}
