/**
 * Replay buffer, minibatch plans, one-step TD targets, returns, advantage normalization and
 * explained variance — hand-derived numbers.
 */
import { describe, expect, it } from 'vitest';
import {
  agentView,
  discountedReturns,
  explainedVariance,
  groupByTurn,
  normalizeAdvantages,
  planMinibatches,
  ReplayBuffer,
  tdTargets,
  type JointTransition,
} from '../src/buffer/index.js';
import { createRng } from '../src/util/rng.js';

function transition(episode: number, turn: number, agents = 2): JointTransition {
  return {
    episode,
    turn,
    generation: 0,
    globalInfo: { turn, numTurns: 3, lastReward: null, maxReward: 1 },
    nextGlobalInfo: null,
    reward: turn,
    done: false,
    nextObservations: null,
    joint: null,
    agents: Array.from({ length: agents }, (_, i) => ({
      prompt: `p${i}`,
      observation: `o${i}`,
      promptIds: [i],
      completionIds: [10 + i],
      action: `a${i}`,
      behaviourLogProb: -1,
      policyVersion: 0,
      criticIds: [i],
      nextCriticIds: null,
      value: 0,
      target: 0,
      return: 0,
    })),
  };
}

describe('one-step TD targets', () => {
  it('bootstraps from the next stored value and not after the last step', () => {
    // r = [0, 0, 1], V = [0.5, 0.2, 0.7], γ = 0.9:
    // y0 = 0 + 0.9·0.2 = 0.18, y1 = 0 + 0.9·0.7 = 0.63, y2 = 1 (terminal, no bootstrap)
    const y = tdTargets([0, 0, 1], [0.5, 0.2, 0.7], 0.9);
    expect(y[0]).toBeCloseTo(0.18, 12);
    expect(y[1]).toBeCloseTo(0.63, 12);
    expect(y[2]).toBe(1);
    // δ = y − V = [−0.32, 0.43, 0.3]
    expect(y.map((v, t) => v - [0.5, 0.2, 0.7][t]).map((d) => Number(d.toFixed(10)))).toEqual([-0.32, 0.43, 0.3]);
  });

  it('early termination: the trajectory simply ends, its last step has no bootstrap', () => {
    // An episode of horizon 4 stopped after turn 2: r = [0.3, 0.5], V = [0.1, 0.4], γ = 0.9
    // y0 = 0.3 + 0.9·0.4 = 0.66, y1 = 0.5
    const y = tdTargets([0.3, 0.5], [0.1, 0.4], 0.9);
    expect(y[0]).toBeCloseTo(0.66, 12);
    expect(y[1]).toBe(0.5);
    // Single turn: y = r.
    expect(tdTargets([0.25], [0.9], 0.9)).toEqual([0.25]);
    expect(() => tdTargets([1, 2], [1], 0.9)).toThrow(/2 rewards but 1 values/);
  });

  it('discounted Monte-Carlo returns (logging)', () => {
    // r = [1, 0, 2], γ = 0.5: G2 = 2, G1 = 0 + 0.5·2 = 1, G0 = 1 + 0.5·1 = 1.5
    expect(discountedReturns([1, 0, 2], 0.5)).toEqual([1.5, 1, 2]);
  });

  it('advantage z-score: population std, floor 1e-6, a group of one unchanged', () => {
    // [1, 2, 3]: mean 2, std √(2/3) → ±1/√(2/3) = ±1.2247…
    const a = normalizeAdvantages([1, 2, 3]);
    expect(a[0]).toBeCloseTo(-Math.sqrt(1.5), 12);
    expect(a[1]).toBe(0);
    expect(a[2]).toBeCloseTo(Math.sqrt(1.5), 12);
    expect(normalizeAdvantages([0.7])).toEqual([0.7]);
    expect(normalizeAdvantages([0.4, 0.4])).toEqual([0, 0]);
  });

  it('explained variance 1 − Var(y − v)/Var(y)', () => {
    // y = [0, 1, 2, 3] (Var 1.25); v = [0, 1, 2, 2]: y − v = [0, 0, 0, 1] (Var 0.1875) → 1 − 0.15 = 0.85
    expect(explainedVariance([0, 1, 2, 2], [0, 1, 2, 3])).toBeCloseTo(0.85, 12);
    expect(explainedVariance([1, 2], [1, 2])).toBe(1);
    expect(explainedVariance([1, 2], [3, 3])).toBeNaN();
  });
});

describe('replay buffer', () => {
  it('fills to capacity, refuses to overfill, drains everything (nothing kept between flushes)', () => {
    const buf = new ReplayBuffer(3);
    expect(buf.push(transition(0, 0))).toBe(false);
    expect(buf.push(transition(0, 1))).toBe(false);
    expect(buf.push(transition(1, 0))).toBe(true);
    expect(buf.full).toBe(true);
    expect(() => buf.push(transition(1, 1))).toThrow(/full \(3 transitions\)/);
    const out = buf.drain();
    expect(out.map((t) => [t.episode, t.turn])).toEqual([
      [0, 0],
      [0, 1],
      [1, 0],
    ]);
    expect(buf.size).toBe(0);
    expect(buf.drain()).toEqual([]);
    expect(() => new ReplayBuffer(0)).toThrow(/capacity must be an integer >= 1/);
  });

  it('per-agent views give each agent its own part of every joint transition', () => {
    const buf = new ReplayBuffer(4);
    buf.push(transition(0, 0));
    buf.push(transition(0, 1));
    const v1 = buf.agentView(1);
    expect(v1.map((s) => [s.agent, s.turn, s.step.observation, s.step.completionIds[0]])).toEqual([
      [1, 0, 'o1', 11],
      [1, 1, 'o1', 11],
    ]);
    expect(() => agentView(buf.contents(), 2)).toThrow(/no agent 2/);
  });
});

describe('minibatch plans', () => {
  it('per epoch, turn groups ascending, each index exactly once, seeded shuffles', () => {
    const turns = [1, 0, 1, 0, 2, 1, 0];
    const plan = planMinibatches(turns, { batchSize: 2, epochs: 3, rng: createRng(4) });
    expect(groupByTurn(turns)).toEqual([
      [0, [1, 3, 6]],
      [1, [0, 2, 5]],
      [2, [4]],
    ]);
    for (let e = 0; e < 3; e++) {
      const mbs = plan.filter((m) => m.epoch === e);
      // Turn 0 (3 items → 2 + 1), turn 1 (2 + 1), turn 2 (1).
      expect(mbs.map((m) => [m.turn, m.indices.length])).toEqual([
        [0, 2],
        [0, 1],
        [1, 2],
        [1, 1],
        [2, 1],
      ]);
      expect(mbs.flatMap((m) => m.indices).sort()).toEqual([0, 1, 2, 3, 4, 5, 6]);
      for (const m of mbs) for (const j of m.indices) expect(turns[j]).toBe(m.turn);
    }
    // Same seed, same plan; epochs are reshuffled.
    expect(planMinibatches(turns, { batchSize: 2, epochs: 3, rng: createRng(4) })).toEqual(plan);
    const orders = [0, 1, 2].map((e) => plan.filter((m) => m.epoch === e && m.turn === 0).flatMap((m) => m.indices).join(','));
    expect(new Set(orders).size).toBeGreaterThan(1);
    expect(() => planMinibatches(turns, { batchSize: 0, epochs: 1, rng: createRng(0) })).toThrow(/batchSize/);
  });
});
