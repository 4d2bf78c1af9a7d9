/**
 * Target layers as rectangles (`rows_to_rects`, `format_layers_text`; tasks-reference §2.3): the
 * prompt's `layers_text` and the rectangles the feedback modes suggest.
 */
import type { HouseBuildTaskSpec } from './task.js';
import { AIR_BLOCKS, boundsOf, normalizeBlockId } from './world.js';

/** A rectangle of one layer in world (x, z): inclusive corners and the block id. */
export interface LayerRect {
  readonly x1: number;
  readonly z1: number;
  readonly x2: number;
  readonly z2: number;
  readonly block: string;
}

/**
 * `rows_to_rects`: each row z is cut into maximal runs of one character; a run with the same
 * (x1, x2, block name) as a rectangle still open from the previous row extends it in z. Output
 * order: when a row is processed, the open rectangles it did not continue are emitted in the order
 * they were created or last continued; after the last row, the rest in run order.
 */
export function rowsToRects(
  rows: readonly string[],
  inventory: ReadonlyMap<string, string>,
  minX: number,
  minZ: number,
): LayerRect[] {
  if (rows.length === 0) return [];
  const width = [...rows[0]].length;
  const rects: LayerRect[] = [];
  type Open = { x1: number; z1: number; x2: number; z2: number; block: string };
  let active = new Map<string, Open>();
  rows.forEach((row, zIdx) => {
    const chars = [...row];
    if (chars.length !== width) throw new Error('row width mismatch while building rectangles');
    const next = new Map<string, Open>();
    let start = 0;
    for (let x = 1; x <= width; x++) {
      if (x === width || chars[x] !== chars[start]) {
        const block = inventory.get(chars[start]);
        if (block === undefined) throw new Error(`unknown inventory key '${chars[start]}' in layer`);
        const key = `${start}\u0000${x - 1}\u0000${block}`;
        const open = active.get(key);
        if (open) {
          active.delete(key);
          open.z2 = minZ + zIdx;
          next.set(key, open);
        } else {
          next.set(key, { x1: minX + start, z1: minZ + zIdx, x2: minX + x - 1, z2: minZ + zIdx, block });
        }
        start = x;
      }
    }
    for (const r of active.values()) rects.push({ ...r });
    active = next;
  });
  for (const r of active.values()) rects.push({ ...r });
  return rects;
}

/** The rectangles of layer `y` (world y of the task), air included. */
export function layerRects(task: HouseBuildTaskSpec, y: number): LayerRect[] {
  const rows = task.layersByY.get(y);
  if (!rows) throw new Error(`HouseBuild task ${task.taskId}: missing layer y=${y}`);
  const b = boundsOf(task.bboxFrom, task.bboxTo);
  return rowsToRects(rows, new Map(task.inventory), b.minX, b.minZ);
}

/**
 * `format_layers_text`: one line per y of the bbox, ascending,
 * `y=<y>: {(<x1>, <y>, <z1>, <x2>, <y>, <z2> <block>), …}`, air rectangles dropped unless asked.
 * `worldFrom` shifts coordinates so the bbox minimum lands there (default: no shift).
 */
export function formatLayersText(
  task: HouseBuildTaskSpec,
  opts: { worldFrom?: readonly number[]; includeAir?: boolean } = {},
): string {
  const b = boundsOf(task.bboxFrom, task.bboxTo);
  const [ox, oy, oz] = opts.worldFrom ? [opts.worldFrom[0] - b.minX, opts.worldFrom[1] - b.minY, opts.worldFrom[2] - b.minZ] : [0, 0, 0];
  const lines: string[] = [];
  for (let y = b.minY; y <= b.maxY; y++) {
    let rects = layerRects(task, y);
    if (!opts.includeAir) rects = rects.filter((r) => !AIR_BLOCKS.has(normalizeBlockId(r.block)));
    const yAbs = y + oy;
    const parts = rects.map((r) => `(${r.x1 + ox}, ${yAbs}, ${r.z1 + oz}, ${r.x2 + ox}, ${yAbs}, ${r.z2 + oz} ${r.block})`);
    lines.push(`y=${yAbs}: {${parts.join(', ')}}`);
  }
  return lines.join('\n');
}
