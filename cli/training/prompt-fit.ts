/**
 * Before a run starts: every training item's first prompt (and every eval item's, when the run
 * evaluates), as each agent will see it, must leave room in the agent's context for
 * `max_new_tokens` more tokens (prompt + max_new_tokens ≤ config.json max_position_embeddings).
 * A row that does not is refused here, named by its file and row, instead of training on
 * positions the model never learned or failing at its rollout for lack of memory. Later turns'
 * prompts (which grow with the history) are checked at their rollout (trainers/core/generation.ts).
 */
import type { Agent } from '../../src/decpomdp/agent.js';
import { describeItem } from '../../src/data/row-origin.js';
import { getTrainer } from '../../trainers/registry.js';
import { checkPromptFits, encodePrompt, PromptTooLongError } from '../../trainers/core/generation.js';
import type { RunConfig } from '../schemas.js';
import type { TaskSetup } from '../tasks.js';

/**
 * Refuses the first item (train items first) whose opening prompt does not fit an agent's context
 * with the section's `max_new_tokens`, naming its row and how many more do not fit. A trainer
 * whose agents do not play the env's roles one to one (the centralized one) is checked at rollout.
 * @throws PromptTooLongError naming the item, its file and row, the agent and the lengths
 */
export function checkPromptsFit(config: RunConfig, task: TaskSetup, agents: readonly Agent[], evaluates: boolean): void {
  const { env } = task;
  if (agents.length !== env.numAgents) return;
  const maxNew = config.trainerConfig.max_new_tokens;
  const key = `${getTrainer(config.trainer).section}.max_new_tokens`;
  // Prompt lengths per agent by rendered observation: items often share their text.
  const lengths = agents.map(() => new Map<string, number>());
  const promptLength = (i: number, text: string, rendering: ReturnType<NonNullable<typeof env.rendering>> | undefined): number => {
    const k = `${JSON.stringify(rendering ?? null)}\u0000${text}`;
    let n = lengths[i].get(k);
    if (n === undefined) lengths[i].set(k, (n = encodePrompt(agents[i], text, rendering).length));
    return n;
  };
  const refused: PromptTooLongError[] = [];
  const sets: [kind: 'train' | 'eval', items: readonly unknown[]][] = [['train', task.trainTasks]];
  if (evaluates) sets.push(['eval', task.evalTasks]);
  for (const [kind, items] of sets) {
    items.forEach((item, index) => {
      const state = env.initialState(item);
      for (let i = 0; i < agents.length; i++) {
        try {
          checkPromptFits(agents[i], promptLength(i, env.observe(state, i), env.rendering?.(state, i)), maxNew, { item: describeItem(kind, index, item), key });
        } catch (err) {
          if (!(err instanceof PromptTooLongError)) throw err;
          refused.push(err);
          return;
        }
      }
    });
  }
  if (refused.length === 0) return;
  const [first] = refused;
  if (refused.length > 1) first.message += ` (${refused.length - 1} more item${refused.length > 2 ? 's do' : ' does'} not fit either)`;
  throw first;
}
