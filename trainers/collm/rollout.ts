/**
 * Step 1 of the actor-critic trainers (CoLLM-DC, CoLLM-CC) as plain functions: every agent observes
 * and samples (the actors act alike in both methods), the environment takes the joint action, and
 * a finished episode becomes joint transitions. What the critic reads and stores is the caller's:
 * CoLLMTrainer.rollout (trainer.ts) calls these in the paper's order.
 */
import type { AgentTransition, JointTransition } from '../../src/buffer/replay.js';
import { discountedReturns } from '../../src/buffer/targets.js';
import type { Agent } from '../../src/decpomdp/agent.js';
import type { GlobalInfo, LLMDecPOMDP } from '../../src/decpomdp/types.js';
import type { Rng } from '../../src/util/rng.js';
import type { PhaseTimer } from '../core/metrics.js';
import { behaviourLogProbs, behaviourSums } from './steps.js';
import { encodePrompt, generateRound, type CompletionGroup, type CompletionSampler, type GenerationSettings, type JointPasses } from '../core/generation.js';
import { assertFiniteReward } from '../core/trainer.js';
import { takeJointActions, type RolloutStep } from '../core/joint-step.js';
import type { ReferenceKlTracker } from '../core/reference-kl.js';

/** What the rollout functions need from a trainer. */
export interface RolloutContext<T, S> {
  readonly agents: readonly Agent[];
  readonly env: LLMDecPOMDP<T, S>;
  readonly settings: GenerationSettings;
  readonly rng: Rng;
  readonly timer: PhaseTimer;
  /** Trainer label for errors (`CoLLM-CC`). */
  readonly label: string;
  /** Reference KL (on): the KL of every sample, and the penalty on the joint rewards. */
  readonly referenceKl?: ReferenceKlTracker | null;
  /** Completions given in place of sampling (see {@link CompletionSampler}). */
  readonly sampler?: CompletionSampler | null;
  /** Joint passes over the agents (LoRA agents on one base) and their eligibility; absent: each agent samples and is scored alone. */
  readonly joint?: JointPasses;
}

/** What the agents saw and sampled at one turn of a rollout. */
export interface TurnSamples {
  /** m_t. */
  readonly globalInfo: GlobalInfo;
  /** observations[i]: o_{i,t}. */
  readonly observations: string[];
  /** promptIds[i]: o_{i,t} encoded for agent i (the env's rendering applied). */
  readonly promptIds: number[][];
  /** groups[i]: agent i's K completions. */
  readonly groups: CompletionGroup[];
  /** behaviour[i][k]: Σ log π_old of agent i's k-th completion. */
  readonly behaviour: number[][];
  /** kl[i][k]: reference KL of agent i's k-th completion (reference KL on). */
  readonly kl?: number[][];
  /** referenceLogProbs[i][k][t]: the reference's token log-probs (`kl_mode: loss`). */
  readonly referenceLogProbs?: number[][][];
}

/** Every agent observes the state and samples K completions; their behaviour log-probs (and reference KLs) are kept. */
export async function sampleTurn<T, S>(ctx: RolloutContext<T, S>, state: S, k: number): Promise<TurnSamples> {
  const { agents, env, timer } = ctx;
  const globalInfo = env.globalInfo(state);
  const observations = agents.map((_, i) => env.observe(state, i));
  const promptIds = agents.map((a, i) => encodePrompt(a, observations[i], env.rendering?.(state, i)));
  // LoRA agents on one base sample, and are scored, in joint passes.
  const passes = ctx.joint ?? { eligible: false, passes: null };
  const joint = passes.passes;
  const groups = await timer.time('generation', () => generateRound(agents, promptIds, k, ctx.settings, ctx.rng, passes, ctx.sampler ?? null));
  const behaviour = await timer.time('scoring', async () => {
    if (joint) return (await joint.tokenLogProbs(groups.map((g, i) => ({ promptIds: g.ids.map(() => promptIds[i]), completionIds: g.ids })))).map(behaviourSums);
    const out: number[][] = [];
    for (let i = 0; i < agents.length; i++) out.push(await behaviourLogProbs(agents[i].model, groups[i].ids.map(() => promptIds[i]), groups[i].ids));
    return out;
  });
  const tracker = ctx.referenceKl;
  if (!tracker) return { globalInfo, observations, promptIds, groups, behaviour };
  const { kl, referenceLogProbs } = await timer.time('reference_kl', () => tracker.turnKls(promptIds, groups.map((g) => g.ids)));
  return { globalInfo, observations, promptIds, groups, behaviour, kl, ...(referenceLogProbs ? { referenceLogProbs } : {}) };
}

/**
 * The K joint steps of a turn (joint action k = the k-th completion of every agent) and whether the
 * episode goes on: not after the last turn, nor when the env says done, nor when the (first) joint
 * reward is strictly above `threshold` (early termination). Multi-turn plays K = 1.
 */
