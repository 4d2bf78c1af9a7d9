/**
 * Exact evaluation for the learning tests: the expected rewards of the agents' sampling policy,
 * computed from its probabilities instead of estimated from sampled episodes, so a learning
 * test's margin carries no evaluation noise (only the spread over training seeds).
 *
 * It holds for one-token completions sampled at temperature 1 without top-p / top-k (what the
 * learning tests use): a completion is then a single token t drawn with p(t | prompt) =
 * softmax(logits) over the whole vocabulary, the probability teacher-forced scoring gives. Tokens
 * that decode to the same text act alike, so each node of the episode tree branches once per
 * distinct text, and the expectation is a finite sum over every joint action (env.step decides
 * rewards and transitions, as in training).
 */
import type { Agent } from '../src/decpomdp/agent.js';
import type { LLMDecPOMDP } from '../src/decpomdp/types.js';
import { encodePrompt, stopIds } from '../trainers/core/generation.js';

/** A one-token policy's distribution over completion texts. */
export type TextDistribution = ReadonlyMap<string, number>;

/**
 * p(completion text | prompt) of each agent, cached per (agent, prompt text): one batched
 * teacher-forced pass scores every token of the vocabulary after each new prompt.
 */
export class OneTokenPolicies {
  private readonly cache: Map<string, TextDistribution>[];
  private readonly texts: string[][];

  constructor(private readonly agents: readonly Agent[]) {
    this.cache = agents.map(() => new Map());
    this.texts = agents.map((a) => Array.from({ length: a.model.vocabSize }, (_, t) => a.tokenizer.decode([t], { skipSpecialTokens: true })));
  }

  /** Agent i's distribution after each of `prompts` (observation texts), scored together. */
  async distributions(i: number, prompts: readonly string[]): Promise<TextDistribution[]> {
    const agent = this.agents[i];
    const missing = [...new Set(prompts.filter((p) => !this.cache[i].has(p)))];
    if (missing.length > 0) {
      const v = agent.model.vocabSize;
      const promptIds = missing.flatMap((p) => Array.from({ length: v }, () => encodePrompt(agent, p)));
      const completions = missing.flatMap(() => Array.from({ length: v }, (_, t) => [t]));
      const lps = await agent.model.tokenLogProbs(promptIds, completions);
      missing.forEach((p, q) => {
        const dist = new Map<string, number>();
        for (let t = 0; t < v; t++) {
          const text = this.texts[i][t];
          dist.set(text, (dist.get(text) ?? 0) + Math.exp(lps[q * v + t][0]));
        }
        this.cache[i].set(p, dist);
      });
    }
    return prompts.map((p) => this.cache[i].get(p) as TextDistribution);
  }
}

/** Expected values of one episode (or a mean over tasks). */
export interface ExactEpisodeValue {
  /** E[G_0] = E[Σ_t γ^t r_t] over the turns played. */
  readonly episodeReturn: number;
  /** E[reward of the episode's last turn] (what a sparse task pays). */
  readonly finalReward: number;
  /** E[Σ_t r_t]. */
  readonly episodeReward: number;
}

/** How the episodes are played (as the trainers' evaluation plays them). */
export interface ExactEpisodeOptions {
  readonly numTurns: number;
  readonly discount: number;
  /** An episode stops after a turn whose reward is strictly greater than this; null: never. */
  readonly earlyTerminationThreshold: number | null;
}

/**
 * The exact expectations of {@link ExactEpisodeValue} under `policy` (one distribution per agent
 * and observation; {@link OneTokenPolicies} for trained agents), averaged over `tasks`.
 */
export async function exactEpisodeValue<T, S>(
  env: LLMDecPOMDP<T, S>,
  tasks: readonly T[],
  policy: (agent: number, observations: readonly string[]) => Promise<TextDistribution[]>,
  opts: ExactEpisodeOptions,
): Promise<ExactEpisodeValue> {
  const node = async (state: S, turn: number): Promise<ExactEpisodeValue> => {
    const dists: TextDistribution[] = [];
    for (let i = 0; i < env.numAgents; i++) dists.push((await policy(i, [env.observe(state, i)]))[0]);
    let joint: { texts: string[]; p: number }[] = [{ texts: [], p: 1 }];
    for (const d of dists) joint = joint.flatMap((j) => [...d].map(([text, p]) => ({ texts: [...j.texts, text], p: j.p * p })));
    let episodeReturn = 0;
    let finalReward = 0;
    let episodeReward = 0;
    for (const { texts, p } of joint) {
      if (p === 0) continue;
      const step = await env.step(state, texts);
      const stop = step.done || turn + 1 >= opts.numTurns || (opts.earlyTerminationThreshold !== null && step.reward > opts.earlyTerminationThreshold);
      const rest = stop ? { episodeReturn: 0, finalReward: step.reward, episodeReward: 0 } : await node(step.next, turn + 1);
      episodeReturn += p * (step.reward + opts.discount * rest.episodeReturn);
      finalReward += p * rest.finalReward;
      episodeReward += p * (step.reward + rest.episodeReward);
    }
    return { episodeReturn, finalReward, episodeReward };
  };
  const values: ExactEpisodeValue[] = [];
  for (const task of tasks) values.push(await node(env.initialState(task), 0));
  const mean = (f: (v: ExactEpisodeValue) => number) => values.reduce((s, v) => s + f(v), 0) / values.length;
  return { episodeReturn: mean((v) => v.episodeReturn), finalReward: mean((v) => v.finalReward), episodeReward: mean((v) => v.episodeReward) };
}

