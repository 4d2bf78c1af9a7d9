/** Shared setup of the CoLLM-DC / CoLLM-CC tests: real tiny checkpoints in temp dirs. */
import { join } from 'node:path';
import { CRITIC_LAYOUT_WORDS } from '../src/critic/inputs.js';
import type { CriticLM } from '../src/critic/value-model.js';
import { createTinyModel } from '../src/model/tiny.js';
import { loadCausalLM } from '../src/model/load.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { toyWords } from '../envs/toy/index.js';

/** Writes a tiny word-level critic checkpoint whose vocabulary also covers the critic layouts. */
export async function tinyCritic(
  dir: string,
  name: string,
  seed: number,
  words: readonly string[],
  opts: { hiddenSize?: number; numLayers?: number } = {},
): Promise<CriticLM> {
  const d = join(dir, name);
  const vocab = [...new Set([...words, ...CRITIC_LAYOUT_WORDS])];
  await createTinyModel({ dir: d, arch: 'qwen3', seed, tokenizer: 'word', words: vocab, hiddenSize: opts.hiddenSize ?? 32, numLayers: opts.numLayers ?? 1 });
  return { name, model: await loadCausalLM(d), tokenizer: await loadTokenizer(d) };
}

/**
 * The toy-task critics the CoLLM suites share: two decentralized ones (`c0`, `c1`: one per agent)
 * and a centralized one (`cc`), each its own checkpoint.
 */
export async function toyCritics(dir: string): Promise<CriticLM[]> {
  return [await tinyCritic(dir, 'c0', 3, toyWords), await tinyCritic(dir, 'c1', 4, toyWords), await tinyCritic(dir, 'cc', 5, toyWords)];
}

/** Frees the critics' weights. */
export function disposeCritics(critics: readonly CriticLM[]): void {
  for (const c of critics) c.model.dispose();
}
