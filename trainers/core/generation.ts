/**
 * Agent-side text ↔ ids: prompt encoding (raw text or the agent's chat template) and sampling K
 * completions per prompt with one `generate` call, decoded without special tokens.
 */
import type { Agent } from '../../src/decpomdp/agent.js';
import type { ObservationRendering } from '../../src/decpomdp/types.js';
import type { ChatMessage } from '../../src/tokenizer/types.js';
import { resolveSampling, type ResolvedSampling } from '../../src/sampling/defaults.js';
import type { JointLoraPasses } from '../../src/model/lora/joint.js';
import type { GenerationOutput, SamplingOptions } from '../../src/model/types.js';
import { createRng, type Rng } from '../../src/util/rng.js';

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

/**
 * Sampling settings shared by every generate call of a trainer. The values are the config's; each
 * agent samples with {@link agentSampling} of them (its checkpoint fills `topK: null`).
 */
export interface GenerationSettings {
  maxNewTokens: number;
  temperature: number;
  topP: number;
  /**
   * CoMLRL's meaning: null = unset, so the agent checkpoint's generation_config.json `top_k`, else
   * transformers' default 50; 0 = no top-k filter; k > 0 = keep the k most likely tokens.
   */
  topK: number | null;
  /** Argmax decoding (evaluation may use it). */
  greedy?: boolean;
}

/**
 * The temperature, top-p and top-k agent `agent` samples with under `settings`: the settings'
 * values, with an unset top-k taken from the agent's generation_config.json or transformers'
 * default 50, as CoMLRL's `generate()` call gets it (see `resolveSampling`, docs/sampling.md).
 * Agents on different checkpoints may get different values.
 */
export function agentSampling(agent: Agent, settings: Pick<GenerationSettings, 'temperature' | 'topP' | 'topK'>): ResolvedSampling {
  try {
    return resolveSampling({ temperature: settings.temperature, topP: settings.topP, topK: settings.topK }, agent.model.samplingDefaults ?? null);
  } catch (err) {
    throw new Error(`agent '${agent.name}': ${(err as Error).message}`);
  }
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
 * Completions from outside the model, in place of sampling: given one agent's prompt ids and K,
 * returns K completions as that agent's token ids (each up to and including its end token, no
 * padding). Offline rollouts, replayed episodes and the CoMLRL parity check
 * (scripts/comlrl-parity.mjs) feed a trainer this way; everything after sampling (decoding,
 * rewards, returns, the update) is the trainer's own code.
 */
export type CompletionSampler = (request: { readonly agent: number; readonly promptIds: readonly number[]; readonly k: number }) =>
  | Promise<readonly (readonly number[])[]>
  | readonly (readonly number[])[];

/**
 * The groups of {@link generateGroups} from a {@link CompletionSampler}: the given ids, decoded as
 * sampled ones are, with their behaviour log-probs under the model (teacher-forced, temperature 1,
 * no filter: the distribution the completions were not drawn from is unknown).
 */
async function sampledElsewhere(agent: Agent, index: number, prompts: readonly number[][], k: number, sampler: CompletionSampler): Promise<CompletionGroup[]> {
  const stops = new Set(stopIds(agent));
  const out: CompletionGroup[] = [];
  for (const promptIds of prompts) {
    const rows = (await sampler({ agent: index, promptIds, k })).map((r) => [...r]);
    if (rows.length !== k) throw new Error(`agent '${agent.name}': the completion sampler returned ${rows.length} completions, expected ${k}`);
    rows.forEach((r, j) => {
      if (r.length === 0) throw new Error(`agent '${agent.name}': the completion sampler returned an empty completion (${j})`);
    });
    const lps = await agent.model.tokenLogProbs(
      rows.map(() => [...promptIds]),
      rows,
    );
    out.push({
      promptIds: [...promptIds],
      ids: rows,
      texts: rows.map((ids) => agent.tokenizer.decode(ids, { skipSpecialTokens: true })),
      logProbSums: lps.map((lp) => lp.reduce((a, b) => a + b, 0)),
      tokenLogProbs: lps,
      finished: rows.map((r) => stops.has(r[r.length - 1])),
    });
  }
  return out;
}

/** Where a trainer's completions come from: agent `index` samples, unless a {@link CompletionSampler} gives them. */
export interface CompletionSource {
  readonly index: number;
  readonly sampler?: CompletionSampler | null;
}

/**
 * Samples `k` completions for each of `prompts` with one `generate` call
 * (`numReturnSequences = k`) and decodes them. Returns one group per prompt, in order. With a
 * `source` that holds a sampler, the completions come from it instead.
 */
