import { describe, expect, it } from 'vitest';
import { ITEM_PHASES, ITEM_TRAINERS, PASS_MODES, benchItems, itemsBenchResultSchema, itemsTable, medianFigures, passRatios, phasesOf, type ItemFigures } from '../bench/items.js';
import { backendUnderTest } from './backend-under-test.js';

process.env.COMLRL_BACKEND = backendUnderTest('wasm');

// A small model and 3 new tokens: every trainer in both modes, one warm-up and one timed item each.
const SMALL = { vocabSize: 600, hiddenSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16, intermediateSize: 128 };

describe('items bench', () => {
  it('times every trainer in both modes, phase by phase, within the item', async () => {
    const r = await benchItems({ rounds: 1, items: 1, warmupItems: 1, maxNewTokens: 3, generations: 2, shape: SMALL });
    // What the child process prints parses back.
    expect(itemsBenchResultSchema.parse(JSON.parse(JSON.stringify(r)))).toEqual(r);
    expect(r.backend).toBe(process.env.COMLRL_BACKEND);
    expect(r.cores).toBeGreaterThan(0);
    expect(r.loadBefore).toHaveLength(3);
    expect(r.loadAfter).toHaveLength(3);
    // r = 16 on q, k, v, o of 2 layers at hidden 64 (q 64 → 64, k and v 64 → 32, o 64 → 64):
    // 16 · ((64 + 64) + 2 · (64 + 32) + (64 + 64)) · 2 layers = 14,336.
    expect(r.adapterParameters).toBe(14_336);
    expect(r.rounds).toHaveLength(ITEM_TRAINERS.length * PASS_MODES.length);
    expect(r.medians).toHaveLength(ITEM_TRAINERS.length * PASS_MODES.length);
    for (const trainer of ITEM_TRAINERS) {
      for (const mode of PASS_MODES) {
        const m = r.medians.find((x) => x.trainer === trainer && x.mode === mode);
        expect(m, `${trainer} ${mode}`).toBeDefined();
        const f = m as ItemFigures;
        expect(Object.keys(f.phases).sort()).toEqual(phasesOf(trainer).sort());
        expect(f.item_s).toBeGreaterThan(0);
        // The timed phases lie inside the item: none negative, the remainder (other) not negative.
        for (const p of phasesOf(trainer)) {
          if (p !== 'other') expect(f.phases[p], `${trainer} ${mode} ${p}`).toBeGreaterThanOrEqual(0);
        }
        const named = phasesOf(trainer).filter((p) => p !== 'other').reduce((a, p) => a + (f.phases[p] ?? 0), 0);
        expect(named).toBeLessThanOrEqual(f.item_s + 1e-9);
        expect(named + (f.phases.other ?? 0)).toBeCloseTo(f.item_s, 9);
        // Every item samples, scores, trains and steps.
        for (const p of ['generation', 'scoring', 'backward', 'optimizer'] as const) expect(f.phases[p], `${trainer} ${mode} ${p}`).toBeGreaterThan(0);
        if (trainer !== 'magrpo') expect(f.phases.critic).toBeGreaterThan(0);
      }
      // Ratios: per-agent over joint, from the two modes' medians.
      const joint = r.medians.find((x) => x.trainer === trainer && x.mode === 'joint') as ItemFigures;
      const perAgent = r.medians.find((x) => x.trainer === trainer && x.mode === 'per-agent') as ItemFigures;
      const q = r.ratios.find((x) => x.trainer === trainer);
      expect(q?.item).toBeCloseTo(perAgent.item_s / joint.item_s, 12);
      expect(q?.phases.generation).toBeCloseTo((perAgent.phases.generation ?? NaN) / (joint.phases.generation ?? NaN), 12);
    }
    const table = itemsTable(r).join('\n');
    for (const label of ['MAGRPO', 'CoLLM-DC', 'CoLLM-CC', 'per-agent / joint', 'load average', ...ITEM_PHASES]) expect(table).toContain(label);
  });

  it('takes medians over rounds and divides per-agent by joint', () => {
    const fig = (mode: 'joint' | 'per-agent', item: number, generation: number): ItemFigures => ({
      trainer: 'magrpo',
      mode,
      item_s: item,
      phases: { generation, scoring: 1, backward: 1, optimizer: 1, reward: 0, other: item - generation - 3 },
    });
    // Rounds 5, 9, 6 (joint) and 12, 10, 30 (per-agent): medians 6 and 12.
    const medians = medianFigures([fig('joint', 5, 1), fig('per-agent', 12, 4), fig('joint', 9, 2), fig('per-agent', 10, 3), fig('joint', 6, 2), fig('per-agent', 30, 8)]);
    expect(medians.map((m) => [m.mode, m.item_s, m.phases.generation])).toEqual([
      ['joint', 6, 2],
      ['per-agent', 12, 4],
    ]);
    const [q] = passRatios(medians);
    expect(q.item).toBe(2);
    expect(q.phases.generation).toBe(2);
    expect(q.phases.scoring).toBe(1);
    // A phase with no joint time has no ratio.
    expect(q.phases.reward).toBeNull();
  });
});
