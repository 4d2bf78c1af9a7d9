import { describe, expect, it } from 'vitest';
import {
  bestSubrect,
  computeResourceLimits,
  extractCommandLines,
  houseBuildRewardBreakdown,
  parseHouseBuildFeedbackMode,
  parseHouseBuildTask,
  rowsToRects,
  spiderPenaltyAmount,
  validateCommands,
  type HouseBuildTaskSpec,
  type RpgState,
} from '../rewards/housebuild/index.js';
import { readRepoJson } from './shared-fixtures.js';

// The task set the package ships (the same file as ../shared/data/housebuild/data.json).
const rows = readRepoJson<unknown[]>('data/housebuild/data.json');
const task0002: HouseBuildTaskSpec = parseHouseBuildTask(rows[0]);

// Spider state of the vectors' default cases: attacks [1, 2, 3], damage 6 > 5 HP → penalty 0.1.
const state: RpgState = {
  playerHp: 5,
  spiderNum: 3,
  spiderAtkLow: 1,
  spiderAtkHigh: 3,
  spiderAtkValues: [1, 2, 3],
  spiderTotalDmg: 6.0,
};

// Task 0002 target (data.json): the floor y=0, z 1..5 is white_concrete (30 cells); y=4, z 1..5 is
// stone_bricks (30 cells); 122 of the 294 cells are air. A floor fill plus a y=4 bricks fill
// therefore matches 122 (air) + 30 + 30 = 182 cells.
const FLOOR = '/fill 0 0 1 5 0 5 white_concrete';
const BRICKS = '/fill 0 4 1 5 4 5 stone_bricks';

describe('HouseBuild extraction quirks (hand-derived)', () => {
  it('keeps only the first fenced block and drops a bare-word first line (even "kill")', () => {
    const a1 = 'Here you go:\n```mcfunction\n' + FLOOR + '\n```\n```\n/fill 0 4 0 5 4 0 stone_stairs\n```';
    const a2 = '```\nkill\n' + BRICKS + '\n```';
    expect(extractCommandLines(a1)).toEqual([FLOOR]);
    expect(extractCommandLines(a2)).toEqual([BRICKS]);
    const b = houseBuildRewardBreakdown(task0002, [a1, a2], state);
    expect(b.has_kill).toBe(false);
    expect(b.metrics.match_correct).toBe(182);
    expect(b.reward).toBe(182 / 294 - Math.min(1, 6 / 5) * 0.1);
  });

  it('splits lines where Python splitlines does (NEL, U+2028), and strips list markers', () => {
    expect(extractCommandLines(`- ${FLOOR}\u0085/kill\u2028 2) ${BRICKS}\n*\n1.`)).toEqual([FLOOR, '/kill', BRICKS]);
  });
});

describe('HouseBuild validation order (hand-derived)', () => {
  const lines = [
    '/fill 0 0 0 9 0 0 stone', // block is checked before the bbox
    '/fill 0 0 0 9 0 0 air', // air is allowed, x=9 is outside 0..5
    '/fill 0 7 0 0 7 0 air replace', // the bbox is checked before the fill mode
    '/fill 0 0 0 0 0 0 air keep', // inside the bbox: now the mode is the reason
    '/killall',
    '/damage @e 5',
    '/FILL 5 0 5 0 0 1 obsidian', // 6·1·5 = 30 > obsidian budget 9 (ceil(12/2) + 12//4)
    '/fill 5 4 5 0 4 1 stone_bricks', // reversed corners kept as written; 30 ≤ 40
    '/Kill @e[type=spider]',
  ];
  const out = validateCommands(lines, {
    allowedBlocks: ['white_concrete', 'obsidian', 'stone_stairs', 'stone_bricks', 'planks'],
    bboxFrom: [0, 0, 0],
    bboxTo: [5, 6, 6],
    maxCommands: 300,
    resourceLimits: computeResourceLimits(task0002, 2),
  });

  it('gives each line the reason of the first failing check', () => {
    expect(out.rejected).toEqual([
      { line: lines[0], reason: 'block not allowed: stone' },
      { line: lines[1], reason: 'fill coord out of bbox' },
      { line: lines[2], reason: 'fill coord out of bbox' },
      { line: lines[3], reason: 'fill modes (replace/keep/...) not allowed' },
      { line: lines[4], reason: 'unsupported command: killall' },
      { line: lines[5], reason: 'unsupported command: damage' },
      { line: lines[6], reason: 'exceeds resource limit for obsidian: 30>9' },
    ]);
    expect(out.accepted).toEqual(['/fill 5 4 5 0 4 1 stone_bricks', '/kill @e[type=spider]']);
  });

  it('counts /kill toward the command cap', () => {
    const capped = validateCommands(['/kill', FLOOR], {
      allowedBlocks: ['white_concrete'],
      bboxFrom: [0, 0, 0],
      bboxTo: [5, 6, 6],
      maxCommands: 1,
    });
    expect(capped.accepted).toEqual(['/kill']);
    expect(capped.rejected).toEqual([{ line: FLOOR, reason: 'exceeds max_commands=1' }]);
  });

  it('rejects coordinates Python int() refuses: decimals and more than 4300 digits', () => {
    const big = '1'.repeat(4301);
    const res = validateCommands([`/fill 0 0 1 5 0 ${big} white_concrete`, '/fill 0.0 0 1 5 0 5 white_concrete'], {
      allowedBlocks: ['white_concrete'],
      bboxFrom: [0, 0, 0],
      bboxTo: [5, 6, 6],
      maxCommands: 10,
    });
    expect(res.rejected.map((r) => r.reason)).toEqual([
      'fill coords must be absolute integers (no ~)',
      'fill coords must be absolute integers (no ~)',
    ]);
  });
});

