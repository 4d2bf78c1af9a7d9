/**
 * One fit of the critic-fit gate (bench/critic-gate.ts): CoLLM-CC's centralized critic trained
 * alone on the histories its training run gives it, with that run's own update schedule, then
 * read on held-out histories of the same policy.
 *
 * - **On-policy histories.** The episodes are played by the run's actors as they are when its
 *   critic starts learning (paperActors of bench/paper-runs.ts: the seed's random-init actors,
 *   sampling as the run samples), one episode per training task per flush, as the run's epochs
 *   play them. The actors stay as they are, so the critic fits one fixed policy's value.
 * - **The run's update schedule.** From the run's own CoLLM-CC config (`actorCriticConfig`): per
 *   flush, the transitions in per-turn minibatches of `train_batch_size` (`planMinibatches`, the
 *   trainer's planner), `update_epochs` passes, one `criticStep` per minibatch at
 *   `critic_learning_rate` with `value_loss_coef` and the value clip around the values at the
 *   flush's start, AdamW with the config's betas, eps and weight decay; the value head made as the
 *   trainer makes it (`centralizedCritic`, seeded `init` stream). So the step count equals
 *   `criticStepsPerRun`.
 * - **Targets.** `mc` (default): each transition's discounted return G_t, the target whose fit
 *   says whether the critic can read its input. `td`: the run's default, y_t = r_t + γ·V(h_{t+1})
 *   from the current critic at every update epoch (as `recompute_targets` does).
 * - **The critic's input.** The run's: its text (history and m_t as `critic_history` and
 *   `use_global_info` say) and, where the config sets `critic_global_features`, the relay's numeric
 *   m_t beside it (each row's features of the state it was played from, as the trainer gives them).
 * - **Held-out.** Fresh episodes of the same actors on the same tasks; each turn's target is its
 *   history's value under the actors, E[G_t | s_t], the mean return of `continuations` episodes
 *   played on from its state, so a critic that reads its input perfectly scores near 1.
 */
import type { Agent } from '../src/decpomdp/agent.js';
import { discountedReturns, tdTargets } from '../src/buffer/targets.js';
import { planMinibatches } from '../src/buffer/replay.js';
import type { CriticLM } from '../src/critic/value-model.js';
import { AdamW } from '../src/optim/adamw.js';
import { createRng, rngFor } from '../src/util/rng.js';
import { globalFeaturesOf } from '../src/decpomdp/features.js';
import type { HiddenCueRelayEnv, RelayState, RelayTask } from '../envs/hidden-cue/relay.js';
import { centralizedCritic } from '../trainers/collm/centralized.js';
import type { CoLLMCCConfig } from '../trainers/collm/config.js';
import type { CriticView } from '../trainers/collm/critic-set.js';
import { criticStep, type ValueRow } from '../trainers/collm/steps.js';
import type { GenerationSettings } from '../trainers/core/generation.js';
import { continuationValues, playWithActors, type ActorTurn } from './actor-episodes.js';
import { perTurnExplainedVariance, withinTurnExplainedVariance, type TurnRows } from './turn-ev.js';

/** What the critic regresses on: Monte-Carlo returns or the run's one-step TD targets. */
export type GateTarget = 'mc' | 'td';

/** One held-out history: its joint step, the steps before it, and its value under the actors. */
export interface HeldOutRow {
  readonly turn: number;
  readonly view: CriticView;
  readonly history: readonly CriticView[];
  readonly value: number;
  /** The sampling variance of `value` (it caps the explained variance a perfect critic can show). */
  readonly noise: number;
  /** The score so far, Σ s of the turns played (m_t prints it as `score`). */
  readonly score: number;
  /** m_t as numbers (the env's `globalFeatures` of the state), for a critic that reads them. */
  readonly features: readonly number[];
}

/** A training turn with its numeric m_t. */
export interface FitTurn extends ActorTurn {
  readonly features: readonly number[];
}

/** The histories one seed's fits share (the critic's text is built per critic, from the views). */
export interface OnPolicyData {
  /** Training episodes per flush: `flushes[f][e]` is episode e's turns. */
  readonly flushes: readonly (readonly FitTurn[][])[];
  readonly heldOut: readonly HeldOutRow[];
  /** Seconds spent playing. */
  readonly seconds: number;
}