export async function generateGroups(
  agent: Agent,
  prompts: readonly number[][],
  k: number,
  settings: GenerationSettings,
  rng: Rng,
  source?: CompletionSource,
): Promise<CompletionGroup[]> {
  if (source?.sampler) return sampledElsewhere(agent, source.index, prompts, k, source.sampler);
  for (const p of prompts) checkPromptFits(agent, p.length, settings.maxNewTokens);
  const out = await agent.model.generate(
    prompts.map((p) => [...p]),
    agentSamplingOptions(agent, k, settings, rng),
  );
  return completionGroups(agent, prompts, k, out);
}

/** The `generate` options agent `agent` samples K completions with under `settings`. */
function agentSamplingOptions(agent: Agent, k: number, settings: GenerationSettings, rng: Rng): SamplingOptions {
  const sampling = agentSampling(agent, settings);
  return {
    maxNewTokens: settings.maxNewTokens,
    temperature: sampling.temperature,
    topP: sampling.topP,
    topK: sampling.topK,
    greedy: settings.greedy ?? false,
    numReturnSequences: k,
    eosTokenIds: stopIds(agent),
    rng,
  };
}

/** One group of K decoded completions per prompt from a `generate` output. */
function completionGroups(agent: Agent, prompts: readonly number[][], k: number, out: GenerationOutput): CompletionGroup[] {
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

/**
 * The random stream of each agent for one round of sampling. Agents that may run joint passes
 * (`perAgent`: LoRA agents on one base, whether `joint_passes` is on or off) each get a stream of
 * their own, drawn from `rng` in agent order: an agent's draws then do not depend on when the
 * others draw theirs, so sampling one after another or all in one joint pass takes the same
 * tokens. Other agents (and a lone agent) draw from `rng` itself, one after another.
 */
export function agentStreams(rng: Rng, agents: number, perAgent: boolean): Rng[] {
  if (!perAgent || agents === 1) return Array.from({ length: agents }, () => rng);
  return Array.from({ length: agents }, () => createRng(`agent-stream:${Math.floor(rng.next() * 2 ** 32)}`));
}

/**
 * One round of sampling: agent i samples `k` completions of each of `prompts[i]` (with the
 * streams of {@link agentStreams}). With `joint.passes` (LoRA agents on one base, `joint_passes`
 * on), all agents sample in one batch; otherwise one after another. With a sampler in `sampler`, the completions come
 * from it. Returns each agent's groups, one per prompt.
 */
export async function generateRoundOf(
  agents: readonly Agent[],
  prompts: readonly (readonly (readonly number[])[])[],
  k: number,
  settings: GenerationSettings,
  rng: Rng,
  joint: JointPasses,
  sampler: CompletionSampler | null = null,
): Promise<CompletionGroup[][]> {
  const streams = agentStreams(rng, agents.length, joint.eligible);
  const own = prompts.map((list) => list.map((p) => [...p]));
  if (joint.passes === null || sampler !== null) {
    const out: CompletionGroup[][] = [];
    for (let i = 0; i < agents.length; i++) out.push(await generateGroups(agents[i], own[i], k, settings, streams[i], { index: i, sampler }));
    return out;
  }
  agents.forEach((agent, i) => own[i].forEach((p) => checkPromptFits(agent, p.length, settings.maxNewTokens)));
  const outs = await joint.passes.generate(agents.map((agent, i) => ({ promptIds: own[i], options: agentSamplingOptions(agent, k, settings, streams[i]) })));
  return agents.map((agent, i) => completionGroups(agent, own[i], k, outs[i]));
}

/**
 * Whether a trainer's agents may run joint passes (`eligible`: LoRA agents on one base) and the
 * passes they run (`passes`: null when `joint_passes` is false or they are not eligible).
 */
export interface JointPasses {
  readonly eligible: boolean;
  readonly passes: JointLoraPasses | null;
}

/** {@link generateRoundOf} with one prompt per agent: agent i's K completions of `prompts[i]`. */
export async function generateRound(
  agents: readonly Agent[],
  prompts: readonly (readonly number[])[],
  k: number,
  settings: GenerationSettings,
  rng: Rng,
  joint: JointPasses,
  sampler: CompletionSampler | null = null,
): Promise<CompletionGroup[]> {
  const groups = await generateRoundOf(
    agents,
    prompts.map((p) => [p]),
    k,
    settings,
    rng,
    joint,
    sampler,
  );
  return groups.map((g) => g[0]);
}

/** {@link generateGroups} for a single prompt. */
export async function generateGroup(
  agent: Agent,
  promptIds: readonly number[],
  k: number,
  settings: GenerationSettings,
  rng: Rng,
  source?: CompletionSource,
): Promise<CompletionGroup> {
  const [group] = await generateGroups(agent, [[...promptIds]], k, settings, rng, source);
  return group;
}
