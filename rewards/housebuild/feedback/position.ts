/** `position_feedback` and `position_modification`: target or wrong cells listed one by one. */
import type { HouseBuildFeedbackContext } from '../prompts.js';
import { AIR_BLOCKS, targetCells } from '../world.js';
import {
  baseUserPrompt,
  checkAgents,
  contextAllowedBlocks,
  contextCommandCaps,
  finish,
  pushPrevious,
  replayPreviousTurn,
  type HouseBuildFeedbackOptions,
  type WrongCell,
} from './common.js';
import { sortTopDown } from './perfect.js';

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
  const listed = positions.length ? positions.map((c) => `- (${c.x}, ${c.y}, ${c.z}) = ${c.block}`).join('\n') : '- (none)';
  return completions.map((completion, i) => {
    const allowed = contextAllowedBlocks(ctx, i);
    const parts: string[] = [];
    if (ctx.systemPrompt) parts.push(ctx.systemPrompt, '');
    parts.push(
      'Position feedback (subset selection):',
      `- Turn: ${opts.turn ?? 1}`,
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
      allowed.length ? allowed.map((b) => `- ${b}`).join('\n') : '- (see original prompt)',
      '',
      'Format: /fill <x> <y> <z> <x> <y> <z> <block>',
    );
    const base = baseUserPrompt(ctx, i, n);
    if ((opts.originalPrompt ?? true) && base) parts.push('', base);
    if (opts.previousResponse ?? true) pushPrevious(parts, completion, 'Your previous commands:');
    return finish(parts);
  });
}

/** Truncation used by the modification modes: `limit` > 0 keeps that many; otherwise all. */
export function applyLimit<T>(items: readonly T[], limit: number | null | undefined): T[] {
  const lim = limit === undefined ? 20 : limit;
  return lim !== null && lim > 0 ? items.slice(0, Math.trunc(lim)) : [...items];
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
  const n = checkAgents(completions);
  const originalPrompt = opts.originalPrompt ?? true;
  const wrong: WrongCell[] = [...replayPreviousTurn(ctx, completions).wrongCells].sort(
    (a, b) => a.y - b.y || a.x - b.x || a.z - b.z,
  );
  const kept = applyLimit(wrong, opts.limit);
  const suggestions = kept.length ? kept.map((c) => `(${c.x} ${c.y} ${c.z} ${c.block})`).join('\n') : '(none)';
  return completions.map((completion, i) => {
    const parts: string[] = [];
    if (ctx.systemPrompt) parts.push(ctx.systemPrompt, '');
    if (ctx.resourceLimitsText && !originalPrompt) parts.push(ctx.resourceLimitsText, '');
    const base = baseUserPrompt(ctx, i, n);
    if (originalPrompt && base) parts.push(base);
    parts.push('', 'Do not output any text other than commands.', '', 'Modification suggestions (use these to fix errors):');
    parts.push(suggestions);
    if (opts.previousResponse ?? true) pushPrevious(parts, completion, 'Your previous commands:');
    return finish(parts);
  });
}
