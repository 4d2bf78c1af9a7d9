/**
 * Pieces every HouseBuild follow-up text shares (tasks-reference §2.4): the options, the re-run of
 * the previous joint action (validation, simulation, wrong cells), the per-agent base prompt and
 * the "previous commands" block.
 */
import { pyStrip } from '../../tldr/python-text.js';
import { extractCommandLines, validateCommands } from '../commands.js';
import type { HouseBuildFeedbackContext } from '../prompts.js';
import { commandCaps, uniqueBlockList } from '../reward.js';
import { computeResourceLimits, simulateCommands, targetCells, type World } from '../world.js';

/** Options of the follow-up builders; defaults are the shipped configs' `external` section. */
export interface HouseBuildFeedbackOptions {
  /** Number of the turn being prompted: prompts so far + 1, so 2 on the first follow-up. Default 1. */
  turn?: number;
  /** `external.original_prompt`: repeat the agent's first-turn user prompt. Default true. */
  originalPrompt?: boolean;
  /** `external.previous_response`: show the agent's previous completion. Default true. */
  previousResponse?: boolean;
  /** `external.lim`: cap on listed cells / rectangles in the two modification modes; ≤0 or null: none. Default 20. */
  limit?: number | null;
}

/** A target cell that the previous joint action got wrong, with the block it should hold. */
export interface WrongCell {
  readonly x: number;
  readonly y: number;
  readonly z: number;
  readonly block: string;
}

/** The previous joint action re-validated and simulated as the reward does. */
export interface PreviousTurn {
  readonly acceptedByAgent: string[][];
  readonly world: World;
  /** Wrong target cells in target order (y, row z, column x). */
  readonly wrongCells: WrongCell[];
}

/** Allowed blocks of agent `i` from the context, falling back to the inventory's blocks. */
export function contextAllowedBlocks(ctx: HouseBuildFeedbackContext, agentIndex: number): string[] {
  const raw = uniqueBlockList(agentIndex === 0 ? ctx.allowedBlocksAgent1 : ctx.allowedBlocksAgent2);
  return raw.length > 0 ? raw : uniqueBlockList(ctx.task.inventory.map(([, v]) => v));
}

/** Command caps split from the context total (`0`/missing reads as 600, as `or 600` does). */
export function contextCommandCaps(ctx: HouseBuildFeedbackContext, numAgents: number): number[] {
  return commandCaps(ctx.maxCommandsTotal || 600, numAgents);
}

/** Re-runs the previous joint action: each agent validated with its caps/budget, then simulated. */
export function replayPreviousTurn(ctx: HouseBuildFeedbackContext, completions: readonly string[]): PreviousTurn {
  const n = completions.length;
  const caps = contextCommandCaps(ctx, n);
  const limits = ctx.limitedResource ? computeResourceLimits(ctx.task, n) : null;
  const acceptedByAgent = completions.map(
    (text, i) =>
      validateCommands(extractCommandLines(text ?? ''), {
        allowedBlocks: contextAllowedBlocks(ctx, i),
        bboxFrom: ctx.task.bboxFrom,
        bboxTo: ctx.task.bboxTo,
        maxCommands: caps[i],
        resourceLimits: limits,
      }).accepted,
  );
  const world = simulateCommands(acceptedByAgent.flat(), ctx.task.bboxFrom, ctx.task.bboxTo);
  const wrongCells: WrongCell[] = [];
  for (const c of targetCells(ctx.task)) {
    if (world.get(c.x, c.y, c.z) !== c.block) wrongCells.push(c);
  }
  return { acceptedByAgent, world, wrongCells };
}

/** The agent's base user prompt: the single-agent one when alone. */
export function baseUserPrompt(ctx: HouseBuildFeedbackContext, agentIndex: number, numAgents: number): string {
  if (numAgents === 1) return ctx.userPromptSingle;
  return (agentIndex === 0 ? ctx.userPromptAgent1 : ctx.userPromptAgent2) || ctx.userPromptSingle;
}

/** Appends a blank line, `header` and the stripped previous completion when it is not blank. */
export function pushPrevious(parts: string[], completion: string | undefined, header: string): void {
  const prev = pyStrip(completion ?? '');
  if (!prev) return;
  parts.push('', header, prev);
}

/** Joins the parts with newlines and strips the result, as every mode does. */
export function finish(parts: readonly string[]): string {
  return pyStrip(parts.join('\n'));
}

/** Checks the agent count the reference accepts here (one or two completions). */
export function checkAgents(completions: readonly string[]): number {
  const n = completions.length;
  if (n !== 1 && n !== 2) throw new Error(`HouseBuild feedback: expected 1 or 2 agent completions, got ${n}`);
  return n;
}
