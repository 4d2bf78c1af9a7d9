/**
 * What the demo's agents wrote: two fixed eval prompts played with the agents before training (the
 * config's starting checkpoints) and after (the run's final models), through the evaluation path
 * the trainers and `comlrl eval` use, with greedy decoding, so the same weights always write the
 * same words. Printed side by side with each episode's joint reward.
 */
import { rngFor } from '../../src/util/rng.js';
import { runEvalEpisodes } from '../../trainers/core/eval.js';
import { generationSettingsOf } from '../../trainers/core/trainer.js';
import { getTrainer } from '../../trainers/registry.js';
import type { RunConfig } from '../schemas.js';
import { episodeReward, setupTask } from '../tasks.js';
import { agentDirsFromConfig, loadAgents, numAgentsOf } from '../trainer.js';
import { trainedAgentsRoot } from './eval.js';

/** Prompts the demo shows: the first eval items. */
export const DEMO_PROMPTS = 2;

/** One fixed prompt played once: what each agent wrote and the joint reward. */
export interface DemoExchange {
  /** The prompt (the agents' distinct observations of the first turn, joined by " / "). */
  readonly prompt: string;
  /** Per agent: its completions, turns joined by " → ". */
  readonly said: readonly string[];
  /** The episode's joint reward (summed over turns). */
  readonly reward: number;
}

/** Which weights to play: the config's starting models, or a finished run's final/ (or newest checkpoint). */
export type DemoWeights = { readonly base: true } | { readonly runDir: string };

/** Plays the first {@link DEMO_PROMPTS} eval items greedily with the chosen weights. */
export async function playFixedPrompts(config: RunConfig, weights: DemoWeights): Promise<DemoExchange[]> {
  const setup = await setupTask(config);
  const trainer = getTrainer(config.trainer);
  const tc = config.trainerConfig;
  const task = { ...setup, ...trainer.playTask(tc, setup) };
  try {
    const n = numAgentsOf(config, task.env.numAgents);
    const dirs = 'base' in weights ? agentDirsFromConfig(config, n) : [...trainer.layout(tc, await trainedAgentsRoot(weights.runDir), n).agents];
    const agents = await loadAgents(config, dirs);
    try {
      const items = task.evalTasks.slice(0, DEMO_PROMPTS);
      const episodes = await runEvalEpisodes<unknown, unknown>({
        agents,
        env: task.env,
        tasks: items,
        numTurns: tc.num_turns,
        batchSize: items.length,
        settings: { ...generationSettingsOf(tc), greedy: true },
        rng: rngFor(config.seed, 'eval'),
        discount: tc.discount,
        earlyTerminationThreshold: trainer.evalEarlyTermination(tc),
      });
      return episodes.map((e) => ({
        prompt: [...new Set(e.observations[0])].join(' / '),
        said: agents.map((_, a) => e.completions.map((turn) => turn[a]).join(' → ')),
        reward: episodeReward(e),
      }));
    } finally {
      for (const a of agents) a.model.dispose();
    }
  } finally {
    await task.close();
  }
}

/** Text of a completion in the table: quoted, whitespace runs as one space, long ones cut with "…". */
function shown(text: string, max = 24): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return JSON.stringify(flat.length > max ? `${flat.slice(0, max - 1)}…` : flat);
}

/**
 * The before/after table: one row per prompt; per side, what each agent wrote and the joint
 * reward. `before[i]` and `after[i]` are the same prompt.
 */
export function transcriptTable(before: readonly DemoExchange[], after: readonly DemoExchange[], formatReward: (r: number) => string): string {
  const agents = Math.max(0, ...before.map((e) => e.said.length), ...after.map((e) => e.said.length));
  const side = (e: DemoExchange | undefined): string[] => [...Array.from({ length: agents }, (_, a) => (e?.said[a] !== undefined ? shown(e.said[a]) : '')), e ? formatReward(e.reward) : ''];
  const header = [...Array.from({ length: agents }, (_, a) => `agent ${a}`), 'reward'];
  const rows: string[][] = [
    ['', 'before training', ...header.slice(1).map(() => ''), 'after training', ...header.slice(1).map(() => '')],
    ['prompt', ...header, ...header],
    ...before.map((e, i) => [e.prompt, ...side(e), ...side(after[i])]),
  ];
  const widths = rows[0].map((_, c) => Math.max(...rows.slice(1).map((r) => r[c].length), c === 1 || c === 2 + agents ? 0 : rows[0][c].length));
  const group = 1 + agents;
  return rows
    .map((r, ri) => {
      const cells = r.map((cell, c) => (ri === 0 && (c === 1 || c === 1 + group) ? cell : cell.padEnd(widths[c])));
      const left = cells[0];
      const b = cells.slice(1, 1 + group).join('  ');
      const a = cells.slice(1 + group).join('  ');
      return ri === 0 ? `  ${left}  │ ${cells[1].padEnd(widthOf(widths, 1, group))} │ ${cells[1 + group]}`.trimEnd() : `  ${left}  │ ${b} │ ${a}`.trimEnd();
    })
    .join('\n');
}

/** Width of `count` padded columns from `from`, joined by two spaces. */
function widthOf(widths: readonly number[], from: number, count: number): number {
  return widths.slice(from, from + count).reduce((s, w) => s + w, 0) + 2 * (count - 1);
}
