/**
 * Agent-side text ↔ ids: prompt encoding (raw text or the agent's chat template) and sampling K
 * completions per prompt with one `generate` call, decoded without special tokens.
 */
import type { Agent } from '../../src/decpomdp/agent.js';
import type { ObservationRendering } from '../../src/decpomdp/types.js';
import type { ChatMessage } from '../../src/tokenizer/types.js';
import type { Rng } from '../../src/util/rng.js';

/**
 * Token ids of the prompt agent `agent` gets for observation `observation`.
 * - `agent.chat === false`: the raw text, tokenized with the tokenizer's default special tokens
 *   (what `tokenizer(prompt)` does in CoMLRL, e.g. Llama's BOS).
 * - otherwise: an optional system message plus the observation as the user message, rendered with
 *   the chat template and the assistant header; the rendered text already carries its special
 *   tokens, so none are added on encoding (as HF `apply_chat_template(tokenize=True)` does).
 * An environment's `rendering` (e.g. HouseBuild: turn 1 through the template with the task's
 * system prompt, follow-ups raw) overrides the agent's choice for chat-formatted agents.
 */
export function encodePrompt(agent: Agent, observation: string, rendering?: ObservationRendering): number[] {
  if (agent.chat === false || rendering?.kind === 'raw') return agent.tokenizer.encode(observation);
  if (!agent.tokenizer.hasChatTemplate) {
    throw new Error(`agent '${agent.name}': chat formatting is on but its tokenizer has no chat template (set chat: false)`);
  }
  const messages: ChatMessage[] = [];
  const system = rendering?.kind === 'chat' && rendering.system !== undefined ? rendering.system : agent.chat.system;
  if (system !== undefined) messages.push({ role: 'system', content: system });
  messages.push({ role: 'user', content: rendering?.kind === 'chat' ? rendering.user : observation });
  const text = agent.tokenizer.applyChatTemplate(messages, {
    addGenerationPrompt: true,
    ...(agent.chat.enableThinking !== undefined ? { enableThinking: agent.chat.enableThinking } : {}),
  });
  return agent.tokenizer.encode(text, { addSpecialTokens: false });
}

/** Sampling settings shared by every generate call of a trainer. */
export interface GenerationSettings {
  maxNewTokens: number;
  temperature: number;
  topP: number;
  /** null or 0: off. */
  topK: number | null;
  /** Argmax decoding (evaluation may use it). */
  greedy?: boolean;
}

/** K completions of one agent for one prompt. */
export interface CompletionGroup {
  /** The encoded prompt. */
  promptIds: number[];
  /** Generated ids per completion, EOS included when generation stopped on it; never padding. */
  ids: number[][];
  /** Decoded completions (special tokens skipped). */
  texts: string[];
  /** Summed behaviour log-prob of each completion under the sampling distribution. */
  logProbSums: number[];
  /** Per-token behaviour log-probs of each completion. */
  tokenLogProbs: number[][];
  /** Whether each completion ended on an EOS/stop token. */
  finished: boolean[];
}

/** A model's context in tokens (config.json `max_position_embeddings`), or null when its config does not say. */
export function contextLength(model: Agent['model']): number | null {
  const c = model.config.max_position_embeddings;
  return typeof c === 'number' && Number.isFinite(c) && c > 0 ? c : null;
}

/** What a {@link PromptTooLongError} names besides the lengths. */
export interface PromptPlace {
  /** The item whose prompt it is, e.g. `train item 3 (data.jsonl, row 4)`. */
  readonly item?: string;
  /** The config key of the completion length (default `max_new_tokens`). */
  readonly key?: string;
}

/**
 * A prompt that leaves no room in the model's context for the completion: prompt tokens plus
 * `max_new_tokens` exceed `max_position_embeddings` (positions past it are ones the model never
 * saw in training, and a long enough prompt exhausts memory before that). The trainer's loop adds
 * the training item it belongs to ({@link PromptTooLongError.at}).
 */
