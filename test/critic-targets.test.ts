/**
 * Critic targets beyond one-step TD (`critic_target: td | mc | nstep | lambda`) and the critics'
 * per-flush diagnostics (`critic/ev_mc`, `critic/ev_target`, `critic/delta_reward_corr`):
 * hand-derived numbers on a 3-turn episode, ended and cut; the config's refusals; and CoLLM-CC /
 * CoLLM-DC runs whose buffer cuts episodes, checked against an independent (forward-view)
 * computation from what the trace and the flushed transitions hold.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import type { JointTransition } from '../src/buffer/replay.js';
import { segmentTargets, type CriticTarget } from '../src/buffer/targets.js';
import type { CriticLM } from '../src/critic/value-model.js';
import type { Agent } from '../src/decpomdp/agent.js';
import type { GlobalInfo, LLMDecPOMDP, StepResult } from '../src/decpomdp/types.js';
import { MetricsLogger, readMetrics } from '../src/logging/metrics.js';
import { TensorBoardWriter } from '../src/logging/tensorboard.js';
import { pearsonCorrelation } from '../src/util/stats.js';
import { toyTasks, toyWords, type ToyTask } from '../envs/toy/index.js';
import { CoLLMCCTrainer } from '../trainers/collm/centralized.js';
import { criticTargetOf, parseCoLLMCCConfig, parseCoLLMDCConfig } from '../trainers/collm/config.js';
import { CoLLMDCTrainer } from '../trainers/collm/decentralized.js';
import { criticDiagnostics } from '../trainers/collm/diagnostics.js';
import { flushTargets } from '../trainers/collm/run.js';
import type { MetricRecord } from '../trainers/core/metrics.js';
import type { CriticEstimatesEvent, UpdateTraceEvent } from '../trainers/core/trace.js';
import { backendUnderTest } from './backend-under-test.js';
import { disposeCritics, toyCritics } from './collm-helpers.js';
import { disposeAgents, tempDir, tinyAgents } from './magrpo-helpers.js';
import { readEventDir } from './tensorboard-reader.js';

const close = (got: readonly number[], want: readonly number[], digits = 12) => {
  expect(got).toHaveLength(want.length);
  want.forEach((w, i) => expect(got[i]).toBeCloseTo(w, digits));
};

// ---------------------------------------------------------------------------------------------
// The targets of one 3-turn episode (no models needed).
// ---------------------------------------------------------------------------------------------

describe('critic targets of a 3-turn episode (hand-derived)', () => {
  // r = [0, 0.5, 1], V(h_0..h_2) = [0.2, 0.4, 0.6], γ = 0.9.
  const rewards = [0, 0.5, 1];
  const values = [0.2, 0.4, 0.6];
  const gamma = 0.9;
  const ended = { rewards, values, bootstrap: null };
  // The same three steps where a flush cut the episode after h_2: V(h_3) = 0.8.
  const cut = { rewards, values, bootstrap: 0.8 };
  const td: CriticTarget = { kind: 'td' };
  const mc: CriticTarget = { kind: 'mc' };
  const twoStep: CriticTarget = { kind: 'nstep', n: 2 };
  const half: CriticTarget = { kind: 'lambda', lambda: 0.5 };

  it('td: y_t = r_t + γ·V(h_{t+1}), no bootstrap after the episode ends, V at a cut', () => {
    // y0 = 0 + 0.9·0.4 = 0.36; y1 = 0.5 + 0.9·0.6 = 1.04; y2 = 1 (ended) or 1 + 0.9·0.8 = 1.72 (cut)
    close(segmentTargets(ended, td, gamma), [0.36, 1.04, 1]);
    close(segmentTargets(cut, td, gamma), [0.36, 1.04, 1.72]);
  });

  it('mc: the discounted return to the end, bootstrapped from V at a cut', () => {
    // Ended: G2 = 1; G1 = 0.5 + 0.9·1 = 1.4; G0 = 0 + 0.9·1.4 = 1.26
    close(segmentTargets(ended, mc, gamma), [1.26, 1.4, 1]);
    // Cut: G2 = 1 + 0.9·0.8 = 1.72; G1 = 0.5 + 0.9·1.72 = 2.048; G0 = 0.9·2.048 = 1.8432
    close(segmentTargets(cut, mc, gamma), [1.8432, 2.048, 1.72]);
  });

  it('nstep (n = 2): two rewards then γ²·V, the sum stopping at the end', () => {
    // y0 = 0 + 0.9·0.5 + 0.81·V2 = 0.45 + 0.486 = 0.936
    // Ended: y1 = 0.5 + 0.9·1 = 1.4 (nothing after the end); y2 = 1
    close(segmentTargets(ended, twoStep, gamma), [0.936, 1.4, 1]);
    // Cut: y1 = 0.5 + 0.9·1 + 0.81·0.8 = 2.048; y2 = 1 + 0.9·0.8 = 1.72 (one reward, then the cut)
    close(segmentTargets(cut, twoStep, gamma), [0.936, 2.048, 1.72]);
  });

  it('lambda (λ = 0.5): G^λ_t = r_t + γ·[(1 − λ)·V(h_{t+1}) + λ·G^λ_{t+1}], and y − V is the GAE sum', () => {
    // Ended: G2 = 1; G1 = 0.5 + 0.9·(0.5·0.6 + 0.5·1) = 0.5 + 0.72 = 1.22; G0 = 0.9·(0.5·0.4 + 0.5·1.22) = 0.9·0.81 = 0.729
    const y = segmentTargets(ended, half, gamma);
    close(y, [0.729, 1.22, 1]);
    // GAE: δ = [0 + 0.9·0.4 − 0.2, 0.5 + 0.9·0.6 − 0.4, 1 − 0.6] = [0.16, 0.64, 0.4], γλ = 0.45:
    // A2 = 0.4; A1 = 0.64 + 0.45·0.4 = 0.82; A0 = 0.16 + 0.45·0.82 = 0.529
    close(
      y.map((g, t) => g - values[t]),
      [0.529, 0.82, 0.4],
    );
    // Cut: G2 = 1 + 0.9·(0.5·0.8 + 0.5·0.8) = 1.72; G1 = 0.5 + 0.9·(0.3 + 0.86) = 1.544; G0 = 0.9·(0.2 + 0.772) = 0.8748
    close(segmentTargets(cut, half, gamma), [0.8748, 1.544, 1.72]);
  });

  it('the family meets at its ends: λ = 0 is td, λ = 1 and n ≥ L are mc, n = 1 is td', () => {
    for (const seg of [ended, cut]) {
      close(segmentTargets(seg, { kind: 'lambda', lambda: 0 }, gamma), segmentTargets(seg, td, gamma));
      close(segmentTargets(seg, { kind: 'lambda', lambda: 1 }, gamma), segmentTargets(seg, mc, gamma));
      close(segmentTargets(seg, { kind: 'nstep', n: 3 }, gamma), segmentTargets(seg, mc, gamma));
      close(segmentTargets(seg, { kind: 'nstep', n: 1 }, gamma), segmentTargets(seg, td, gamma));
    }
    expect(() => segmentTargets({ rewards: [1], values: [], bootstrap: null }, mc, gamma)).toThrow(/1 rewards but 0 values/);
  });

  it("a flush's transitions: each episode's stored steps, in any order, bootstrapped at its cut", () => {
    // Flush order: episode 1 turns 0–1 (cut after turn 1, V(h_2) = 0.8), then episode 0's tail
    // (turns 1–2, ended; its turn 0 was in an earlier flush), stored out of turn order.
    const tr = (episode: number, turn: number, reward: number) => ({ episode, turn, generation: 0, reward }) as unknown as JointTransition;
    const transitions = [tr(1, 0, 0.2), tr(0, 2, 1), tr(1, 1, 0), tr(0, 1, 0.5)];
    const values = [0.3, 0.6, 0.7, 0.4];
    // next: V(h_{t+1}) per transition (null after episode 0's end).
    const next = [0.7, null, 0.8, 0.6];
    // mc, γ = 0.9. Episode 1: G1 = 0 + 0.9·0.8 = 0.72, G0 = 0.2 + 0.9·0.72 = 0.848.
    // Episode 0: G2 = 1, G1 = 0.5 + 0.9·1 = 1.4.
    close(flushTargets(transitions, values, next, mc, 0.9), [0.848, 1, 0.72, 1.4]);
    // td is per transition: y = r + γ·next, y = r at the end.
    close(flushTargets(transitions, values, next, td, 0.9), [0.2 + 0.63, 1, 0.72, 0.5 + 0.54]);
    expect(() => flushTargets([tr(0, 0, 0), tr(0, 2, 0)], [0, 0], [0.1, null], mc, 0.9)).toThrow(/episode 0\/0 .* holds turns 1, 3 in one flush/);
  });
});

describe('critic_target config', () => {
  it('is absent by default (td; the config hash does not move) and takes its parameter', () => {
    for (const parse of [parseCoLLMDCConfig, parseCoLLMCCConfig]) {
      const d = parse({});
      expect('critic_target' in d || 'critic_target_n' in d || 'critic_lambda' in d).toBe(false);
      expect(criticTargetOf(d)).toEqual({ kind: 'td' });
      expect(criticTargetOf(parse({ critic_target: 'mc' }))).toEqual({ kind: 'mc' });
      expect(criticTargetOf(parse({ critic_target: 'nstep', critic_target_n: 3 }))).toEqual({ kind: 'nstep', n: 3 });
      expect(criticTargetOf(parse({ critic_target: 'lambda', critic_lambda: 0.9 }))).toEqual({ kind: 'lambda', lambda: 0.9 });
    }
  });

  it('refuses a parameter without its target, a target without its parameter, and bad values, by name', () => {
    for (const parse of [parseCoLLMDCConfig, parseCoLLMCCConfig]) {
      expect(() => parse({ critic_target: 'gae' })).toThrow(/critic_target must be one of 'td', 'mc', 'nstep', 'lambda'/);
      expect(() => parse({ critic_target_n: 2 })).toThrow(/critic_target_n applies to critic_target: nstep only \(critic_target is td\)/);
      expect(() => parse({ critic_target: 'lambda', critic_lambda: 0.5, critic_target_n: 2 })).toThrow(/critic_target_n applies to critic_target: nstep only \(critic_target is lambda\)/);
      expect(() => parse({ critic_target: 'mc', critic_lambda: 0.5 })).toThrow(/critic_lambda applies to critic_target: lambda only \(critic_target is mc\)/);
      expect(() => parse({ critic_target: 'nstep' })).toThrow(/critic_target: nstep needs critic_target_n/);
      expect(() => parse({ critic_target: 'lambda' })).toThrow(/critic_target: lambda needs critic_lambda/);
      expect(() => parse({ critic_target: 'nstep', critic_target_n: 0 })).toThrow(/critic_target_n must be an integer >= 1/);
      expect(() => parse({ critic_target: 'lambda', critic_lambda: 1.5 })).toThrow(/critic_lambda/);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// The diagnostics' builder on hand numbers (no models needed).
// ---------------------------------------------------------------------------------------------

describe('critic diagnostics (hand-derived)', () => {
  // Four transitions, two per turn: turn index, r_t, the stored return G_t.
  const rows = [
    { turn: 0, reward: 0, ret: 0.5 },
    { turn: 0, reward: 1, ret: 1.5 },
    { turn: 1, reward: 0.5, ret: 0.5 },
    { turn: 1, reward: 0.7, ret: 1.0 },
  ];
  const transitions = rows.map((r) => ({ turn: r.turn, reward: r.reward, agents: [{ return: r.ret }] }) as unknown as JointTransition);
  const values = [0.2, 0.6, 0.5, 0.3];
  const targets = [0.4, 0.8, 0.5, 0.5];
  const estimates = { values, targets, advantagesRaw: targets.map((y, j) => y - values[j]), advantages: [0, 0, 0, 0] };

  it('per turn and pooled; undefined values are left out', () => {
    const m = criticDiagnostics(transitions, estimates, null);
    // Turn 1: G = [0.5, 1.5] (Var 0.25), G − V = [0.3, 0.9] (Var 0.09): EV = 1 − 0.09/0.25 = 0.64.
    expect(m['critic/ev_mc/turn_1']).toBeCloseTo(0.64, 12);
    // y = [0.4, 0.8], y − V = [0.2, 0.2] (Var 0): EV = 1. δ = [0.2, 0.2] is constant: no correlation.
    expect(m['critic/ev_target/turn_1']).toBeCloseTo(1, 12);
    expect('critic/delta_reward_corr/turn_1' in m).toBe(false);
    // Turn 2: G = [0.5, 1] (Var 0.0625), G − V = [0, 0.7] (Var 0.1225): EV = 1 − 1.96 = −0.96.
    expect(m['critic/ev_mc/turn_2']).toBeCloseTo(-0.96, 12);
    // y = [0.5, 0.5] is constant: no EV. δ = [0, 0.2] against r = [0.5, 0.7]: two points on a rising line, 1.
    expect('critic/ev_target/turn_2' in m).toBe(false);
    expect(m['critic/delta_reward_corr/turn_2']).toBeCloseTo(1, 12);
    // Pooled: G = [0.5, 1.5, 0.5, 1] (Var 0.171875), G − V = [0.3, 0.9, 0, 0.7] (Var 0.121875):
    // EV = 1 − 0.121875/0.171875 = 16/55.
    expect(m['critic/ev_mc']).toBeCloseTo(16 / 55, 12);
    // y = [0.4, 0.8, 0.5, 0.5] (Var 0.0225), y − V = [0.2, 0.2, 0, 0.2] (Var 0.0075): EV = 2/3.
    expect(m['critic/ev_target']).toBeCloseTo(2 / 3, 12);
    // δ − mean = [0.05, 0.05, −0.15, 0.05], r − mean = [−0.55, 0.45, −0.05, 0.15]:
    // Σ products 0.01, Σ δ² 0.03, Σ r² 0.53.
    expect(m['critic/delta_reward_corr']).toBeCloseTo(0.01 / Math.sqrt(0.03 * 0.53), 12);
    expect(Object.keys(m).sort()).toEqual(
      ['critic/delta_reward_corr', 'critic/delta_reward_corr/turn_2', 'critic/ev_mc', 'critic/ev_mc/turn_1', 'critic/ev_mc/turn_2', 'critic/ev_target', 'critic/ev_target/turn_1'].sort(),
    );
    // A critic an agent owns (CoLLM-DC): under agent_i/critic_, as its agent_i/critic_grad_norm.
    const dc = criticDiagnostics(transitions, estimates, 1);
    expect(dc['agent_1/critic_ev_mc/turn_1']).toBeCloseTo(0.64, 12);
    expect(dc['agent_1/critic_ev_target']).toBeCloseTo(2 / 3, 12);
    // One row: nothing is defined.
    expect(criticDiagnostics(transitions.slice(0, 1), { values: [0.2], targets: [0.4], advantagesRaw: [0.2], advantages: [0] }, null)).toEqual({});
  });

  it('Pearson correlation: NaN below two pairs or for a constant list (rounding noise included)', () => {
    expect(pearsonCorrelation([1, 2, 3], [2, 4, 6])).toBeCloseTo(1, 12);
    expect(pearsonCorrelation([1, 2, 3], [3, 2, 1])).toBeCloseTo(-1, 12);
    expect(pearsonCorrelation([1], [1])).toBeNaN();
    // 0.1 three times has a computed mean of 0.10000000000000002, not 0.1.
    expect(pearsonCorrelation([0.1, 0.1, 0.1], [1, 2, 3])).toBeNaN();
  });
});

// ---------------------------------------------------------------------------------------------
// Trainers on tiny checkpoints: the buffer cuts episodes.
// ---------------------------------------------------------------------------------------------

interface State {
  readonly turn: number;
}

/** Three turns; each turn pays from the joint action's text, so returns vary between episodes. */
class TextRewardEnv implements LLMDecPOMDP<ToyTask, State> {
  readonly name = 'text-reward';
  readonly numAgents = 2;
  readonly horizon = 3;
  initialState(): State {
    return { turn: 0 };
  }
  observe(s: State, agent: number): string {
    return agent === 0 ? `cue red turn ${s.turn}` : `partner red none`;
  }
  async step(s: State, actions: readonly string[]): Promise<StepResult<State>> {
    const reward = ((actions[0].length + 2 * actions[1].length + s.turn) % 7) / 7;
    const turn = s.turn + 1;
    return { reward, next: { turn }, done: turn >= this.horizon, info: {} };
  }
  globalInfo(s: State): GlobalInfo {
    return { turn: s.turn, numTurns: this.horizon, lastReward: null, maxReward: 1 };
  }
}