describe('HouseBuild reward pieces (hand-derived)', () => {
  it('limits per agent: ceil(c/n) + floor(c/2n) on task 0002 counts', () => {
    // Counts C 68, O 12, S 36, B 54, D 2 (data.json "count"); n = 2:
    // 34+17=51, 6+3=9, 18+9=27, 27+13=40, 1+0=1.
    expect(computeResourceLimits(task0002, 2)).toEqual({
      obsidian: 9,
      planks: 1,
      stone_bricks: 40,
      stone_stairs: 27,
      white_concrete: 51,
    });
  });

  it('spider penalty min(1, dmg/hp)·0.1 and none without HP or damage', () => {
    expect(spiderPenaltyAmount({ ...state, spiderTotalDmg: 4.0 })).toBe((4 / 5) * 0.1);
    expect(spiderPenaltyAmount({ ...state, playerHp: 0 })).toBe(0);
    expect(spiderPenaltyAmount(null)).toBe(0);
  });

  it('agent 2 overwrites agent 1 (same fill, different blocks; unlimited resources)', () => {
    const obsidianFloor = FLOOR.replace('white_concrete', 'obsidian');
    const b = houseBuildRewardBreakdown(task0002, [FLOOR, `${obsidianFloor}\n/kill`], state, { limitedResource: false });
    // The floor ends obsidian: 30 floor cells wrong, 122 air right → 122/294.
    expect(b.metrics.match_correct).toBe(122);
    expect(b.reward).toBe(122 / 294);
  });

  it('rowsToRects emits unfinished rectangles before the ones a row opens or continues', () => {
    // Rows z=0..2 of 'AAB','AAB','ACB': A=air, B=x, C=y. Row 2 does not continue A[0..1], so it
    // is emitted first; then, after the last row, the open ones in run order: A[0], C[1], B[2].
    const inv = new Map([
      ['A', 'air'],
      ['B', 'x'],
      ['C', 'y'],
    ]);
    expect(rowsToRects(['AAB', 'AAB', 'ACB'], inv, 0, 0)).toEqual([
      { x1: 0, z1: 0, x2: 1, z2: 1, block: 'air' },
      { x1: 0, z1: 2, x2: 0, z2: 2, block: 'air' },
      { x1: 1, z1: 2, x2: 1, z2: 2, block: 'y' },
      { x1: 2, z1: 0, x2: 2, z2: 2, block: 'x' },
    ]);
  });

  it('bestSubrect prefers the widest of equal areas', () => {
    // 6×5 rectangle, budget 10: widths 6..1 give areas 6, 10 (w=5,d=2), 8, 9, 10, 5 → w=5, d=2.
    expect(bestSubrect(0, 1, 5, 5, 10)).toEqual([0, 1, 4, 2, 10]);
    // Budget 0: nothing fits.
    expect(bestSubrect(0, 1, 5, 5, 0)).toEqual([0, 1, 0, 1, 0]);
  });

  it('reads feedback modes as the reference does and rejects unknown ones', () => {
    expect(parseHouseBuildFeedbackMode(' Score ')).toBe('score_feedback');
    expect(parseHouseBuildFeedbackMode('rect-modification')).toBe('rect_modification');
    expect(() => parseHouseBuildFeedbackMode('expert_edits')).toThrow(/not implemented.*score_feedback/);
  });

  it('names the field of a malformed task row', () => {
    expect(() => parseHouseBuildTask({ task_id: 'x', inventory: {}, target_spec: {} })).toThrow(/target_spec/);
  });
});
