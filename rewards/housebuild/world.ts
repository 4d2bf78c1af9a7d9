/**
 * The HouseBuild world: the target block of every bbox cell, the simulated result of accepted
 * `/fill` commands (last write wins, empty cells are air), the match score and IoU, and the
 * per-agent resource limits (tasks-reference §2.1 steps 3–4).
 */
import { pyStrip } from '../../src/util/python-text.js';
import { parseFill } from './fill.js';
import type { HouseBuildTaskSpec } from './task.js';

/** Block ids the reference treats as empty. */
export const AIR_BLOCKS: ReadonlySet<string> = new Set(['air', 'cave_air', 'void_air']);

/** `normalize_block_id`: strip, then drop one leading `minecraft:`. Case is kept (case-sensitive). */
export function normalizeBlockId(blockId: string): string {
  const s = pyStrip(blockId);
  return s.startsWith('minecraft:') ? s.slice('minecraft:'.length) : s;
}

/** True for air, cave_air and void_air (after normalisation). */
export function isAir(blockId: string): boolean {
  return AIR_BLOCKS.has(normalizeBlockId(blockId));
}

/** Inclusive integer bounds of a bbox given by two corners in any order. */
export interface Bounds {
  readonly minX: number;
  readonly maxX: number;
  readonly minY: number;
  readonly maxY: number;
  readonly minZ: number;
  readonly maxZ: number;
}

/** Bounds of the box spanned by two corners. */
export function boundsOf(from: readonly number[], to: readonly number[]): Bounds {
  return {
    minX: Math.min(from[0], to[0]),
    maxX: Math.max(from[0], to[0]),
    minY: Math.min(from[1], to[1]),
    maxY: Math.max(from[1], to[1]),
    minZ: Math.min(from[2], to[2]),
    maxZ: Math.max(from[2], to[2]),
  };
}

/** One target cell. */
export interface TargetCell {
  readonly x: number;
  readonly y: number;
  readonly z: number;
  /** Normalised block id (air included). */
  readonly block: string;
}

const targetCache = new WeakMap<HouseBuildTaskSpec, readonly TargetCell[]>();

/**
 * `build_expected_map`: every cell of every layer in the bbox's y range, in the reference's order
 * (y ascending, then row z, then column x), with `x = min_x + column`, `z = min_z + row`.
 */
export function targetCells(task: HouseBuildTaskSpec): readonly TargetCell[] {
  const cached = targetCache.get(task);
  if (cached) return cached;
  const inv = new Map(task.inventory.map(([k, v]) => [k, normalizeBlockId(v)] as const));
  const b = boundsOf(task.bboxFrom, task.bboxTo);
  const cells: TargetCell[] = [];
  for (let y = b.minY; y <= b.maxY; y++) {
    const rows = task.layersByY.get(y);
    if (!rows) throw new Error(`HouseBuild task ${task.taskId}: missing layer y=${y}`);
    rows.forEach((row, rz) => {
      let rx = 0;
      for (const ch of row) {
        const block = inv.get(ch);
        if (block === undefined) throw new Error(`HouseBuild task ${task.taskId}: unknown inventory key '${ch}'`);
        cells.push({ x: b.minX + rx, y, z: b.minZ + rz, block });
        rx++;
      }
    });
  }
  targetCache.set(task, cells);
  return cells;
}

/** `count_expected_blocks`: block id → number of target cells (air included). */
export function countTargetBlocks(task: HouseBuildTaskSpec): Map<string, number> {
  const counts = new Map<string, number>();
  for (const c of targetCells(task)) counts.set(c.block, (counts.get(c.block) ?? 0) + 1);
  return counts;
}

/**
 * `compute_resource_limits(task, n)`: for every non-air block in the target or the inventory,
 * `ceil(c/n) + floor(c/(2n))`, keys sorted. The limit applies to each agent separately.
 */
export function computeResourceLimits(task: HouseBuildTaskSpec, numAgents: number): Record<string, number> {
  const n = Math.max(1, Math.trunc(numAgents));
  const counts = countTargetBlocks(task);
  const blocks = new Set<string>([...counts.keys(), ...task.inventory.map(([, v]) => normalizeBlockId(v))]);
  const limits: Record<string, number> = {};
  for (const block of [...blocks].sort()) {
    if (AIR_BLOCKS.has(block)) continue;
    const c = counts.get(block) ?? 0;
    limits[block] = Math.floor((c + n - 1) / n) + Math.floor(c / (n * 2));
  }
  return limits;
}