/**
 * The k-step return from step t of a segment: k rewards, then γ^k·V(h_{t+k}) — the next stored
 * value, or past the segment's end `bootstrap` (0 after the episode's end).
 */
function kStepReturn(r: readonly number[], v: readonly number[], bootstrap: number, gamma: number, t: number, k: number): number {
  let y = 0;
  for (let i = 0; i < k; i++) y += gamma ** i * r[t + i];
  return y + gamma ** k * (t + k < r.length ? v[t + k] : bootstrap);
}

/**
 * The expected targets of a segment, written independently of segmentTargets' backward
 * recursions: sums of k-step returns, and TD(λ) in its forward view — the λ-weighted mixture
 * (1 − λ)·Σ_{k<M} λ^{k−1}·G^(k) + λ^{M−1}·G^(M) of the k-step returns up to the segment's M steps.
 */
function expectedTargets(target: CriticTarget, r: readonly number[], v: readonly number[], bootstrap: number, gamma: number): number[] {
  return r.map((_, t) => {
    const steps = r.length - t;
    switch (target.kind) {
      case 'td':
        return kStepReturn(r, v, bootstrap, gamma, t, 1);
      case 'mc':
        return kStepReturn(r, v, bootstrap, gamma, t, steps);
      case 'nstep':
        return kStepReturn(r, v, bootstrap, gamma, t, Math.min(target.n, steps));
      case 'lambda': {
        const l = target.lambda;
        let y = l ** (steps - 1) * kStepReturn(r, v, bootstrap, gamma, t, steps);
        for (let k = 1; k < steps; k++) y += (1 - l) * l ** (k - 1) * kStepReturn(r, v, bootstrap, gamma, t, k);
        return y;
      }
    }
  });
}