/** How much {@link onPolicyData} plays. */
export interface OnPolicyBudget {
  /** Flushes (the run's epochs: one flush of one episode per task each). */
  readonly flushes: number;
  /** Held-out episodes (every turn of each is a row). */
  readonly heldOutEpisodes: number;
  /** Episodes played on from each held-out state for its value. */
  readonly continuations: number;
}

/**
 * Plays a seed's training episodes (`budget.flushes` × one per task) and held-out episodes with
 * `agents`, and estimates each held-out history's value. `seed` fixes the sampling streams.
 */
export async function onPolicyData(
  env: HiddenCueRelayEnv,
  agents: readonly Agent[],
  tasks: readonly RelayTask[],
  budget: OnPolicyBudget,
  settings: GenerationSettings,
  gamma: number,
  seed: number,
): Promise<OnPolicyData> {
  const t0 = performance.now();
  // The actors do not change, so every flush can be played at once.
  const starts = Array.from({ length: budget.flushes }, () => tasks.map((task) => env.initialState(task))).flat();
  const featuresOf = (state: RelayState) => globalFeaturesOf(env, state);
  const train = (await playWithActors(env, agents, starts, settings, createRng(`critic-gate:${seed}:train`))).map((turns) => turns.map((k) => ({ ...k, features: featuresOf(k.state) })));
  const flushes = Array.from({ length: budget.flushes }, (_, f) => train.slice(f * tasks.length, (f + 1) * tasks.length));
  const heldRng = createRng(`critic-gate:${seed}:held-out`);
  const held = await playWithActors(
    env,
    agents,
    Array.from({ length: budget.heldOutEpisodes }, (_, e) => env.initialState(tasks[e % tasks.length])),
    settings,
    heldRng,
  );
  const rows = held.flatMap((turns) => turns.map((k, t) => ({ turn: t, view: k.view, history: turns.slice(0, t).map((h) => h.view), state: k.state, score: k.state.scores.reduce((a, b) => a + b, 0) })));
  const estimates = await continuationValues(
    env,
    agents,
    rows.map((r) => r.state),
    budget.continuations,
    gamma,
    settings,
    heldRng,
  );
  return { flushes, heldOut: rows.map((r, j) => ({ turn: r.turn, view: r.view, history: r.history, score: r.score, features: featuresOf(r.state), ...estimates[j] })), seconds: (performance.now() - t0) / 1000 };
}

/** One critic's fit (see the module comment). */
export interface CriticFitResult {
  /** Flushes after which the held-out figures were taken (the last: all of them). */
  readonly at: number[];
  /** The gate's figure at each of `at`: within-turn explained variance over turns t ≥ 1 (bench/turn-ev.ts). */
  readonly gateEV: number[];
  /** Per-turn explained variance after the last flush, index = turn (turn 0 included, for reading). */
  readonly perTurnEV: number[];
  /** The old pooled explained variance over every turn after the last flush (it credits the turn index). */
  readonly pooledEV: number;
  /**
   * The gate figure the true values would score against the held-out targets, whose continuation
   * estimates carry sampling noise: 1 − Σ noise / Σ_t Σ (y − ȳ_t)² over t ≥ 1 (expected value).
   */
  readonly ceiling: number;
  /**
   * The gate figure of the best line through m_t's score, per turn (least squares on the held-out
   * rows themselves): what reading that one number of the critic's input is worth.
   */
  readonly scoreLine: number;
  /** A per-turn constant (each turn's mean training return): its gate figure (0 by construction) and its pooled one. */
  readonly baseline: { readonly gateEV: number; readonly pooledEV: number };
  /** Critic optimizer steps taken. */
  readonly steps: number;
  /** Longest critic input (tokens). */
  readonly tokens: number;
  readonly seconds: number;
}

/** What {@link fitOnPolicy} takes from the run's config besides the data. */
export interface FitOptions {
  /** The run's parsed CoLLM-CC config (its update schedule, critic input and seed). */
  readonly config: CoLLMCCConfig;
  readonly target: GateTarget;
  /** Flush counts after which to measure besides the last. Default 0, ¼, ½ of the flushes. */
  readonly checkpoints?: readonly number[];
}

