/**
 * What a critic reads, as text and then token ids.
 *
 * Centralized critic (CoLLM-CC), CoMLRL's layout (§3.4 of the reference), with the paper's global
 * information m_t as an optional first block:
 *
 * ```
 * [Global Info] turn 2 of 4; last reward: 0.5 (max 1)     ← only with use_global_info
 *
 * [Agent 0] <observation of agent 0>
 *
 * [Agent 1] <observation of agent 1>
 *
 * [Joint Action]                                          ← Q critics only
 * [Agent 0 action]
 * <completion of agent 0>
 *
 * [Agent 1 action]
 * <completion of agent 1>
 * ```
 *
 * Blocks are separated by one blank line. With history (the paper's h_t, config
 * `critic_history: full`), every earlier turn k comes before the current observations, oldest
 * first, after m_t:
 *
 * ```
 * [Turn 1]
 * [Agent 0] <o_{0,0}>
 * [Agent 0 action] <a_{0,0}>
 * [Agent 1] <o_{1,0}>
 * [Agent 1 action] <a_{1,0}>
 * ```
 *
 * Decentralized critics (CoLLM-DC) read only their own agent's history: each earlier turn as a
 * `[Turn k] <o_{i,k}>` line with `<a_{i,k}>` on the next (see {@link decentralizedCriticText}),
 * then its current prompt, optionally prefixed by the same `[Global Info]` block, and for Q the
 * agent's own completion after it.
 *
 * Token budget (`maxTokens`, config `critic_max_length`): m_t is placed first and always kept; the
 * history's oldest turns are dropped first until the input fits; what still does not fit is
 * right-truncated (what Hugging Face tokenizers do by default).
 */
import type { GlobalInfo } from '../decpomdp/types.js';
import type { Tokenizer } from '../tokenizer/types.js';

/** A number as it appears in critic text: at most 4 decimals, no trailing zeros. */
export function formatCriticNumber(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  const r = Number(x.toFixed(4));
  return Object.is(r, -0) ? '0' : String(r);
}

/** The `[Global Info]` line for m_t: 1-based turn, horizon, last reward, (if known) its maximum, and the task's progress when it gives one. */
export function formatGlobalInfo(m: GlobalInfo): string {
  const last = m.lastReward === null ? 'none' : formatCriticNumber(m.lastReward);
  const max = m.maxReward === null ? '' : ` (max ${formatCriticNumber(m.maxReward)})`;
  const progress = m.progress ? `; ${m.progress}` : '';
  return `[Global Info] turn ${m.turn + 1} of ${m.numTurns}; last reward: ${last}${max}${progress}`;
}

/** One earlier turn of the joint history, for a centralized critic. */
export interface JointHistoryTurn {
  /** o_{i,k} of every agent. */
  readonly observations: readonly string[];
  /** a_{i,k} of every agent. */
  readonly actions: readonly string[];
}

/** One earlier turn of an agent's own history, for a decentralized critic. */
export interface AgentHistoryTurn {
  readonly observation: string;
  readonly action: string;
}

/** Inputs of a centralized critic at one joint step. */
export interface CentralizedCriticTextInput {
  /** Earlier turns, oldest first (`critic_history: full`); omit for the current observations only. */
  history?: readonly JointHistoryTurn[] | null;
  /** o_{i,t} of every agent, in agent order. */
  observations: readonly string[];
  /** a_{i,t} of every agent (Q critics); omit for V. */
  actions?: readonly string[] | null;
  /** m_t; omit or null to leave the block out (CoMLRL 1.3.6 layout). */
  globalInfo?: GlobalInfo | null;
}

/** The centralized critic's text (layout in the module comment). */
export function centralizedCriticText(input: CentralizedCriticTextInput): string {
  const { observations, actions, globalInfo } = input;
  if (observations.length === 0) throw new Error('centralizedCriticText: no observations');
  if (actions && actions.length !== observations.length) {
    throw new Error(`centralizedCriticText: ${actions.length} actions for ${observations.length} agents`);
  }
  const blocks: string[] = [];
  if (globalInfo) blocks.push(formatGlobalInfo(globalInfo));
  (input.history ?? []).forEach((turn, k) => {
    const lines = turn.observations.map((o, i) => `[Agent ${i}] ${o}\n[Agent ${i} action] ${turn.actions[i] ?? ''}`);
    blocks.push(`[Turn ${k + 1}]\n${lines.join('\n')}`);
  });
  observations.forEach((o, i) => blocks.push(`[Agent ${i}] ${o}`));
  let text = blocks.join('\n\n');
  if (actions) {
    text += `\n\n[Joint Action]\n${actions.map((a, i) => `[Agent ${i} action]\n${a}`).join('\n\n')}`;
  }
  return text;
}

/** Keeps the first `maxTokens` ids (right truncation); null keeps all. */
export function truncateIds(ids: number[], maxTokens: number | null | undefined): number[] {
  if (maxTokens === null || maxTokens === undefined || ids.length <= maxTokens) return ids;
  return ids.slice(0, maxTokens);
}

/**
 * Fits a history-bearing input to `maxTokens`: builds the ids with the whole history, and while
 * they are too long drops the oldest turn; without history left, right-truncates.
 */