/** The trained agents' policy for {@link exactEpisodeValue}. */
export function agentsPolicy(agents: readonly Agent[]): (agent: number, observations: readonly string[]) => Promise<TextDistribution[]> {
  const policies = new OneTokenPolicies(agents);
  return (i, observations) => policies.distributions(i, observations);
}

/** A policy that says each of `words` with equal probability, whatever it sees (uniform random play). */
export function uniformPolicy(words: readonly string[]): (agent: number, observations: readonly string[]) => Promise<TextDistribution[]> {
  const dist: TextDistribution = new Map(words.map((w) => [w, 1 / words.length]));
  return async (_i, observations) => observations.map(() => dist);
}

/** Mean and standard error of the mean (sample std / √n). */
export function meanAndSE(xs: readonly number[]): { mean: number; se: number } {
  const n = xs.length;
  const mean = xs.reduce((a, b) => a + b, 0) / n;
  const sd = n > 1 ? Math.sqrt(xs.reduce((s, x) => s + (x - mean) ** 2, 0) / (n - 1)) : 0;
  return { mean, se: sd / Math.sqrt(n) };
}

/** mean − 3·SE: what a learning test's runs must keep at or above its bar. */
export function lowerBound(xs: readonly number[]): number {
  const { mean, se } = meanAndSE(xs);
  return mean - 3 * se;
}

/** mean + 3·SE: what a mutation's runs must keep below the same bar. */
export function upperBound(xs: readonly number[]): number {
  const { mean, se } = meanAndSE(xs);
  return mean + 3 * se;
}

/**
 * p(completion text | prompt) of each agent for completions of up to `maxNewTokens` tokens sampled
 * at temperature 1 without top-p / top-k (a CentralizedMAGRPO policy writing one word per role):
 * every token sequence is enumerated (V^n of them, for word-level toy vocabularies), a sequence
 * ending at the first stop token (EOS) as generation does, and sequences decoding to the same text
 * are merged. Cached per (agent, prompt text).
 */
export class ShortCompletionPolicies {
  private readonly cache: Map<string, TextDistribution>[];

  constructor(
    private readonly agents: readonly Agent[],
    private readonly maxNewTokens: number,
  ) {
    this.cache = agents.map(() => new Map());
  }

  /** Agent i's distribution after each of `prompts`. */
  async distributions(i: number, prompts: readonly string[]): Promise<TextDistribution[]> {
    for (const p of prompts) if (!this.cache[i].has(p)) this.cache[i].set(p, await this.distribution(i, p));
    return prompts.map((p) => this.cache[i].get(p) as TextDistribution);
  }

  private async distribution(i: number, prompt: string): Promise<TextDistribution> {
    const agent = this.agents[i];
    const v = agent.model.vocabSize;
    const stops = new Set(stopIds(agent));
    const promptIds = encodePrompt(agent, prompt);
    const dist = new Map<string, number>();
    const finish = (ids: readonly number[], p: number) => {
      const text = agent.tokenizer.decode([...ids], { skipSpecialTokens: true });
      dist.set(text, (dist.get(text) ?? 0) + p);
    };
    // Open prefixes (no stop token yet) with their probabilities, one token longer each level.
    let open: { ids: number[]; p: number }[] = [{ ids: [], p: 1 }];
    for (let depth = 0; depth < this.maxNewTokens && open.length > 0; depth++) {
      const rows = open.flatMap((o) => Array.from({ length: v }, () => [...promptIds, ...o.ids]));
      const lps = await agent.model.tokenLogProbs(rows, open.flatMap(() => Array.from({ length: v }, (_, t) => [t])));
      const next: { ids: number[]; p: number }[] = [];
      open.forEach((o, q) => {
        for (let t = 0; t < v; t++) {
          const p = o.p * Math.exp(lps[q * v + t][0]);
          if (stops.has(t) || depth + 1 === this.maxNewTokens) finish([...o.ids, t], p);
          else next.push({ ids: [...o.ids, t], p });
        }
      });
      open = next;
    }
    return dist;
  }
}

/** The trained agents' policy for {@link exactEpisodeValue} with completions of up to `maxNewTokens` tokens. */
export function shortCompletionPolicy(agents: readonly Agent[], maxNewTokens: number): (agent: number, observations: readonly string[]) => Promise<TextDistribution[]> {
  const policies = new ShortCompletionPolicies(agents, maxNewTokens);
  return (i, observations) => policies.distributions(i, observations);
}