/** The simulated bbox: one block id per cell, `air` where nothing was placed. */
export interface World {
  readonly bounds: Bounds;
  /** Block id at a cell, `air` outside the bbox or where nothing was placed. */
  get(x: number, y: number, z: number): string;
  /** Every bbox cell in scan order (y, then x, then z). */
  cells(): Iterable<TargetCell>;
}

class GridWorld implements World {
  private readonly grid: string[];
  private readonly sx: number;
  private readonly sz: number;
  constructor(readonly bounds: Bounds) {
    this.sx = bounds.maxX - bounds.minX + 1;
    this.sz = bounds.maxZ - bounds.minZ + 1;
    const sy = bounds.maxY - bounds.minY + 1;
    this.grid = new Array<string>(this.sx * sy * this.sz).fill('air');
  }
  private index(x: number, y: number, z: number): number {
    const b = this.bounds;
    if (x < b.minX || x > b.maxX || y < b.minY || y > b.maxY || z < b.minZ || z > b.maxZ) return -1;
    return ((y - b.minY) * this.sx + (x - b.minX)) * this.sz + (z - b.minZ);
  }
  get(x: number, y: number, z: number): string {
    const i = this.index(x, y, z);
    return i < 0 ? 'air' : this.grid[i];
  }
  set(x: number, y: number, z: number, block: string): void {
    const i = this.index(x, y, z);
    if (i >= 0) this.grid[i] = block;
  }
  *cells(): Iterable<TargetCell> {
    const b = this.bounds;
    for (let y = b.minY; y <= b.maxY; y++) {
      for (let x = b.minX; x <= b.maxX; x++) {
        for (let z = b.minZ; z <= b.maxZ; z++) yield { x, y, z, block: this.get(x, y, z) };
      }
    }
  }
}

/**
 * `simulate_commands_to_scan_blocks`: apply `/fill` commands in order on an empty bbox; every cell
 * of a fill's min/max box is set, so later commands overwrite earlier ones. Other commands (`/kill`)
 * and malformed lines are skipped. Cells outside the bbox are never scanned, so they are not stored.
 */
export function simulateCommands(commands: readonly string[], bboxFrom: readonly number[], bboxTo: readonly number[]): World {
  const world = new GridWorld(boundsOf(bboxFrom, bboxTo));
  const b = world.bounds;
  for (const cmd of commands) {
    const fill = parseFill(cmd);
    if (!fill) continue;
    if (fill.coords.some((v) => v === null)) throw new Error(`simulateCommands: non-integer coordinate in '${cmd}'`);
    const [x1, y1, z1, x2, y2, z2] = fill.coords as number[];
    const block = normalizeBlockId(fill.block);
    // Clamped to the bbox: identical scan result, bounded work for any coordinates.
    for (let y = Math.max(Math.min(y1, y2), b.minY); y <= Math.min(Math.max(y1, y2), b.maxY); y++) {
      for (let x = Math.max(Math.min(x1, x2), b.minX); x <= Math.min(Math.max(x1, x2), b.maxX); x++) {
        for (let z = Math.max(Math.min(z1, z2), b.minZ); z <= Math.min(Math.max(z1, z2), b.maxZ); z++) {
          world.set(x, y, z, block);
        }
      }
    }
  }
  return world;
}

/** `score_house_builder` output, under the reference's keys. */
export interface HouseBuildMatchMetrics {
  /** Target cells whose observed block id equals the target id (air cells included). */
  match_correct: number;
  /** Number of target cells (294 for every shipped task). */
  match_total: number;
  /** match_correct / match_total. */
  score_match: number;
  /** Same as score_match (the reward's base). */
  score_mean: number;
  /** Non-air vs non-air intersection over union, ignoring block type; logged only. */
  iou: number;
}

/** Scores a simulated world against the task's target. */
export function scoreWorld(task: HouseBuildTaskSpec, world: World): HouseBuildMatchMetrics {
  let correct = 0;
  let total = 0;
  let expectedNonAir = 0;
  let intersection = 0;
  for (const cell of targetCells(task)) {
    total++;
    const obs = world.get(cell.x, cell.y, cell.z);
    if (obs === cell.block) correct++;
    if (!AIR_BLOCKS.has(cell.block)) {
      expectedNonAir++;
      if (!AIR_BLOCKS.has(obs)) intersection++;
    }
  }
  let observedNonAir = 0;
  for (const cell of world.cells()) if (!AIR_BLOCKS.has(cell.block)) observedNonAir++;
  const union = expectedNonAir + observedNonAir - intersection;
  const iou = union > 0 ? intersection / union : 0.0;
  const scoreMatch = total ? correct / total : 0.0;
  return { match_correct: correct, match_total: total, score_match: scoreMatch, score_mean: scoreMatch, iou };
}
