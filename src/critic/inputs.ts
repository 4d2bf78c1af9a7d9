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
 * Blocks are separated by one blank line. Decentralized critics (CoLLM-DC) read only their own
 * agent's prompt (the history h_{i,t} as the actor sees it), optionally prefixed by the same
 * `[Global Info]` block, and for Q the agent's own completion after it.
 *
 * m_t is placed first so that right-truncation (what Hugging Face tokenizers do by default, and
 * what `maxTokens` does here) never drops it.
 */
import type { GlobalInfo } from '../decpomdp/types.js';
import type { Tokenizer } from '../tokenizer/types.js';

/** A number as it appears in critic text: at most 4 decimals, no trailing zeros. */
export function formatCriticNumber(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  const r = Number(x.toFixed(4));
  return Object.is(r, -0) ? '0' : String(r);
}

/** The `[Global Info]` line for m_t: 1-based turn, horizon, last reward and (if known) its maximum. */
export function formatGlobalInfo(m: GlobalInfo): string {
  const last = m.lastReward === null ? 'none' : formatCriticNumber(m.lastReward);
  const max = m.maxReward === null ? '' : ` (max ${formatCriticNumber(m.maxReward)})`;
  return `[Global Info] turn ${m.turn + 1} of ${m.numTurns}; last reward: ${last}${max}`;
}

/** Inputs of a centralized critic at one joint step. */
export interface CentralizedCriticTextInput {
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

/** Token ids of the centralized critic's input (encoded with the critic's own tokenizer). */
export function centralizedCriticIds(
  tokenizer: Tokenizer,
  input: CentralizedCriticTextInput,
  maxTokens?: number | null,
): number[] {
  return truncateIds(tokenizer.encode(centralizedCriticText(input)), maxTokens);
}

/** Inputs of one agent's decentralized critic at one step. */
export interface DecentralizedCriticTextInput {
  /** The agent's prompt text, exactly as its actor reads it (h_{i,t}). */
  prompt: string;
  /** The agent's completion a_{i,t} (Q critics); omit for V. */
  action?: string | null;
  /** m_t; omit or null to leave it out (the default for decentralized critics). */
  globalInfo?: GlobalInfo | null;
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
  const state = input.globalInfo ? `${formatGlobalInfo(input.globalInfo)}\n\n${input.prompt}` : input.prompt;
  const ids = tokenizer.encode(state);
  if (input.action !== undefined && input.action !== null) {
    ids.push(...tokenizer.encode(input.action, { addSpecialTokens: false }));
  }
  return truncateIds(ids, maxTokens);
}

/**
 * Input ids of a shared head on the actor's backbone: the actor's own prompt ids (V) or prompt +
 * completion ids (Q), no re-encoding since the head reads the actor's hidden states; with m_t, the
 * `[Global Info]` block encoded by the actor's tokenizer (`globalInfoIds`) goes first.
 */
export function sharedHeadIds(
  promptIds: readonly number[],
  completionIds: readonly number[] | null,
  maxTokens?: number | null,
  globalInfoIds?: readonly number[] | null,
): number[] {
  const ids = [...(globalInfoIds ?? []), ...promptIds, ...(completionIds ?? [])];
  return truncateIds(ids, maxTokens);
}

/** Ids of the `[Global Info]` block plus its blank-line separator, for {@link sharedHeadIds}. */
export function globalInfoPrefixIds(tokenizer: Tokenizer, m: GlobalInfo): number[] {
  return tokenizer.encode(`${formatGlobalInfo(m)}\n\n`, { addSpecialTokens: false });
}

/**
 * The words and punctuation the critic layouts print (plus the digits 0–9), for building a
 * word-level tokenizer whose critic inputs have no unknown tokens. Numbers with several digits
 * (`12`) are single words for such tokenizers and must be added separately.
 */
export const CRITIC_LAYOUT_WORDS: readonly string[] = [
  '[', ']', 'Agent', 'Global', 'Info', 'turn', 'of', ';', 'last', 'reward', ':', 'none', '(', 'max', ')',
  '.', '-', 'Joint', 'Action', 'action', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9',
];