/** 1 − Var(y − v)/Var(y), written out here (population variances). */
function ev(v: readonly number[], y: readonly number[]): number {
  const m = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const variance = (xs: readonly number[]) => m(xs.map((x) => (x - m(xs)) ** 2));
  return 1 - variance(y.map((yi, i) => yi - v[i])) / variance(y);
}

const varies = (xs: readonly number[]) => xs.length >= 2 && xs.some((x) => Math.abs(x - xs[0]) > 1e-9);

/**
 * The diagnostics a flush's record must hold under `prefix` (`critic/` or `agent_i/critic_`),
 * per turn and pooled, from the estimates the trace gave and the stored returns (agent `agent`'s
 * copy of the joint return); undefined ones must be absent.
 */
function checkDiagnostics(record: MetricRecord, prefix: string, transitions: readonly JointTransition[], e: CriticEstimatesEvent, agent: number): void {
  const check = (key: string, want: number) => (Number.isFinite(want) ? expect(record[key], key).toBeCloseTo(want, 6) : expect(key in record, key).toBe(false));
  const turns = [...new Set(transitions.map((t) => t.turn))];
  const groups: [string, number[]][] = turns.map((turn) => [`/turn_${turn + 1}`, transitions.flatMap((t, j) => (t.turn === turn ? [j] : []))]);
  groups.push(['', transitions.map((_, j) => j)]);
  for (const [suffix, idx] of groups) {
    const v = idx.map((j) => e.values[j]);
    const g = idx.map((j) => transitions[j].agents[agent].return);
    const y = idx.map((j) => e.targets[j]);
    const d = idx.map((j) => e.advantagesRaw[j]);
    const r = idx.map((j) => transitions[j].reward);
    check(`${prefix}ev_mc${suffix}`, varies(g) ? ev(v, g) : Number.NaN);
    check(`${prefix}ev_target${suffix}`, varies(y) ? ev(v, y) : Number.NaN);
    check(`${prefix}delta_reward_corr${suffix}`, varies(d) && varies(r) ? pearsonCorrelation(d, r) : Number.NaN);
  }
}

