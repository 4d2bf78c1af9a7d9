/**
 * The task's environment with its reward swapped for a joint reward model's score (MARLHF's
 * phase 2, CoMLRL's `_compute_reward_model_rewards`): the joint text of a step is every agent's
 * observation with its completion, and the step's reward is the model's score of it. Without a
 * scorer (phase 1, evaluation) every call goes to the task's environment unchanged.
 *
 * Single-turn only (as MARLHF): a scored step ends the episode, so no transition is taken (and the
 * task's reward, possibly costly, is not computed). The joint actions one rollout node takes
 * together (one `Promise.all` over them) are scored in one batch.
 */
import type { GlobalFeatures, GlobalInfo, LLMDecPOMDP, ObservationRendering, StepResult } from '../../src/decpomdp/types.js';
import type { JointRewardModel, JointResponse } from './reward-model.js';

interface PendingScore {
  readonly joint: JointResponse;
  resolve(score: number): void;
  reject(error: unknown): void;
}

/** See the module comment. */
export class JointRewardEnv<T, S> implements LLMDecPOMDP<T, S> {
  readonly name: string;
  readonly numAgents: number;
  readonly horizon: number;
  readonly rendering?: (state: S, agent: number) => ObservationRendering;
  /** The task's numeric m_t, when it has one. */
  readonly globalFeatures?: GlobalFeatures<S>;
  /** The model whose score is the reward; null: the task's own rewards. */
  scorer: JointRewardModel | null = null;
  private pending: PendingScore[] = [];

  constructor(
    /** The task's environment. */
    readonly task: LLMDecPOMDP<T, S>,
  ) {
    this.name = task.name;
    this.numAgents = task.numAgents;
    this.horizon = task.horizon;
    const render = task.rendering?.bind(task);
    if (render) this.rendering = render;
    if (task.globalFeatures) this.globalFeatures = task.globalFeatures;
  }

  initialState(task: T): S {
    return this.task.initialState(task);
  }

  observe(state: S, agent: number): string {
    return this.task.observe(state, agent);
  }

  globalInfo(state: S): GlobalInfo {
    return this.task.globalInfo(state);
  }

  step(state: S, jointAction: readonly string[]): Promise<StepResult<S>> {
    const scorer = this.scorer;
    if (scorer === null) return this.task.step(state, jointAction);
    if (jointAction.length !== this.numAgents) return Promise.reject(new Error(`${this.name}: joint action has ${jointAction.length} completions for ${this.numAgents} agents`));
    const prompts = Array.from({ length: this.numAgents }, (_, i) => this.task.observe(state, i));
    return new Promise<number>((resolve, reject) => {
      this.pending.push({ joint: { prompts, completions: [...jointAction] }, resolve, reject });
      // Steps started in the same tick (a node's joint actions) are scored together once it ends.
      if (this.pending.length === 1) setImmediate(() => void this.flush(scorer));
    }).then((reward) => ({ reward, next: state, done: true, info: { reward_model_score: reward } }));
  }

  private async flush(scorer: JointRewardModel): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    try {
      const scores = await scorer.scores(batch.map((p) => p.joint));
      batch.forEach((p, i) => p.resolve(scores[i]));
    } catch (err) {
      for (const p of batch) p.reject(err);
    }
  }
}
