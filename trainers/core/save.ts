/**
 * The saved-run layout every trainer writes (CoMLRL's): `dir/agent_i/` per agent in Hugging Face
 * format, critics where the trainer puts them (see `ModelLayout`), and the options of a trainer's
 * `save(dir, options)`.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Agent } from '../../src/decpomdp/agent.js';
import type { CausalLM } from '../../src/model/types.js';
import type { Tokenizer } from '../../src/tokenizer/types.js';

/** The dtype weights are written in. */
export type SaveDtype = 'float32' | 'bfloat16' | 'float16';

/** Options of a trainer's `save(dir, options)`. */
export interface SaveOptions {
  /** dtype of the agents' weights (default float32). Critics and value heads are always float32. */
  readonly dtype?: SaveDtype;
  /**
   * LoRA: also write the merged full model (base + adapter) of each agent / critic LM into
   * `<its directory>/merged/`, in `dtype`.
   */
  readonly merged?: { readonly agents?: boolean; readonly critics?: boolean };
  /**
   * Whether this is the run's final model (default true): the trainer then logs CoMLRL's
   * `final_model_saved`. A checkpoint's copy passes false.
   */
  readonly final?: boolean;
}

/** Where a trainer's models are in a directory it saved (a checkpoint, `final/`). */
export interface ModelLayout {
  /** `dir/agent_i/`, in agent order. */
  readonly agents: readonly string[];
  /** Critic LM directories (with tokenizer); empty when the trainer has none of its own. */
  readonly critics: readonly string[];
  /** Directories holding a `value_head.*` each, in critic order; empty without critics. */
  readonly heads: readonly string[];
}

/** The folder name of agent `i` in a saved run (CoMLRL's layout: `out/agent_i/`). */
export function agentDirName(i: number): string {
  return `agent_${i}`;
}

/** The folder agent `i` is saved to under `dir`. */
export function agentDir(dir: string, i: number): string {
  return join(dir, agentDirName(i));
}

/** `dir/agent_0/` … `dir/agent_{n-1}/`. */
export function agentDirs(dir: string, numAgents: number): string[] {
  return Array.from({ length: numAgents }, (_, i) => agentDir(dir, i));
}

/**
 * Saves every agent as a Hugging Face-format directory `dir/agent_i/` (config.json + safetensors +
 * tokenizer files), which `loadCausalLM` / `loadTokenizer` (and transformers) read back; with
 * `merged.agents`, each LoRA agent's merged model goes to `dir/agent_i/merged/` too.
 * Returns the directories written, in agent order.
 */
export async function saveAgents(dir: string, agents: readonly Agent[], options: SaveOptions = {}): Promise<string[]> {
  const dirs: string[] = [];
  for (let i = 0; i < agents.length; i++) {
    const d = agentDir(dir, i);
    await mkdir(d, { recursive: true });
    await agents[i].model.save(d, { dtype: options.dtype });
    await agents[i].tokenizer.save(d);
    dirs.push(d);
  }
  if (options.merged?.agents) await saveMergedModels(agents.map((a, i) => ({ model: a.model, tokenizer: a.tokenizer, dir: dirs[i] })), options.dtype);
  return dirs;
}

/**
 * Writes each model's merged full weights (a LoRA adapter folded into its base) into
 * `<dir>/merged/`, with its tokenizer's files (as `Tokenizer.save` writes them), so the folder is a
 * standalone model transformers and vLLM load as it is.
 */
export async function saveMergedModels(
  models: readonly { readonly model: CausalLM; readonly tokenizer: Tokenizer; readonly dir: string }[],
  dtype?: SaveDtype,
): Promise<void> {
  for (const { model, tokenizer, dir } of models) {
    if (model.saveMerged === undefined) continue;
    const merged = join(dir, 'merged');
    await model.saveMerged(merged, { dtype });
    await tokenizer.save(merged);
  }
}
