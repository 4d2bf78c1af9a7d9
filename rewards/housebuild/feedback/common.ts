/**
 * Pieces the HouseBuild follow-up texts share (tasks-reference §2.4): the options, the re-run of
 * the previous joint action (validation, simulation, wrong cells), the per-agent frame (system
 * prompt, resource text, base prompt, previous completion) and the list formats.
 */
import { pyStrip } from '../../../src/util/python-text.js';
import { extractCommandLines, validateCommands } from '../commands.js';
import type { HouseBuildFeedbackContext } from '../prompts.js';
import { commandCaps, uniqueBlockList } from '../reward.js';
import { computeResourceLimits, simulateCommands, targetCells, type TargetCell, type World } from '../world.js';

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
export type WrongCell = TargetCell;

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

/** How a mode frames each agent's follow-up around its own lines. */
export interface FollowUpFrame {
  /**
   * Repeat the resource-limit text after the system prompt when the original prompt (which carries
   * it) is off. score_feedback and position_feedback never do.
   */
  readonly resourceText: boolean;
  /** Header above the agent's previous completion. */
  readonly previousHeader: string;
}

/**
 * Every agent's follow-up as all six modes build it: the system prompt and a blank line, the
 * resource text where the frame repeats it, the mode's own lines, then (when `previousResponse`
 * and not blank) a blank line, the header and the stripped previous completion; joined with
 * newlines and stripped. `body` gets the agent's base prompt ('' when `originalPrompt` is off) and
 * places it itself: the modes put it in different places, with different blank lines around it.
 */
export function followUpPrompts(
  ctx: HouseBuildFeedbackContext,
  completions: readonly string[],
  opts: HouseBuildFeedbackOptions,
  frame: FollowUpFrame,
  body: (agentIndex: number, base: string) => readonly string[],
): string[] {
  const n = completions.length;
  const originalPrompt = opts.originalPrompt ?? true;
  return completions.map((completion, i) => {
    const parts: string[] = [];
    if (ctx.systemPrompt) parts.push(ctx.systemPrompt, '');
    if (frame.resourceText && ctx.resourceLimitsText && !originalPrompt) parts.push(ctx.resourceLimitsText, '');
    parts.push(...body(i, originalPrompt ? baseUserPrompt(ctx, i, n) : ''));
    const prev = (opts.previousResponse ?? true) ? pyStrip(completion ?? '') : '';
    if (prev) parts.push('', frame.previousHeader, prev);
    return pyStrip(parts.join('\n'));
  });
}

/** The `- Turn: N` line of the modes that show it. */
export function turnLine(opts: HouseBuildFeedbackOptions): string {
  return `- Turn: ${opts.turn ?? 1}`;
}

/** One `- item` line per item, or `empty` when there are none. */
export function bulletList(items: readonly string[], empty = '- (none)'): string {
  return items.length ? items.map((item) => `- ${item}`).join('\n') : empty;
}

/** Cells as `(x, y, z) = block` bullets. */
export function formatCells(cells: readonly WrongCell[]): string {
  return bulletList(cells.map((c) => `(${c.x}, ${c.y}, ${c.z}) = ${c.block}`));
}

/** Cells sorted top layer first, then x, then z. */
export function sortTopDown(cells: readonly WrongCell[]): WrongCell[] {
  return [...cells].sort((a, b) => b.y - a.y || a.x - b.x || a.z - b.z);
}

/** Truncation used by the modification modes: `limit` > 0 keeps that many; otherwise all. */
export function applyLimit<T>(items: readonly T[], limit: number | null | undefined): T[] {
  const lim = limit === undefined ? 20 : limit;
  return lim !== null && lim > 0 ? items.slice(0, Math.trunc(lim)) : [...items];
}

/** Checks the agent count the reference accepts here (one or two completions). */
export function checkAgents(completions: readonly string[]): number {
  const n = completions.length;
  if (n !== 1 && n !== 2) throw new Error(`HouseBuild feedback: expected 1 or 2 agent completions, got ${n}`);
  return n;
}
