/** Shared setup of the MAGRPO / trainer-common tests: real tiny checkpoints in temp dirs. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Agent, ChatFormat } from '../src/decpomdp/agent.js';
import { createTinyModel, type TinyModelOptions } from '../src/model/tiny.js';
import { loadCausalLM } from '../src/model/load.js';
import { loadTokenizer } from '../src/tokenizer/load.js';

/** One tiny agent to build. */
export interface TinyAgentSpec {
  name: string;
  arch: TinyModelOptions['arch'];
  seed: number;
  tokenizer?: 'bpe' | 'word';
  words?: readonly string[];
  hiddenSize?: number;
  numLayers?: number;
  chat?: ChatFormat | false;
}

/** A fresh temp dir and its remover. */
export async function tempDir(prefix: string): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), `comlrl-${prefix}-`));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** Writes each checkpoint under `dir/<name>` and loads it as an Agent (call initBackend first). */
export async function tinyAgents(dir: string, specs: readonly TinyAgentSpec[]): Promise<Agent[]> {
  const agents: Agent[] = [];
  for (const s of specs) {
    const d = join(dir, s.name);
    await createTinyModel({
      dir: d,
      arch: s.arch,
      seed: s.seed,
      tokenizer: s.tokenizer ?? 'word',
      ...(s.words ? { words: [...s.words] } : {}),
      hiddenSize: s.hiddenSize ?? 32,
      numLayers: s.numLayers ?? 1,
    });
    agents.push({ name: s.name, model: await loadCausalLM(d), tokenizer: await loadTokenizer(d), chat: s.chat ?? false });
  }
  return agents;
}

/** Frees the agents' weights. */
export function disposeAgents(agents: readonly Agent[]): void {
  for (const a of agents) a.model.dispose();
}