function mean(xs: readonly number[]): number {
  return xs.reduce((a, b) => a + b, 0) / xs.length;
}

/**
 * Fits a fresh value head on `lm` (and `lm`'s weights, in place, as the run trains them) to `data`
 * with the run's schedule; returns the held-out figures. Disposes what it creates (the head, the
 * optimizer), never `lm`: load a fresh copy of the checkpoint for each fit.
 */
export async function fitOnPolicy(lm: CriticLM, agents: readonly Agent[], data: OnPolicyData, o: FitOptions): Promise<CriticFitResult> {
  const t0 = performance.now();
  const { config } = o;
  if ((config.lr_scheduler_type ?? 'constant') !== 'constant' || (config.critic_lr_scheduler_type ?? 'constant') !== 'constant') {
    throw new Error('critic-fit gate: the run schedules its learning rate; the gate steps at a constant one');
  }
  const lr = config.critic_learning_rate ?? config.agent_learning_rate;
  // A critic that reads numeric m_t (`critic_global_features`) gets each row's features beside its text.
  const reads = config.critic_global_features === true;
  const featureSize = reads ? (data.heldOut[0]?.features.length ?? 0) : 0;
  const critic = centralizedCritic(agents, config, lm, undefined, rngFor(config.seed, 'init'), featureSize);
  const model = critic.model;
  const optimizer = new AdamW(model.ownVariables(), { lr, betas: config.adam_betas, eps: config.adam_eps, weightDecay: config.weight_decay });
  const minibatchRng = rngFor(config.seed, 'minibatch');
  const clip = config.value_clip_separate ? config.value_clip_range : null;
  let tokens = 0;
  const idsOf = (view: CriticView, history: readonly CriticView[]) => {
    const ids = critic.input(0, view, config.critic_history === 'full' ? history : []);
    tokens = Math.max(tokens, ids.length);
    return ids;
  };
  const heldIds = data.heldOut.map((r) => idsOf(r.view, r.history));
  const heldTurns = data.heldOut.map((r) => r.turn);
  const heldValues = data.heldOut.map((r) => r.value);
  const heldFeatures = reads ? data.heldOut.map((r) => r.features) : null;
  const gateAt = async (): Promise<TurnRows> => ({ turns: heldTurns, targets: heldValues, predictions: await model.predict(heldIds, null, heldFeatures) });
  const flushes = data.flushes.length;
  const at = [...new Set([...(o.checkpoints ?? [0, Math.round(flushes / 4), Math.round(flushes / 2)]), flushes])].filter((f) => f >= 0 && f <= flushes).sort((a, b) => a - b);
  const gateEV: number[] = [];
  let last: TurnRows | null = null;
  let steps = 0;
  // Each turn's mean return over the training transitions: the per-turn-constant baseline.
  const returnsByTurn = new Map<number, number[]>();
  try {
    for (let f = 0; f <= flushes; f++) {
      if (at.includes(f)) {
        last = await gateAt();
        gateEV.push(withinTurnExplainedVariance(last));
      }
      if (f === flushes) break;
      const episodes = data.flushes[f];
      const rows = episodes.flatMap((turns) => {
        const returns = discountedReturns(
          turns.map((k) => k.reward),
          config.discount,
        );
        return turns.map((k, t) => ({ turn: t, ids: idsOf(k.view, turns.slice(0, t).map((h) => h.view)), features: k.features, reward: k.reward, return: returns[t], last: t === turns.length - 1 }));
      });
      for (const r of rows) returnsByTurn.set(r.turn, [...(returnsByTurn.get(r.turn) ?? []), r.return]);
      const ids = rows.map((r) => r.ids);
      const features = reads ? rows.map((r) => r.features) : null;
      const anchor = await model.predict(ids, null, features);
      let targets: number[] = rows.map((r) => r.return);
      let epoch = -1;
      for (const mb of planMinibatches(
        rows.map((r) => r.turn),
        { batchSize: config.train_batch_size ?? rows.length, epochs: config.update_epochs, rng: minibatchRng },
      )) {
        if (o.target === 'td' && mb.epoch !== epoch) {
          // y_t = r_t + γ·V(h_{t+1}) from the critic as it is at this update epoch's start.
          const values = await model.predict(ids, null, features);
          targets = [];
          let start = 0;
          for (const turns of episodes) {
            targets.push(
              ...tdTargets(
                turns.map((k) => k.reward),
                values.slice(start, start + turns.length),
                config.discount,
              ),
            );
            start += turns.length;
          }
        }
        epoch = mb.epoch;
        const batch: ValueRow[] = mb.indices.map((j) => ({ criticIds: ids[j], target: targets[j], oldValue: anchor[j], ...(reads ? { features: rows[j].features } : {}) }));
        criticStep(model, optimizer, batch, config.value_loss_coef, clip, { maxGradNorm: config.max_grad_norm, chunkSize: config.scoring_batch_size, label: `critic-fit gate, flush ${f + 1}` });
        steps++;
      }
    }
    const end = last as TurnRows;
    const perTurn = perTurnExplainedVariance(end);
    const constant = heldTurns.map((t) => mean(returnsByTurn.get(t) ?? [0]));
    const base: TurnRows = { turns: heldTurns, targets: heldValues, predictions: constant };
    return {
      at,
      gateEV,
      perTurnEV: [...perTurn.values()],
      pooledEV: pooledExplainedVariance(end),
      ceiling: ceilingOf(data.heldOut),
      scoreLine: scoreLineOf(data.heldOut),
      baseline: { gateEV: withinTurnExplainedVariance(base), pooledEV: pooledExplainedVariance(base) },
      steps,
      tokens,
      seconds: (performance.now() - t0) / 1000,
    };
  } finally {
    optimizer.dispose();
    model.head.dispose();
  }
}