export class PromptTooLongError extends Error {
  constructor(
    readonly agent: string,
    readonly promptTokens: number,
    readonly maxNewTokens: number,
    readonly context: number,
    readonly place: PromptPlace = {},
  ) {
    const key = place.key ?? 'max_new_tokens';
    const fix = promptTokens < context ? `shorten that text, or lower ${key} to at most ${context - promptTokens}` : 'the prompt alone fills the context: shorten that text or leave the row out';
    super(
      `${place.item !== undefined ? `${place.item}: ` : ''}the prompt of agent '${agent}' has ${promptTokens} tokens; with ${key} ${maxNewTokens} it needs ${promptTokens + maxNewTokens} positions, more than the model's context of ${context} (config.json max_position_embeddings); ${fix}`,
    );
    this.name = 'PromptTooLongError';
  }

  /** The same error naming `item`; unchanged when it already names one. */
  at(item: string): PromptTooLongError {
    return this.place.item !== undefined ? this : new PromptTooLongError(this.agent, this.promptTokens, this.maxNewTokens, this.context, { ...this.place, item });
  }
}

/**
 * Refuses a prompt that does not fit the agent's context with `maxNewTokens` more tokens (see
 * {@link PromptTooLongError}); a model whose config has no `max_position_embeddings` is not checked.
 */
export function checkPromptFits(agent: Agent, promptLength: number, maxNewTokens: number, place: PromptPlace = {}): void {
  const context = contextLength(agent.model);
  if (context !== null && promptLength + maxNewTokens > context) throw new PromptTooLongError(agent.name, promptLength, maxNewTokens, context, place);
}

/** The ids that end a completion: the model's configured EOS ids plus the tokenizer's EOS. */
export function stopIds(agent: Agent): number[] {
  // Instruct checkpoints often stop on the chat end token, which is the tokenizer's EOS but not always
  // in config.json's eos_token_id.
  return [...new Set([...agent.model.eosTokenIds, agent.tokenizer.eosTokenId])];
}

/**
 * Samples `k` completions for each of `prompts` with one `generate` call
 * (`numReturnSequences = k`) and decodes them. Returns one group per prompt, in order.
 */
export async function generateGroups(
  agent: Agent,
  prompts: readonly number[][],
  k: number,
  settings: GenerationSettings,
  rng: Rng,
): Promise<CompletionGroup[]> {
  for (const p of prompts) checkPromptFits(agent, p.length, settings.maxNewTokens);
  const out = await agent.model.generate(
    prompts.map((p) => [...p]),
    {
      maxNewTokens: settings.maxNewTokens,
      temperature: settings.temperature,
      topP: settings.topP,
      topK: settings.topK,
      greedy: settings.greedy ?? false,
      numReturnSequences: k,
      eosTokenIds: stopIds(agent),
      rng,
    },
  );
  if (out.sequences.length !== prompts.length * k) {
    throw new Error(`agent '${agent.name}': generate returned ${out.sequences.length} sequences, expected ${prompts.length * k}`);
  }
  return prompts.map((promptIds, p) => {
    const rows = out.sequences.slice(p * k, (p + 1) * k);
    const lps = out.logProbs.slice(p * k, (p + 1) * k);
    return {
      promptIds: [...promptIds],
      ids: rows,
      texts: rows.map((ids) => agent.tokenizer.decode(ids, { skipSpecialTokens: true })),
      logProbSums: lps.map((lp) => lp.reduce((a, b) => a + b, 0)),
      tokenLogProbs: lps,
      finished: out.finished.slice(p * k, (p + 1) * k),
    };
  });
}

/** {@link generateGroups} for a single prompt. */
export async function generateGroup(
  agent: Agent,
  promptIds: readonly number[],
  k: number,
  settings: GenerationSettings,
  rng: Rng,
): Promise<CompletionGroup> {
  const [group] = await generateGroups(agent, [[...promptIds]], k, settings, rng);
  return group;
}
