/** `position_feedback` and `position_modification`: target or wrong cells listed one by one. */
import type { HouseBuildFeedbackContext } from '../prompts.js';
import { AIR_BLOCKS, targetCells } from '../world.js';
import {
  applyLimit,
  bulletList,
  checkAgents,
  contextAllowedBlocks,
  contextCommandCaps,
  followUpPrompts,
  formatCells,
  replayPreviousTurn,
  sortTopDown,
  turnLine,
  type HouseBuildFeedbackOptions,
  type WrongCell,
} from './common.js';

/**
 * `position_feedback`: every non-air target cell (top layer first), a target of about half of them
 * (`max(1, total // 2)`), the agent's allowed blocks and command cap; then base prompt and previous
 * commands. It does not look at the previous action.
 */
export function positionFeedbackPrompts(
  ctx: HouseBuildFeedbackContext,
  completions: readonly string[],
  opts: HouseBuildFeedbackOptions = {},
): string[] {
  const n = checkAgents(completions);
  const caps = contextCommandCaps(ctx, n);
  const positions = sortTopDown(targetCells(ctx.task).filter((c) => !AIR_BLOCKS.has(c.block)));
  const targetCount = positions.length ? Math.max(1, Math.floor(positions.length / 2)) : 0;
  const listed = formatCells(positions);
  const frame = { resourceText: false, previousHeader: 'Your previous commands:' };
  return followUpPrompts(ctx, completions, opts, frame, (i, base) => [
    'Position feedback (subset selection):',
    turnLine(opts),
    '- Coordinates are absolute (x, y, z).',
    '- Output /fill commands only (no markdown).',
    '- Do not output any text other than commands.',
    `- Choose a subset of about half the positions (target size ~ ${targetCount}).`,
    '- Use: /fill x y z x y z block',
    `- Max commands allowed: ${caps[i]}`,
    '',
    'All target positions:',
    listed,
    '',
    'Available blocks (use ONLY these):',
    bulletList(contextAllowedBlocks(ctx, i), '- (see original prompt)'),
    '',
    'Format: /fill <x> <y> <z> <x> <y> <z> <block>',
    ...(base ? ['', base] : []),
  ]);
}

/**
 * `position_modification`: base prompt, the no-text rule, then `(x y z block)` for the wrong cells
 * sorted bottom layer first (y, x, z) and truncated to `limit`; both agents get the same list.
 */
export function positionModificationPrompts(
  ctx: HouseBuildFeedbackContext,
  completions: readonly string[],
  opts: HouseBuildFeedbackOptions = {},
): string[] {
  checkAgents(completions);
  const wrong: WrongCell[] = [...replayPreviousTurn(ctx, completions).wrongCells].sort(
    (a, b) => a.y - b.y || a.x - b.x || a.z - b.z,
  );
  const kept = applyLimit(wrong, opts.limit);
  const suggestions = kept.length ? kept.map((c) => `(${c.x} ${c.y} ${c.z} ${c.block})`).join('\n') : '(none)';
  const frame = { resourceText: true, previousHeader: 'Your previous commands:' };
  return followUpPrompts(ctx, completions, opts, frame, (_i, base) => [
    ...(base ? [base] : []),
    '',
    'Do not output any text other than commands.',
    '',
    'Modification suggestions (use these to fix errors):',
    suggestions,
  ]);
}
