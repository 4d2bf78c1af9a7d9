import * as path from 'node:path';
import { loadCausalLM, type LoadCausalLMOptions } from '../model/load.js';
import { checkTokenizerFitsModel } from '../tokenizer/check.js';
import { loadTokenizer } from '../tokenizer/load.js';
import type { Agent, ChatFormat } from './agent.js';

/**
 * Loads one agent from a Hugging Face-format directory (weights, config and tokenizer files
 * together, as `save_pretrained` writes them). Call `initBackend` first.
 */
export async function loadAgent(
  dir: string,
  options: {
    name?: string;
    chat?: ChatFormat | false;
    tokenizerDir?: string;
    /** LoRA: a saved PEFT adapter or fresh adapter settings (see {@link LoadCausalLMOptions}); the base is shared with every LoRA agent of `dir`. */
    adapter?: string;
    lora?: LoadCausalLMOptions['lora'];
  } = {},
): Promise<Agent> {
  const lora: LoadCausalLMOptions = {};
  if (options.adapter !== undefined) lora.adapter = options.adapter;
  if (options.lora !== undefined) lora.lora = options.lora;
  const tokenizerDir = options.tokenizerDir ?? dir;
  const [model, tokenizer] = await Promise.all([loadCausalLM(dir, lora), loadTokenizer(tokenizerDir)]);
  try {
    checkTokenizerFitsModel(tokenizer, model.vocabSize, tokenizerDir);
  } catch (err) {
    model.dispose();
    throw err;
  }
  return { name: options.name ?? path.basename(path.resolve(dir)), model, tokenizer, chat: options.chat ?? false };
}