let dir: string;
let cleanup: () => Promise<void>;
let agents: Agent[];
let critics: CriticLM[];

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend(backendUnderTest('wasm'));
  ({ dir, cleanup } = await tempDir('critic-targets'));
  agents = await tinyAgents(dir, [
    { name: 'a0', arch: 'qwen3', seed: 1, words: [...toyWords] },
    { name: 'a1', arch: 'llama', seed: 2, words: [...toyWords] },
  ]);
  critics = await toyCritics(dir);
});
afterAll(async () => {
  disposeAgents(agents);
  disposeCritics(critics);
  await cleanup();
});

// Six 3-turn episodes through a buffer of 5: the flushes hold e0 (t1–3) + e1 (t1–2, cut);
// e1 (t3) + e2 + e3 (t1, cut); e3 (t2–3) + e4; and at the epoch's end e5. The critic does not
// learn (lr 0), so its values can be recomputed after training.
const runConfig = {
  num_turns: 3,
  max_new_tokens: 2,
  temperature: 1,
  top_p: 1,
  top_k: 0,
  early_termination_threshold: null,
  discount: 0.9,
  critic_learning_rate: 0,
  rollout_buffer_size: 5,
  num_train_epochs: 1,
  eval_interval: 0,
  logging_steps: 1,
  seed: 7,
} as const;

