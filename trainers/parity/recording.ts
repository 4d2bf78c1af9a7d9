/** What a parity run records of comlrl's update, as it happens (trainers/parity/case.ts). */
import type { UpdateTraceEvent } from '../core/trace.js';

/** What a case run recorded of comlrl's update. */
export interface Recording {
  /** Every optimizer step, in order. */
  readonly steps: RecordedStep[];
  /** Every teacher-forced scoring pass of an update, per model label, in call order. */
  readonly scored: Map<string, ScoredRow[]>;
  readonly trace: UpdateTraceEvent[];
  /** Every reward call's (agent 0 text, agent 1 text). */
  readonly rewardCalls: [string, string][];
  /** Prompts comlrl asked for that CoMLRL never sampled. */
  readonly unknownPrompts: string[];
  /** Per model label, per checkpoint tensor name: after − before over the whole item. */
  readonly itemDelta: Map<string, Map<string, Float32Array>>;
}

/** One optimizer step as comlrl took it. */
export interface RecordedStep {
  readonly model: string;
  readonly gradNorm: number;
  /** Per checkpoint tensor name: its gradient's L2 (absent: no gradient). */
  readonly gradL2: Map<string, number>;
  readonly gradFirst8: Map<string, number[]>;
  readonly deltaL2: Map<string, number>;
}

/** One scored completion of an update pass. */
export interface ScoredRow {
  readonly promptIds: number[];
  readonly completionIds: number[];
  readonly tokenLogProbs: number[];
}
