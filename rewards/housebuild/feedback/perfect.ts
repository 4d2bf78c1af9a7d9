/** `perfect_feedback`: the exact wrong cells, split between the agents. */
import type { HouseBuildFeedbackContext } from '../prompts.js';
import { AIR_BLOCKS, normalizeBlockId, targetCells } from '../world.js';
import {
  bulletList,
  checkAgents,
  contextAllowedBlocks,
  followUpPrompts,
  formatCells,
  replayPreviousTurn,
  sortTopDown,
  turnLine,
  type HouseBuildFeedbackOptions,
  type WrongCell,
} from './common.js';

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
  const prev = replayPreviousTurn(ctx, completions);
  const wrong = sortTopDown(prev.wrongCells);
  const inTarget = new Set(targetCells(ctx.task).map((c) => `${c.x},${c.y},${c.z}`));
  const extra: WrongCell[] = [];
  for (const c of prev.world.cells()) {
    if (!inTarget.has(`${c.x},${c.y},${c.z}`) && c.block && !AIR_BLOCKS.has(c.block)) extra.push(c);
  }
  const extraText = bulletList(sortTopDown(extra).map((c) => `(${c.x}, ${c.y}, ${c.z})`));
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
  const frame = { resourceText: true, previousHeader: 'Your previous commands:' };
  return followUpPrompts(ctx, completions, opts, frame, (i, base) => [
    'Feedback (coordinate edits):',
    turnLine(opts),
    '- Coordinates are absolute (x, y, z).',
    '- Output /fill commands only (no markdown).',
    '- Do not output any text other than commands.',
    '- Fix ONLY the listed positions.',
    '- Use: /fill x y z x y z block',
    '',
    'Set these blocks:',
    formatCells(byAgent[i]),
    ...(i === n - 1 ? ['', 'Remove extra blocks (set air) at:', extraText] : []),
    ...(base ? ['', base] : []),
  ]);
}
