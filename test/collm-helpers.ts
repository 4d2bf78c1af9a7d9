/** Shared setup of the CoLLM-DC / CoLLM-CC tests: real tiny checkpoints in temp dirs. */
import { join } from 'node:path';
import { CRITIC_LAYOUT_WORDS } from '../src/critic/inputs.js';
import type { CriticLM } from '../src/critic/value-model.js';
import { createTinyModel } from '../src/model/tiny.js';
import { loadCausalLM } from '../src/model/load.js';
import { loadTokenizer } from '../src/tokenizer/load.js';

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
