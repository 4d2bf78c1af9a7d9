/** `rect_modification` and `resource_schedule`: target rectangles suggested per agent. */
import { fillVolume, parseFill } from '../fill.js';
import { layerRects, type LayerRect } from '../layers.js';
import type { HouseBuildFeedbackContext } from '../prompts.js';
import { AIR_BLOCKS, computeResourceLimits, normalizeBlockId } from '../world.js';
import {
  applyLimit,
  bulletList,
  checkAgents,
  contextAllowedBlocks,
  followUpPrompts,
  replayPreviousTurn,
  type HouseBuildFeedbackOptions,
} from './common.js';

/** A target rectangle of layer `y`. */
export interface SuggestedRect extends LayerRect {
  readonly y: number;
}

/** Python tuple order on (y, x1, z1, x2, z2, block). */
function compareRects(a: SuggestedRect, b: SuggestedRect): number {
  return (
    a.y - b.y || a.x1 - b.x1 || a.z1 - b.z1 || a.x2 - b.x2 || a.z2 - b.z2 || (a.block < b.block ? -1 : a.block > b.block ? 1 : 0)
  );
}

function formatRects(rects: readonly SuggestedRect[]): string {
  if (rects.length === 0) return '(none)';
  return rects.map((r) => `y=${r.y}: (${r.x1}, ${r.z1}, ${r.x2}, ${r.z2} ${r.block})`).join('\n');
}

/** Both rectangle modes label the previous completion "raw output" and repeat the resource text. */
const RECT_FRAME = { resourceText: true, previousHeader: 'Your previous raw output:' };

/** Both rectangle modes open with the base prompt, the no-text rule, `intro` and the agent's accepted previous commands. */
function rectOpening(base: string, accepted: readonly string[], intro: readonly string[]): string[] {
  return [
    ...(base ? [base, ''] : []),
    'Do not output any text other than commands.',
    '',
    ...intro,
    'Accepted commands from your previous turn:',
    bulletList(accepted),
    '',
  ];
}

/** Every layer's rectangles (air included), block ids normalised, in layer order. */
function allRects(ctx: HouseBuildFeedbackContext): SuggestedRect[] {
  const out: SuggestedRect[] = [];
  for (const y of ctx.task.layersByY.keys()) {
    for (const r of layerRects(ctx.task, y)) out.push({ y, x1: r.x1, z1: r.z1, x2: r.x2, z2: r.z2, block: normalizeBlockId(r.block) });
  }
  return out;
}

/**
 * `rect_modification`: the target rectangles (air rectangles included) that hold a wrong cell of
 * the previous action (first matching rectangle per cell), sorted; agent 1 gets those with y ≤ 2,
 * agent 2 those with y ≥ 2 (y = 2 goes to both), each cut to `limit`. Shown with a reminder that
 * every turn starts from an empty world and the agent's accepted previous commands.
 */
export function rectModificationPrompts(
  ctx: HouseBuildFeedbackContext,
  completions: readonly string[],
  opts: HouseBuildFeedbackOptions = {},
): string[] {
  const n = checkAgents(completions);
  const prev = replayPreviousTurn(ctx, completions);
  const rects = allRects(ctx);
  const byY = new Map<number, SuggestedRect[]>();
  for (const r of rects) byY.set(r.y, [...(byY.get(r.y) ?? []), r]);
  const picked = new Map<string, SuggestedRect>();
  for (const cell of prev.wrongCells) {
    const hit = (byY.get(cell.y) ?? []).find(
      (r) => r.block === cell.block && r.x1 <= cell.x && cell.x <= r.x2 && r.z1 <= cell.z && cell.z <= r.z2,
    );
    if (hit) picked.set(`${hit.y},${hit.x1},${hit.z1},${hit.x2},${hit.z2},${hit.block}`, hit);
  }
  const sorted = [...picked.values()].sort(compareRects);
  return followUpPrompts(ctx, completions, opts, RECT_FRAME, (i, base) => {
    const mine = n === 1 ? sorted : sorted.filter((r) => (i === 0 ? r.y <= 2 : r.y >= 2));
    return [
      ...rectOpening(base, prev.acceptedByAgent[i], ['Reminder: each turn starts from an empty (all-air) world.']),
      'Suggested rectangles to fix mismatches:',
      formatRects(applyLimit(mine, opts.limit)),
    ];
  });
}