export function fitHistory<H>(history: readonly H[], build: (kept: readonly H[]) => number[], maxTokens: number | null | undefined): number[] {
  for (let drop = 0; drop <= history.length; drop++) {
    const ids = build(history.slice(drop));
    if (maxTokens === null || maxTokens === undefined || ids.length <= maxTokens || drop === history.length) return truncateIds(ids, maxTokens);
  }
  return truncateIds(build([]), maxTokens);
}

/** Token ids of the centralized critic's input (encoded with the critic's own tokenizer; budget in the module comment). */
export function centralizedCriticIds(
  tokenizer: Tokenizer,
  input: CentralizedCriticTextInput,
  maxTokens?: number | null,
): number[] {
  return fitHistory(input.history ?? [], (history) => tokenizer.encode(centralizedCriticText({ ...input, history })), maxTokens);
}

/** Inputs of one agent's decentralized critic at one step. */
export interface DecentralizedCriticTextInput {
  /** The agent's prompt text, exactly as its actor reads it (h_{i,t}). */
  prompt: string;
  /** The agent's completion a_{i,t} (Q critics); omit for V. */
  action?: string | null;
  /** m_t; omit or null to leave it out (CoMLRL 1.3.6). */
  globalInfo?: GlobalInfo | null;
  /** The agent's earlier turns, oldest first (`critic_history: full`); omit for the current prompt only. */
  history?: readonly AgentHistoryTurn[] | null;
}

/** The state text of a decentralized critic: `[Global Info]`, its earlier turns, its current prompt. */
export function decentralizedCriticText(input: DecentralizedCriticTextInput): string {
  const blocks: string[] = [];
  if (input.globalInfo) blocks.push(formatGlobalInfo(input.globalInfo));
  (input.history ?? []).forEach((turn, k) => blocks.push(`[Turn ${k + 1}] ${turn.observation}\n${turn.action}`));
  blocks.push(input.prompt);
  return blocks.join('\n\n');
}

/**
 * Token ids of a separate decentralized critic's input: `[Global Info]` block (optional) and the
 * agent's prompt, then for Q the completion encoded on its own (no special tokens), so the value
 * is read at the last response token.
 */
export function decentralizedCriticIds(
  tokenizer: Tokenizer,
  input: DecentralizedCriticTextInput,
  maxTokens?: number | null,
): number[] {
  return fitHistory(
    input.history ?? [],
    (history) => {
      const ids = tokenizer.encode(decentralizedCriticText({ ...input, history }));
      if (input.action !== undefined && input.action !== null) ids.push(...tokenizer.encode(input.action, { addSpecialTokens: false }));
      return ids;
    },
    maxTokens,
  );
}

/**
 * Input ids of a shared head on the actor's backbone: the actor's own prompt ids (V) or prompt +
 * completion ids (Q), no re-encoding since the head reads the actor's hidden states; with m_t, the
 * `[Global Info]` block encoded by the actor's tokenizer (`globalInfoIds`) goes first; with history,
 * each earlier turn's prompt and completion ids, oldest first, come between (budget as above).
 */
export function sharedHeadIds(
  promptIds: readonly number[],
  completionIds: readonly number[] | null,
  maxTokens?: number | null,
  globalInfoIds?: readonly number[] | null,
  history?: readonly { promptIds: readonly number[]; completionIds: readonly number[] }[] | null,
): number[] {
  return fitHistory(
    history ?? [],
    (kept) => [...(globalInfoIds ?? []), ...kept.flatMap((h) => [...h.promptIds, ...h.completionIds]), ...promptIds, ...(completionIds ?? [])],
    maxTokens,
  );
}

/** Ids of the `[Global Info]` block plus its blank-line separator, for {@link sharedHeadIds}. */
export function globalInfoPrefixIds(tokenizer: Tokenizer, m: GlobalInfo): number[] {
  return tokenizer.encode(`${formatGlobalInfo(m)}\n\n`, { addSpecialTokens: false });
}

/**
 * The words and punctuation the critic layouts print (plus the digits 0–9), for building a
 * word-level tokenizer whose critic inputs have no unknown tokens. Numbers with several digits
 * (`12`, and `25` of `0.25`) are single words for such tokenizers, and so is the punctuation run `);`
 * that m_t prints when an env gives progress: add them, e.g. with {@link criticWordsOf} on sample texts.
 */
export const CRITIC_LAYOUT_WORDS: readonly string[] = [
  '[', ']', 'Agent', 'Global', 'Info', 'turn', 'of', ';', 'last', 'reward', ':', 'none', '(', 'max', ')',
  '.', '-', 'Joint', 'Action', 'action', 'Turn', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9',
];

/**
 * The words a word-level tokenizer (pre-tokenized as runs of word characters or of punctuation,
 * HF's `Whitespace`) makes of `texts`: what its vocabulary needs for them to have no unknown token.
 */
export function criticWordsOf(texts: Iterable<string>): string[] {
  const words = new Set<string>();
  for (const t of texts) for (const w of t.match(/\w+|[^\w\s]+/g) ?? []) words.add(w);
  return [...words];
}