/** One run's flushes: the transitions, each critic slot's estimates at the flush's start, and the logged record. */
interface Flushed {
  readonly transitions: readonly JointTransition[];
  readonly estimates: CriticEstimatesEvent[];
  readonly record: MetricRecord;
}

async function run(method: 'cc' | 'dc', config: Record<string, unknown>): Promise<{ flushes: Flushed[]; trainer: CoLLMCCTrainer<ToyTask, State> | CoLLMDCTrainer<ToyTask, State> }> {
  const events: UpdateTraceEvent[] = [];
  const flushedTransitions: JointTransition[][] = [];
  const records: MetricRecord[] = [];
  const inputs = {
    agents,
    env: new TextRewardEnv(),
    trainTasks: toyTasks(6, 'ct'),
    config: { ...runConfig, ...config },
    trace: (e: UpdateTraceEvent) => events.push(e),
    logger: { log: (_step: number, m: MetricRecord) => records.push(m) },
    rolloutMetrics: (trs: readonly JointTransition[]) => {
      flushedTransitions.push([...trs]);
      return {};
    },
  };
  const trainer = method === 'cc' ? new CoLLMCCTrainer({ ...inputs, critic: critics[2] }) : new CoLLMDCTrainer({ ...inputs, critics: [critics[0], critics[1]] });
  await trainer.train();
  const estimates = events.filter((e): e is CriticEstimatesEvent => e.kind === 'critic_estimates');
  const slots = trainer.criticSet.slots.length;
  const updates = records.filter((r) => 'optimizer_steps' in r);
  expect(updates).toHaveLength(flushedTransitions.length);
  expect(estimates).toHaveLength(slots * flushedTransitions.length);
  const flushes = flushedTransitions.map((transitions, f) => ({ transitions, estimates: estimates.slice(slots * f, slots * (f + 1)), record: updates[f] }));
  return { flushes, trainer };
}

