/**
 * HouseBuild task geometry (LLM_Collab_Minecraft `house_build`, tasks-reference §2.5): the row
 * schema of `data.json` and its normalised form with the reference loader's checks and bbox rules.
 */
import { houseBuildTaskSchema, type HouseBuildTask } from '../../src/data/schemas.js';
import { pyStrip } from '../../src/util/python-text.js';

/**
 * The zod schema of one `data.json` task row. It is the datasets module's definition
 * (`src/data/schemas.ts`), re-exported so reward code and loaders validate rows the same way.
 */
export { houseBuildTaskSchema };
export type { HouseBuildTask };

/** A 3-vector of integer world coordinates `[x, y, z]`. */
export type Vec3 = readonly [number, number, number];

/** A task as the reward and prompts use it (the reference's `TaskSpec`). */
export interface HouseBuildTaskSpec {
  readonly taskId: string;
  /** Inclusive world bbox, minimum corner (`local_bbox_from`). */
  readonly bboxFrom: Vec3;
  /** Inclusive world bbox, maximum corner (`local_bbox_to`). */
  readonly bboxTo: Vec3;
  /** Inventory character → block id, in the file's order (prompts list blocks in this order). */
  readonly inventory: ReadonlyArray<readonly [string, string]>;
  /** Layer rows by world y: `rows[z][x]` are inventory characters. */
  readonly layersByY: ReadonlyMap<number, readonly string[]>;
}

function fail(taskId: string, msg: string): never {
  throw new Error(`HouseBuild task ${taskId}: ${msg}`);
}

/**
 * Normalises a validated `data.json` row like the reference loader: inventory values stripped,
 * rows checked for one width, one depth and known characters; bbox taken from `bbox` (min/max per
 * axis, every layer present) or inferred as x 0..w−1, y min..max layer, z 0..d−1.
 */
export function houseBuildTaskSpec(row: HouseBuildTask): HouseBuildTaskSpec {
  const taskId = row.task_id;
  const inventory: Array<[string, string]> = [];
  for (const [key, value] of Object.entries(row.inventory)) {
    const block = pyStrip(String(value));
    if (!block) fail(taskId, `inventory value for '${key}' is empty`);
    inventory.push([key, block]);
  }
  if (inventory.length === 0) fail(taskId, 'inventory must be a non-empty mapping');
  const known = new Set(inventory.map(([k]) => k));

  const layersByY = new Map<number, string[]>();
  let width: number | null = null;
  let depth: number | null = null;
  for (const layer of row.target_spec.layers) {
    if (layersByY.has(layer.y)) fail(taskId, `duplicate layer y=${layer.y}`);
    if (layer.rows.length === 0) fail(taskId, `layer y=${layer.y} rows must be a non-empty list`);
    for (const r of layer.rows) {
      width ??= r.length;
      if (r.length !== width) fail(taskId, `row width mismatch at y=${layer.y}`);
      for (const ch of r) if (!known.has(ch)) fail(taskId, `unknown inventory key '${ch}' at y=${layer.y}`);
    }
    depth ??= layer.rows.length;
    if (layer.rows.length !== depth) fail(taskId, `row count mismatch at y=${layer.y}`);
    layersByY.set(layer.y, [...layer.rows]);
  }
  const w = width ?? 0;
  const d = depth ?? 0;
  const ys = [...layersByY.keys()].sort((a, b) => a - b);
  const [sizeX, sizeY, sizeZ] = row.target_spec.size;

  let bboxFrom: Vec3;
  let bboxTo: Vec3;
  if (row.bbox) {
    const { from, to } = row.bbox;
    const lo = [0, 1, 2].map((i) => Math.min(from[i], to[i]));
    const hi = [0, 1, 2].map((i) => Math.max(from[i], to[i]));
    const bw = hi[0] - lo[0] + 1;
    const bh = hi[1] - lo[1] + 1;
    const bd = hi[2] - lo[2] + 1;
    if (w !== bw || d !== bd) {
      fail(taskId, `bbox size ${bw}x${bh}x${bd} does not match layers ${w}x${ys.length}x${d}`);
    }
    if (sizeX !== bw || sizeY !== bh || sizeZ !== bd) fail(taskId, `target_spec.size does not match the bbox`);
    if (ys[0] < lo[1] || ys[ys.length - 1] > hi[1]) fail(taskId, 'layer y out of bbox range');
    for (let y = lo[1]; y <= hi[1]; y++) if (!layersByY.has(y)) fail(taskId, `missing layer for y=${y} within bbox`);
    bboxFrom = [lo[0], lo[1], lo[2]];
    bboxTo = [hi[0], hi[1], hi[2]];
  } else {
    const minY = ys[0];
    const maxY = ys[ys.length - 1];
    if (sizeX !== w || sizeY !== maxY - minY + 1 || sizeZ !== d) fail(taskId, 'target_spec.size does not match the layers');
    for (let y = minY; y <= maxY; y++) if (!layersByY.has(y)) fail(taskId, `missing layer for y=${y}`);
    bboxFrom = [0, minY, 0];
    bboxTo = [Math.max(0, w - 1), maxY, Math.max(0, d - 1)];
  }
  return { taskId, bboxFrom, bboxTo, inventory, layersByY };
}

/** Validates a raw `data.json` row with the schema and normalises it; errors name the field. */
export function parseHouseBuildTask(raw: unknown): HouseBuildTaskSpec {
  const parsed = houseBuildTaskSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`HouseBuild task row: ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  }
  return houseBuildTaskSpec(parsed.data);
}

/** The dataset prompt key CoMLRL sees for a task (`house_build:<task_id>`). */
export function houseBuildPromptKey(task: HouseBuildTaskSpec): string {
  return `house_build:${task.taskId}`;
}

/** Inventory lookup: character → block id. */
export function inventoryMap(task: HouseBuildTaskSpec): ReadonlyMap<string, string> {
  return new Map(task.inventory);
}
