/**
 * Per-flush metrics of the actor-critic trainers, CoMLRL's names plus comlrl's diagnostics
 * (explained_variance: of the critic's values for its targets at the flush's first update epoch):
 * `turn_k/{reward_mean, expected_return, value_pred_mean, value_target_mean, policy_loss,
 * value_loss, explained_variance, td_error_mean, ratio_mean, ratio_min, ratio_max, clip_fraction}`
 * and `agent_i/{policy_loss, value_loss, grad_norm}`; `critic/{value_loss, grad_norm}` for a
 * centralized critic.
 */
import type { JointTransition } from '../../src/buffer/replay.js';
import { explainedVariance } from '../../src/buffer/targets.js';
import { meanOrZero as mean } from '../../src/util/stats.js';
import type { CriticEstimates } from './run.js';
import { ratioStats } from './steps.js';
import { agentKey, turnKey, type MetricRecord } from '../core/metrics.js';

interface Sums {
  n: number;
  sum: number;
}

function add(map: Map<string, Sums>, key: string, value: number): void {
  const s = map.get(key) ?? { n: 0, sum: 0 };
  s.n++;
  s.sum += value;
  map.set(key, s);
}

/** Collects the losses and ratios of one flush and turns them into a metric record. */
export class FlushMetrics {
  private readonly losses = new Map<string, Sums>();
  private readonly ratios = new Map<number, number[]>();

  constructor(private readonly clipRange: number | null) {}

  /** Records a loss value under `turn_k/name` and `agent_i/name` (agent null: under `critic/`). */
  loss(turn: number, agent: number | null, name: string, value: number): void {
    add(this.losses, turnKey(turn, name), value);
    add(this.losses, agent === null ? `critic/${name}` : agentKey(agent, name), value);
  }

  /** Records a gradient norm for an agent (or the centralized critic). */
  gradNorm(agent: number | null, name: string, value: number): void {
    add(this.losses, agent === null ? `critic/${name}` : agentKey(agent, name), value);
  }

  /** Records ratios of a turn group. */
  ratio(turn: number, values: readonly number[]): void {
    const list = this.ratios.get(turn) ?? [];
    list.push(...values);
    this.ratios.set(turn, list);
  }

  /**
   * The record: statistics of the flushed transitions by turn — rewards, returns, and the values,
   * targets, TD errors and explained variance the first update epoch used (`estimates[i]`: agent
   * i's critic; the one centralized critic repeated for CoLLM-CC) — plus the means of what was recorded.
   */
  record(transitions: readonly JointTransition[], estimates: readonly CriticEstimates[]): MetricRecord {
    const out: MetricRecord = {};
    const turns = [...new Set(transitions.map((t) => t.turn))].sort((a, b) => a - b);
    for (const turn of turns) {
      const idx = transitions.flatMap((t, j) => (t.turn === turn ? [j] : []));
      const group = idx.map((j) => transitions[j]);
      const steps = group.flatMap((t) => t.agents);
      const values = idx.flatMap((j) => estimates.map((e) => e.values[j]));
      const targets = idx.flatMap((j) => estimates.map((e) => e.targets[j]));
      out[turnKey(turn, 'reward_mean')] = mean(group.map((t) => t.reward));
      out[turnKey(turn, 'expected_return')] = mean(steps.map((s) => s.return));
      out[turnKey(turn, 'value_pred_mean')] = mean(values);
      out[turnKey(turn, 'value_target_mean')] = mean(targets);
      out[turnKey(turn, 'td_error_mean')] = mean(targets.map((y, i) => y - values[i]));
      const ev = explainedVariance(values, targets);
      if (Number.isFinite(ev)) out[turnKey(turn, 'explained_variance')] = ev;
      out[turnKey(turn, 'transitions')] = group.length;
      const r = this.ratios.get(turn);
      if (r && r.length > 0) {
        const s = ratioStats(r, this.clipRange);
        out[turnKey(turn, 'ratio_mean')] = s.mean;
        out[turnKey(turn, 'ratio_min')] = s.min;
        out[turnKey(turn, 'ratio_max')] = s.max;
        out[turnKey(turn, 'clip_fraction')] = s.clipFraction;
      }
    }
    for (const [key, s] of this.losses) out[key] = s.sum / s.n;
    return out;
  }
}