/** Volume placed per block by accepted `/fill` commands (air counted too; only limited blocks are read). */
function usedVolumes(commands: readonly string[]): Map<string, number> {
  const used = new Map<string, number>();
  for (const cmd of commands) {
    const fill = parseFill(cmd);
    if (!fill || fill.coords.some((v) => v === null)) continue;
    const block = normalizeBlockId(fill.block);
    used.set(block, (used.get(block) ?? 0) + fillVolume(fill.coords as number[]));
  }
  return used;
}

/**
 * `_best_subrect`: the largest w·d ≤ maxArea anchored at (x1, z1), trying widths from the full
 * width down and keeping the first strictly better area.
 */
export function bestSubrect(x1: number, z1: number, x2: number, z2: number, maxArea: number): [number, number, number, number, number] {
  const width = x2 - x1 + 1;
  const depth = z2 - z1 + 1;
  let best = 0;
  let bw = 0;
  let bd = 0;
  for (let w = width; w > 0; w--) {
    const d = Math.min(depth, Math.floor(maxArea / w));
    if (w * d > best) {
      best = w * d;
      bw = w;
      bd = d;
    }
    if (best === maxArea) break;
  }
  if (best <= 0) return [x1, z1, x1, z1, 0];
  return [x1, z1, x1 + bw - 1, z1 + bd - 1, best];
}

/**
 * `resource_schedule` (needs `limitedResource`): the agent's accepted previous commands; its
 * budget left after them and after the suggestions (printed per inventory block, floored at 0);
 * target non-air rectangles of its allowed blocks taken greedily by area (ties by y, x1, z1, x2,
 * z2, block) while they fit, plus the best partial sub-rectangle of one more.
 */
export function resourceSchedulePrompts(
  ctx: HouseBuildFeedbackContext,
  completions: readonly string[],
  opts: HouseBuildFeedbackOptions = {},
): string[] {
  const n = checkAgents(completions);
  if (!ctx.limitedResource) throw new Error('resource_schedule requires limited_resource=true in task config');
  const limits = computeResourceLimits(ctx.task, n);
  const rects = allRects(ctx)
    .filter((r) => !AIR_BLOCKS.has(r.block))
    .map((r) => ({ ...r, area: (r.x2 - r.x1 + 1) * (r.z2 - r.z1 + 1) }));
  const prev = replayPreviousTurn(ctx, completions);

  return followUpPrompts(ctx, completions, opts, RECT_FRAME, (i, base) => {
    const allowed = new Set(contextAllowedBlocks(ctx, i).map(normalizeBlockId));
    const used = usedVolumes(prev.acceptedByAgent[i]);
    const remaining = new Map<string, number>();
    for (const [block, limit] of Object.entries(limits)) remaining.set(block, limit - (used.get(block) ?? 0));
    const left = (block: string) => remaining.get(block) ?? 0;

    const candidates = rects
      .filter((r) => allowed.has(r.block) && left(r.block) > 0)
      .sort((a, b) => b.area - a.area || compareRects(a, b));
    const selected: SuggestedRect[] = [];
    const taken = new Set<(typeof candidates)[number]>();
    for (const r of candidates) {
      if (left(r.block) >= r.area) {
        selected.push(r);
        remaining.set(r.block, left(r.block) - r.area);
        taken.add(r);
      }
    }
    let partial: SuggestedRect | null = null;
    let partialArea = 0;
    for (const r of candidates) {
      if (taken.has(r)) continue;
      const rem = left(r.block);
      if (rem <= 0 || r.area <= 0) continue;
      const [px1, pz1, px2, pz2, area] = bestSubrect(r.x1, r.z1, r.x2, r.z2, rem);
      if (area > partialArea) {
        partialArea = area;
        partial = { y: r.y, x1: px1, z1: pz1, x2: px2, z2: pz2, block: r.block };
      }
    }
    if (partial && partialArea > 0) selected.push(partial);

    const remainingLines: string[] = [];
    for (const [, block] of ctx.task.inventory) {
      const b = normalizeBlockId(block);
      if (AIR_BLOCKS.has(b) || limits[b] === undefined) continue;
      remainingLines.push(`- ${b}: ${Math.max(0, left(b))}`);
    }

    return [
      ...rectOpening(base, prev.acceptedByAgent[i], []),
      'Remaining resources after previous turn (air unlimited):',
      remainingLines.length ? remainingLines.join('\n') : '(none)',
      '',
      'Suggested rectangles to build next (greedy by size):',
      formatRects(selected),
    ];
  });
}