export async function jointSteps<T, S>(
  ctx: RolloutContext<T, S>,
  state: S,
  samples: TurnSamples,
  turn: number,
  numTurns: number,
  threshold: number | null,
): Promise<{ steps: RolloutStep<S>[]; next: S | null }> {
  const continues = (r: number) => turn < numTurns - 1 && !(threshold !== null && r > threshold);
  const check = (r: number) => assertFiniteReward(ctx.label, ctx.env.name, r, turn);
  const steps: RolloutStep<S>[] = [];
  const k = samples.groups[0].texts.length;
  // One joint action at a time, each with its own continue decision.
  for (let j = 0; j < k; j++) {
    const actions = samples.groups.map((g) => g.texts[j]);
    steps.push(...(await takeJointActions(ctx.env, state, [actions], (rewards) => rewards.map(continues), check, ctx.timer)));
  }
  const first = steps[0];
  // Termination follows the environment's reward; what the critics and actors learn from is the
  // reward less the reference-KL penalty (CoMLRL 1.3.8 shapes the reward the same way).
  const goesOn = continues(first.reward) && !first.done && first.next !== null;
  const tracker = ctx.referenceKl;
  const kl = samples.kl;
  const learned = tracker?.shapesReward && kl ? steps.map((s, j) => ({ ...s, reward: tracker.shapedReward(s.reward, kl, j) })) : steps;
  return { steps: learned, next: goesOn ? first.next : null };
}

/** One played turn: the samples and the K joint steps. */
export interface PlayedTurn<S> extends TurnSamples {
  readonly steps: readonly RolloutStep<S>[];
}

/**
 * The critic part of one agent's transition (or the joint one): inputs at h_t and h_{t+1} (with
 * their numeric m_t when the head reads it), rollout-time value and target.
 */
export type CriticPart = Pick<AgentTransition, 'criticIds' | 'nextCriticIds' | 'criticFeatures' | 'nextCriticFeatures' | 'value' | 'target'>;

/**
 * The episode's joint transitions, per joint sample k in turn order. `critic(t, k)` gives the
 * critic part of turn t for sample k: per agent, and the centralized one (null for CoLLM-DC).
 */
export function episodeTransitions<T, S>(
  env: LLMDecPOMDP<T, S>,
  agents: readonly Agent[],
  episode: number,
  turns: readonly PlayedTurn<S>[],
  policyVersions: readonly number[],
  discount: number,
  critic: (t: number, k: number) => { agents: readonly CriticPart[]; joint: CriticPart | null },
): JointTransition[] {
  const out: JointTransition[] = [];
  const k = turns[0].steps.length;
  for (let j = 0; j < k; j++) {
    const returns = discountedReturns(
      turns.map((tr) => tr.steps[j].reward),
      discount,
    );
    turns.forEach((tr, t) => {
      const last = t === turns.length - 1;
      const step = tr.steps[j];
      const part = critic(t, j);
      out.push({
        episode,
        turn: t,
        generation: j,
        globalInfo: tr.globalInfo,
        nextGlobalInfo: last ? (step.next === null ? null : env.globalInfo(step.next)) : turns[t + 1].globalInfo,
        reward: step.reward,
        done: last,
        nextObservations: last ? null : turns[t + 1].observations,
        agents: agents.map((agent, i) => ({
          prompt: agent.tokenizer.decode(tr.promptIds[i]),
          observation: tr.observations[i],
          promptIds: tr.promptIds[i],
          completionIds: tr.groups[i].ids[j],
          action: tr.groups[i].texts[j],
          behaviourLogProb: tr.behaviour[i][j],
          policyVersion: policyVersions[i],
          ...part.agents[i],
          return: returns[t],
          ...(tr.kl ? { referenceKl: tr.kl[i][j] } : {}),
          ...(tr.referenceLogProbs ? { referenceLogProbs: tr.referenceLogProbs[i][j] } : {}),
        })),
        joint: part.joint,
      });
    });
  }
  return out;
}

/**
 * Values of a critic for some rows, predicting each distinct row once (V rows repeat over K,
 * targets repeat values). With `features` (one vector per row, for a head that reads numeric m_t)
 * a row is its ids and its features: equal ids with other features are predicted apart.
 */
export async function predictDistinct(
  predict: (rows: number[][], features: number[][] | null) => Promise<number[]>,
  rows: readonly (readonly number[])[],
  features: readonly (readonly number[])[] | null = null,
): Promise<number[]> {
  if (rows.length === 0) return [];
  if (features !== null && features.length !== rows.length) throw new Error(`predictDistinct: ${features.length} feature vectors for ${rows.length} rows`);
  const keys = rows.map((r, j) => (features === null ? r.join(',') : `${r.join(',')}|${features[j].join(',')}`));
  const firstOf = new Map<string, number>();
  keys.forEach((key, j) => {
    if (!firstOf.has(key)) firstOf.set(key, j);
  });
  const unique = [...firstOf.values()];
  const preds = await predict(
    unique.map((j) => [...rows[j]]),
    features === null ? null : unique.map((j) => [...features[j]]),
  );
  const byKey = new Map(unique.map((j, q) => [keys[j], preds[q]]));
  return keys.map((key) => byKey.get(key) as number);
}
