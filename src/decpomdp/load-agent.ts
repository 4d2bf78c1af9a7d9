import * as path from 'node:path';
import { loadCausalLM } from '../model/load.js';
import { loadTokenizer } from '../tokenizer/load.js';
import type { Agent, ChatFormat } from './agent.js';

/**
 * Loads one agent from a Hugging Face-format directory (weights, config and tokenizer files
 * together, as `save_pretrained` writes them). Call `initBackend` first.
 */
export async function loadAgent(
  dir: string,
  options: { name?: string; chat?: ChatFormat | false; tokenizerDir?: string } = {},
): Promise<Agent> {
  const [model, tokenizer] = await Promise.all([loadCausalLM(dir), loadTokenizer(options.tokenizerDir ?? dir)]);
  return { name: options.name ?? path.basename(path.resolve(dir)), model, tokenizer, chat: options.chat ?? false };
}
