/**
 * Metric names. CoMLRL logs per-turn values as `turn_k/<name>` with k 1-based, eval values under
 * `eval/`, and comlrl adds per-agent values as `agent_i/<name>` (i 0-based, like the `agent_i/`
 * save folders).
 */

/** `turn_{turn+1}/name` for a 0-based turn index. */
export function turnKey(turn: number, name: string): string {
  return `turn_${turn + 1}/${name}`;
}

/** `agent_{i}/name` for a 0-based agent index. */
export function agentKey(agent: number, name: string): string {
  return `agent_${agent}/${name}`;
}

/** `eval/name`. */
export function evalKey(name: string): string {
  return `eval/${name}`;
}

/** A flat record of finite numbers as logged per step. */
export type MetricRecord = Record<string, number>;

/** Where the parts of a timed phase go: `add('forward', s)` adds s seconds to `<phase>_forward`. */
export interface PhaseParts {
  add(part: string, seconds: number): void;
}

/** The phase whose `fn` is running synchronously inside {@link PhaseTimer.time} now, else null. */
let running: PhaseParts | null = null;

/**
 * The parts recorder of the phase being timed, when called from the synchronous part of a
 * {@link PhaseTimer.time} callback (the update steps are synchronous), else null. The shared
 * gradient and optimizer helpers report their parts through it, so every trainer's
 * `training` (and `critic_training`) time is split without each trainer passing its timer down.
 * Capture it at the start of a synchronous function: after an `await` it is no longer the caller's.
 */
export function currentPhaseParts(): PhaseParts | null {
  return running;
}

/** Accumulates wall time per phase (generation, reward, scoring, ...) in seconds. */
export class PhaseTimer {
  private readonly totals = new Map<string, number>();

  /**
   * Runs `fn` and adds its wall time to `phase`. While `fn` runs synchronously,
   * {@link currentPhaseParts} adds to `phase_<part>` (a part of `phase`, not beside it).
   */
  async time<R>(phase: string, fn: () => Promise<R> | R): Promise<R> {
    const t0 = performance.now();
    const outer = running;
    running = { add: (part, seconds) => this.add(`${phase}_${part}`, seconds) };
    try {
      let result: Promise<R> | R;
      try {
        result = fn();
      } finally {
        running = outer;
      }
      return await result;
    } finally {
      this.add(phase, (performance.now() - t0) / 1000);
    }
  }

  /** Adds `seconds` to `phase`. */
  add(phase: string, seconds: number): void {
    this.totals.set(phase, (this.totals.get(phase) ?? 0) + seconds);
  }

  /** Seconds recorded for `phase` so far. */
  get(phase: string): number {
    return this.totals.get(phase) ?? 0;
  }

  /** All phases as `{prefix}{phase}_s`, then clears. */
  drain(prefix = 'time/'): MetricRecord {
    const out: MetricRecord = {};
    for (const [k, v] of this.totals) out[`${prefix}${k}_s`] = v;
    this.totals.clear();
    return out;
  }
}

/** Where trainers send their metrics (the JSONL `MetricsLogger` and test collectors fit it). */
export interface MetricsSink {
  /** Records `metrics` at x-axis value `step` (env_step, as CoMLRL logs). */
  log(step: number, metrics: MetricRecord): unknown;
}

/** Update statistics of one agent since the last log. */
export interface UpdateWindow {
  steps: number;
  lossSum: number;
  gradNormSum: number;
}

/**
 * Adds each agent's figures since the last log to `m` (mean loss and gradient norm over its
 * updates, update count, tokens generated, mean completion length) and the total tokens, then
 * starts the windows again.
 */
export function drainAgentWindows(m: MetricRecord, updates: UpdateWindow[], tokens: number[], completions: number[]): void {
  let total = 0;
  for (let a = 0; a < updates.length; a++) {
    const w = updates[a];
    if (w.steps > 0) {
      m[agentKey(a, 'loss')] = w.lossSum / w.steps;
      m[agentKey(a, 'grad_norm')] = w.gradNormSum / w.steps;
    }
    m[agentKey(a, 'updates')] = w.steps;
    m[agentKey(a, 'tokens_generated')] = tokens[a];
    if (completions[a] > 0) m[agentKey(a, 'completion_length_mean')] = tokens[a] / completions[a];
    total += tokens[a];
    updates[a] = { steps: 0, lossSum: 0, gradNormSum: 0 };
    tokens[a] = 0;
    completions[a] = 0;
  }
  m.tokens_generated = total;
}
