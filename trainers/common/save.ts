import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Agent } from '../../src/decpomdp/agent.js';

/** The folder agent `i` is saved to under `dir` (CoMLRL's layout: `out/agent_i/`). */
export function agentDir(dir: string, i: number): string {
  return join(dir, `agent_${i}`);
}

/**
 * Saves every agent as a Hugging Face-format directory `dir/agent_i/` (config.json + safetensors +
 * tokenizer files), which `loadCausalLM` / `loadTokenizer` (and transformers) read back.
 * Returns the directories written, in agent order.
 */
export async function saveAgents(
  dir: string,
  agents: readonly Agent[],
  options?: { dtype?: 'float32' | 'bfloat16' | 'float16' },
): Promise<string[]> {
  const dirs: string[] = [];
  for (let i = 0; i < agents.length; i++) {
    const d = agentDir(dir, i);
    await mkdir(d, { recursive: true });
    await agents[i].model.save(d, options);
    await agents[i].tokenizer.save(d);
    dirs.push(d);
  }
  return dirs;
}