/** Explained variance over every row, turns pooled (what the gate used to report). */
function pooledExplainedVariance(rows: TurnRows): number {
  return withinTurnExplainedVariance({ ...rows, turns: rows.turns.map(() => 0) }, 0);
}

/**
 * {@link CriticFitResult.ceiling} of held-out rows: a critic that knew each history's true value
 * would leave the targets' sampling noise as its error, Σ noise of the rows at t ≥ 1, against
 * their spread within turns.
 */
export function ceilingOf(rows: readonly Pick<HeldOutRow, 'turn' | 'value' | 'noise'>[]): number {
  const byTurn = new Map<number, number[]>();
  let noise = 0;
  for (const r of rows) {
    if (r.turn < 1) continue;
    byTurn.set(r.turn, [...(byTurn.get(r.turn) ?? []), r.value]);
    noise += r.noise;
  }
  let spread = 0;
  for (const ys of byTurn.values()) {
    const m = ys.reduce((a, b) => a + b, 0) / ys.length;
    spread += ys.reduce((a, y) => a + (y - m) ** 2, 0);
  }
  return spread === 0 ? Number.NaN : 1 - noise / spread;
}

/** {@link CriticFitResult.scoreLine} of held-out rows: per turn t ≥ 1, the least-squares line value ≈ a_t + b_t·score. */
export function scoreLineOf(rows: readonly Pick<HeldOutRow, 'turn' | 'value' | 'score'>[]): number {
  const turns = [...new Set(rows.map((r) => r.turn))];
  const predictions = new Map<Pick<HeldOutRow, 'turn' | 'value' | 'score'>, number>();
  for (const t of turns) {
    const mine = rows.filter((r) => r.turn === t);
    const mx = mean(mine.map((r) => r.score));
    const my = mean(mine.map((r) => r.value));
    const sxx = mine.reduce((a, r) => a + (r.score - mx) ** 2, 0);
    const b = sxx > 0 ? mine.reduce((a, r) => a + (r.score - mx) * (r.value - my), 0) / sxx : 0;
    for (const r of mine) predictions.set(r, my + b * (r.score - mx));
  }
  return withinTurnExplainedVariance({ turns: rows.map((r) => r.turn), targets: rows.map((r) => r.value), predictions: rows.map((r) => predictions.get(r) ?? 0) });
}
