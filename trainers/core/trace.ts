/**
 * What a trainer's update computed, step by step, for whoever wants to check it against another
 * implementation (scripts/comlrl-parity.mjs compares it with CoMLRL's recorded updates) or debug a
 * run: the returns and advantages each policy step used, each step's loss and gradient norm, each
 * critic's values, targets and advantages. Plain numbers; a trainer sends them only when given a
 * {@link UpdateTrace} (`trace` in the trainer's inputs), in the order it computes them.
 */

/** One group of K completions in a MAGRPO-family policy step: a tree node of one agent. */
export interface GroupAdvantageEvent {
  readonly kind: 'group_advantages';
  readonly agent: number;
  /** 0-based turn of the node. */
  readonly turn: number;
  /** The node's env step (its order among the nodes). */
  readonly envStep: number;
  readonly promptIds: readonly number[];
  /** The completions as the loss scores them. */
  readonly completionIds: readonly (readonly number[])[];
  readonly returns: readonly number[];
  /** Advantages before the z-score (mean: R − mean R). */
  readonly advantagesRaw: readonly number[];
  /** The advantages the loss used. */
  readonly advantages: readonly number[];
}

/** One optimizer step of a policy (actor) on its loss. */
export interface PolicyStepEvent {
  readonly kind: 'policy_step';
  readonly agent: number;
  readonly turn: number;
  /** The loss value the step back-propagated. */
  readonly loss: number;
  /** Global L2 norm of the gradients before clipping. */
  readonly gradNorm: number;
}

/** One critic's estimates over a flush at one update epoch (actor-critic trainers). */
export interface CriticEstimatesEvent {
  readonly kind: 'critic_estimates';
  /** Critic slot (CoLLM-DC: the agent's; CoLLM-CC: 0). */
  readonly slot: number;
  readonly epoch: number;
  /** Per transition: its turn, V (or Q), the target y and the advantage before and after the z-score. */
  readonly turns: readonly number[];
  readonly values: readonly number[];
  readonly targets: readonly number[];
  readonly advantagesRaw: readonly number[];
  readonly advantages: readonly number[];
}

/** One critic optimizer step on value_loss_coef · value loss. */
export interface CriticStepEvent {
  readonly kind: 'critic_step';
  readonly slot: number;
  readonly turn: number;
  /** The critic's inputs, its predictions in the step (before it), the targets. */
  readonly criticIds: readonly (readonly number[])[];
  readonly values: readonly number[];
  readonly targets: readonly number[];
  /** The unscaled value loss (mean squared error, clipped where value clipping is on). */
  readonly valueLoss: number;
  readonly gradNorm: number;
}

/** Everything a trainer traces. */
export type UpdateTraceEvent = GroupAdvantageEvent | PolicyStepEvent | CriticEstimatesEvent | CriticStepEvent;

/** Receives a trainer's {@link UpdateTraceEvent}s as they happen. */
export type UpdateTrace = (event: UpdateTraceEvent) => void;