describe('CoLLM updates train on the configured target, over flushes that cut episodes', () => {
  const kinds: [string, Record<string, unknown>, CriticTarget][] = [
    ['td', {}, { kind: 'td' }],
    ['mc', { critic_target: 'mc' }, { kind: 'mc' }],
    ['nstep', { critic_target: 'nstep', critic_target_n: 2 }, { kind: 'nstep', n: 2 }],
    ['lambda', { critic_target: 'lambda', critic_lambda: 0.5 }, { kind: 'lambda', lambda: 0.5 }],
    ['lambda, Q critic', { critic_target: 'lambda', critic_lambda: 0.5, critic_type: 'q', q_advantage: 'td' }, { kind: 'lambda', lambda: 0.5 }],
  ];

  it.each(kinds)('CoLLM-CC, %s: targets, δ and the diagnostics of every flush', { timeout: 300_000 }, async (_name, config, target) => {
    const { flushes, trainer } = await run('cc', config);
    const predict = (rows: number[][]) => trainer.criticSet.slots[0].model.predict(rows);
    expect(flushes.map((f) => f.transitions.length)).toEqual([5, 5, 5, 3]);
    let cuts = 0;
    for (const { transitions, estimates, record } of flushes) {
      const [e] = estimates;
      expect(e.epoch).toBe(0);
      // The values are the critic's V(h_t) (its weights never moved).
      close(e.values, await predict(transitions.map((t) => [...(t.joint?.criticIds ?? [])])), 5);
      // Each episode's steps in this flush, and the bootstrap after its last stored one.
      const episodes = [...new Set(transitions.map((t) => t.episode))];
      for (const ep of episodes) {
        const idx = transitions.flatMap((t, j) => (t.episode === ep ? [j] : []));
        const last = transitions[idx[idx.length - 1]];
        const nextIds = last.joint?.nextCriticIds ?? null;
        expect(nextIds === null).toBe(last.done);
        if (nextIds !== null) cuts++;
        const bootstrap = nextIds === null ? 0 : (await predict([[...nextIds]]))[0];
        const r = idx.map((j) => transitions[j].reward);
        const v = idx.map((j) => e.values[j]);
        const want = expectedTargets(target, r, v, bootstrap, 0.9);
        close(
          idx.map((j) => e.targets[j]),
          want,
          5,
        );
        // δ = y − V: for λ the GAE sum Σ (γλ)^k δ_{t+k} of the one-step errors.
        close(
          idx.map((j) => e.advantagesRaw[j]),
          want.map((y, q) => y - v[q]),
          5,
        );
        if (target.kind === 'lambda') {
          const d = r.map((rt, q) => rt + 0.9 * (q + 1 < r.length ? v[q + 1] : bootstrap) - v[q]);
          const gae = d.map((_, q) => d.slice(q).reduce((a, dk, k) => a + (0.9 * target.lambda) ** k * dk, 0));
          close(
            idx.map((j) => e.advantagesRaw[j]),
            gae,
            5,
          );
        }
      }
      // The diagnostics: per turn and pooled, recomputed from the trace and the stored returns.
      checkDiagnostics(record, 'critic/', transitions, e, 0);
      expect(record['critic/ev_mc']).toBeDefined();
    }
    expect(cuts).toBe(2);
    // Not vacuous: every per-turn diagnostic was defined in some flush.
    const logged = new Set(flushes.flatMap((f) => Object.keys(f.record)));
    for (const name of ['ev_mc', 'ev_target', 'delta_reward_corr']) for (const turn of [1, 2, 3]) expect(logged).toContain(`critic/${name}/turn_${turn}`);
    trainer.dispose();
  });

  it("CoLLM-DC: each agent's critic has its own diagnostics under agent_i/critic_, written to metrics.jsonl and TensorBoard", { timeout: 300_000 }, async () => {
    const { flushes, trainer } = await run('dc', { critic_target: 'mc' });
    for (const { transitions, estimates, record } of flushes) {
      for (const [slot, e] of estimates.entries()) {
        expect(e.slot).toBe(slot);
        checkDiagnostics(record, `agent_${slot}/critic_`, transitions, e, slot);
        expect(`agent_${slot}/critic_ev_mc` in record).toBe(true);
      }
      expect(Object.keys(record).some((k) => k.startsWith('critic/ev'))).toBe(false);
    }
    trainer.dispose();
    // The names go through metrics.jsonl and TensorBoard's event files as they are.
    const diagnostics = Object.fromEntries(Object.entries(flushes[0].record).filter(([k]) => /^agent_\d\/critic_(ev_mc|ev_target|delta_reward_corr)/.test(k)));
    expect(Object.keys(diagnostics).length).toBeGreaterThanOrEqual(6);
    const jsonl = MetricsLogger.open(join(dir, 'diagnostics', 'metrics.jsonl'));
    jsonl.log(5, diagnostics);
    expect(readMetrics(jsonl.path)).toEqual([{ step: 5, ...diagnostics }]);
    const tb = TensorBoardWriter.open(join(dir, 'diagnostics', 'tensorboard'));
    tb.write(5, diagnostics);
    const scalars = readEventDir(join(dir, 'diagnostics', 'tensorboard')).events.flatMap((e) => e.scalars ?? []);
    expect(scalars).toEqual(Object.entries(diagnostics).map(([tag, value]) => ({ tag, value: Math.fround(value) })));
  });
});
