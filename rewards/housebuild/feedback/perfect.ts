/** `perfect_feedback`: the exact wrong cells, split between the agents. */
import type { HouseBuildFeedbackContext } from '../prompts.js';
import { AIR_BLOCKS, normalizeBlockId, targetCells } from '../world.js';
import {
  baseUserPrompt,
  checkAgents,
  contextAllowedBlocks,
  finish,
  pushPrevious,
  replayPreviousTurn,
  type HouseBuildFeedbackOptions,
  type WrongCell,
} from './common.js';

/** Wrong cells sorted top layer first, then x, then z. */
export function sortTopDown(cells: readonly WrongCell[]): WrongCell[] {
  return [...cells].sort((a, b) => b.y - a.y || a.x - b.x || a.z - b.z);
}

function formatCells(cells: readonly WrongCell[]): string {
  if (cells.length === 0) return '- (none)';
  return cells.map((c) => `- (${c.x}, ${c.y}, ${c.z}) = ${c.block}`).join('\n');
}

/**
 * System prompt; the resource text only when the original prompt is off; fixed instructions;
 * `Set these blocks:` with this agent's share of the wrong cells (a block only one agent may use
 * goes to it, the rest alternate by index parity); for the last agent the observed non-air cells
 * outside the target (`- (none)` for loader-checked tasks, whose target fills the bbox); base
 * prompt; previous commands.
 */
export function perfectFeedbackPrompts(
  ctx: HouseBuildFeedbackContext,
  completions: readonly string[],
  opts: HouseBuildFeedbackOptions = {},
): string[] {
  const n = checkAgents(completions);
  const originalPrompt = opts.originalPrompt ?? true;
  const prev = replayPreviousTurn(ctx, completions);
  const wrong = sortTopDown(prev.wrongCells);
  const inTarget = new Set(targetCells(ctx.task).map((c) => `${c.x},${c.y},${c.z}`));
  const extra: WrongCell[] = [];
  for (const c of prev.world.cells()) {
    if (!inTarget.has(`${c.x},${c.y},${c.z}`) && c.block && !AIR_BLOCKS.has(c.block)) extra.push(c);
  }
  const extraText = extra.length
    ? sortTopDown(extra)
        .map((c) => `- (${c.x}, ${c.y}, ${c.z})`)
        .join('\n')
    : '- (none)';
  const byAgent: WrongCell[][] = completions.map(() => []);
  if (n === 1) {
    byAgent[0] = wrong;
  } else {
    const a = new Set(contextAllowedBlocks(ctx, 0).map(normalizeBlockId));
    const b = new Set(contextAllowedBlocks(ctx, 1).map(normalizeBlockId));
    wrong.forEach((cell, idx) => {
      const inA = a.has(cell.block);
      const inB = b.has(cell.block);
      const owner = inA && !inB ? 0 : inB && !inA ? 1 : idx % n;
      byAgent[owner].push(cell);
    });
  }
  return completions.map((completion, i) => {
    const parts: string[] = [];
    if (ctx.systemPrompt) parts.push(ctx.systemPrompt, '');
    if (ctx.resourceLimitsText && !originalPrompt) parts.push(ctx.resourceLimitsText, '');
    parts.push(
      'Feedback (coordinate edits):',
      `- Turn: ${opts.turn ?? 1}`,
      '- Coordinates are absolute (x, y, z).',
      '- Output /fill commands only (no markdown).',
      '- Do not output any text other than commands.',
      '- Fix ONLY the listed positions.',
      '- Use: /fill x y z x y z block',
      '',
      'Set these blocks:',
      formatCells(byAgent[i]),
    );
    if (i === n - 1) parts.push('', 'Remove extra blocks (set air) at:', extraText);
    const base = baseUserPrompt(ctx, i, n);
    if (originalPrompt && base) parts.push('', base);
    if (opts.previousResponse ?? true) pushPrevious(parts, completion, 'Your previous commands:');
    return finish(parts);
  });
}
