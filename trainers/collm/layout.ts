/**
 * Where CoLLM's critics are saved beside `dir/agent_i/`: one function per kind of critic set, which
 * the sets' `layout()` return and the trainer registry reads before a trainer exists (to load a
 * checkpoint's critics and heads).
 */
import { join } from 'node:path';
import { agentDirs } from '../core/save.js';
import type { CriticLayout } from './critic-set.js';

/** CoLLM-DC with a separate critic LM per agent: `dir/agent_i/critic/` (LM, tokenizer, `value_head.*`). */
export function separateCriticsLayout(dir: string, numAgents: number): CriticLayout {
  const critics = agentDirs(dir, numAgents).map((a) => join(a, 'critic'));
  return { critics, heads: critics };
}

/** CoLLM-DC with a value head on each actor's backbone: `dir/agent_i/value_head.*` (CoMLRL's layout). */
export function sharedHeadsLayout(dir: string, numAgents: number): CriticLayout {
  return { critics: [], heads: agentDirs(dir, numAgents) };
}

/** CoLLM-CC's one centralized critic: `dir/critic/` (LM, tokenizer, `value_head.*`). */
export function centralizedCriticLayout(dir: string): CriticLayout {
  const critic = join(dir, 'critic');
  return { critics: [critic], heads: [critic] };
}
