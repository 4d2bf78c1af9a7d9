/**
 * CoMLRL 1.4's `JointRewardModel`: a causal-LM body with a scalar head, read at the last token of
 * the joint text — every agent's prompt and response, in the centralized critic's layout
 * (src/critic/inputs.ts, a Q input: the observations, then `[Joint Action]` with each response) —
 * fitted to preference pairs with the Bradley–Terry loss
 *
 *   L = mean over pairs of −log σ(r(winner) − r(loser)),
 *
 * and saved like a critic: the LM, its tokenizer and `value_head.*` in one directory
 * (`reward_model/` beside the agents).
 */
import * as tf from '@tensorflow/tfjs';
import { createCriticHead, loadCriticHead, saveCriticHead, type CriticHead } from '../../src/critic/heads.js';
import { centralizedCriticText } from '../../src/critic/inputs.js';
import { ValueModel, type CriticLM } from '../../src/critic/value-model.js';
import { CRITIC_INPUT_KNOB } from '../../src/memory/errors.js';
import { loadCausalLM } from '../../src/model/load.js';
import type { AdamW } from '../../src/optim/adamw.js';
import { loadTokenizer } from '../../src/tokenizer/load.js';
import type { Tokenizer } from '../../src/tokenizer/types.js';
import type { RewardTruncation } from './config.js';
import type { Rng } from '../../src/util/rng.js';
import { accumulateGradients, applyGradients } from '../core/loss.js';

/** One joint response: each agent's prompt and its response, in agent order. */
export interface JointResponse {
  readonly prompts: readonly string[];
  readonly completions: readonly string[];
}

/** A preference: two joint responses to the same prompts, the winner preferred. JSON-able. */
export interface JointPreference {
  /** Each agent's prompt (its observation of the task). */
  readonly prompts: readonly string[];
  /** The preferred joint response, one completion per agent. */
  readonly winner: readonly string[];
  readonly loser: readonly string[];
  /** The task rewards that ranked them (absent for pairs labelled otherwise). */
  readonly winnerReward?: number;
  readonly loserReward?: number;
}

/**
 * The token ids a reward model reads for `joint`: the centralized critic's Q layout
 * (src/critic/inputs.ts), cut to `maxLength` tokens as `truncation` says (null: no cap). Under
 * 'prompts' the joint action is encoded on its own after the prompts; when it alone exceeds the
 * cap it is right-cut too (the trainer then refuses a pair it makes inseparable: {@link JointRewardModel.inseparablePair}).
 */
export function jointRewardIds(tokenizer: Tokenizer, joint: JointResponse, maxLength: number | null, truncation: RewardTruncation): number[] {
  const text = centralizedCriticText({ observations: joint.prompts, actions: joint.completions });
  const full = tokenizer.encode(text);
  if (maxLength === null || full.length <= maxLength) return full;
  if (truncation === 'right') return full.slice(0, maxLength);
  const promptText = centralizedCriticText({ observations: joint.prompts });
  // The tokenizer's own leading tokens (a BOS) stay first; the prompts lose their start.
  const lead = tokenizer.encode('');
  const prompts = tokenizer.encode(promptText, { addSpecialTokens: false });
  const action = tokenizer.encode(text.slice(promptText.length), { addSpecialTokens: false });
  const room = maxLength - lead.length - action.length;
  if (room <= 0) return [...lead, ...action].slice(0, maxLength);
  return [...lead, ...prompts.slice(Math.max(0, prompts.length - room)), ...action];
}

/** A pair whose winner and loser the cap makes the same tokens (see {@link JointRewardModel.inseparablePair}). */
export interface InseparablePair {
  /** Index of the pair. */
  readonly index: number;
  /** Tokens of its longer side's uncut joint text. */
  readonly fullLength: number;
}

/**
 * The Bradley–Terry loss of a batch, mean over pairs of −log σ(r_w − r_l) (= softplus(r_l − r_w),
 * which stays finite for any gap). Differentiable; [P] and [P] in, a scalar out.
 */
export function bradleyTerryLoss(winnerScores: tf.Tensor1D, loserScores: tf.Tensor1D): tf.Scalar {
  if (winnerScores.shape[0] !== loserScores.shape[0]) throw new Error(`bradleyTerryLoss: ${winnerScores.shape[0]} winner scores for ${loserScores.shape[0]} loser scores`);
  return tf.tidy(() => tf.mean(tf.softplus(tf.sub(loserScores, winnerScores))) as tf.Scalar);
}

/** What one reward-model optimizer step did. */
export interface RewardModelStepResult {
  /** The batch's Bradley–Terry loss (before the step). */
  readonly loss: number;
  /** Fraction of pairs whose winner scored higher (before the step). */
  readonly accuracy: number;
  readonly gradNorm: number;
}

/** Options of {@link JointRewardModel.step}. */
export interface RewardModelStepOptions {
  /** Clip the global gradient norm to this before stepping; null: no clipping. */
  readonly maxGradNorm: number | null;
  /** Pairs per forward/backward pass (gradients summed); null: as many as the memory budget allows. */
  readonly chunkSize: number | null;
  /** Prefix for error messages. */
  readonly label: string;
}

/** A joint reward model (see the module comment). */
export class JointRewardModel {
  /**
   * @param value the LM body + scalar head (its own LM, never an actor's)
   * @param maxLength token cap of the joint text (CoMLRL's `reward_max_length`); null: none
   * @param ownsBackbone whether {@link JointRewardModel.dispose} frees the LM too (a loaded model does)
   * @param truncation how the cap cuts (`reward_truncation`; see `REWARD_TRUNCATIONS`)
   */
  constructor(
    readonly value: ValueModel,
    readonly maxLength: number | null = null,
    private readonly ownsBackbone = false,
    readonly truncation: RewardTruncation = 'prompts',
  ) {
    if (value.sharesBackbone) throw new Error('JointRewardModel: the reward model needs its own LM (not an actor backbone)');
  }

  /** A reward model on `lm` with `head`, or a fresh linear head N(0, 0.02) drawn from `rng` (CoMLRL's `nn.Linear(hidden, 1)`). */
  static create(lm: CriticLM, rng: Rng, options: { head?: CriticHead; maxLength?: number | null; truncation?: RewardTruncation } = {}): JointRewardModel {
    const head = options.head ?? createCriticHead(lm.model.hiddenSize, { type: 'linear' }, rng);
    return new JointRewardModel(new ValueModel(lm.model, head, lm.tokenizer, false), options.maxLength ?? null, false, options.truncation);
  }

  /** Loads a reward model saved by {@link JointRewardModel.save} (LM, tokenizer and head of `dir`); it owns its LM. */
  static async load(dir: string, options: { maxLength?: number | null; truncation?: RewardTruncation; rng: Rng }): Promise<JointRewardModel> {
    const model = await loadCausalLM(dir);
    try {
      const tokenizer = await loadTokenizer(dir);
      const head = await loadCriticHead(dir, options.rng);
      return new JointRewardModel(new ValueModel(model, head, tokenizer, false), options.maxLength ?? null, true, options.truncation);
    } catch (err) {
      model.dispose();
      throw err;
    }
  }

  /** The token ids the model reads for a joint response (see {@link jointRewardIds}). */
  ids(joint: JointResponse): number[] {
    return jointRewardIds(this.value.tokenizer, joint, this.maxLength, this.truncation);
  }

  /**
   * The first pair whose winner and loser differ as texts but read the same tokens once cut to
   * `maxLength`, or null: fitting on such a pair teaches nothing (its loss is log 2, its gradient 0).
   */
  inseparablePair(pairs: readonly JointPreference[]): InseparablePair | null {
    if (this.maxLength === null) return null;
    for (const [index, p] of pairs.entries()) {
      const w = this.ids({ prompts: p.prompts, completions: p.winner });
      const l = this.ids({ prompts: p.prompts, completions: p.loser });
      if (w.length !== l.length || w.some((id, i) => id !== l[i])) continue;
      if (p.winner.every((c, i) => c === p.loser[i])) continue;
      const uncut = (completions: readonly string[]) => jointRewardIds(this.value.tokenizer, { prompts: p.prompts, completions }, null, this.truncation).length;
      return { index, fullLength: Math.max(uncut(p.winner), uncut(p.loser)) };
    }
    return null;
  }

  /** Scores of joint responses, no gradient, in micro-batches that fit the memory budget. */
  async scores(joints: readonly JointResponse[]): Promise<number[]> {
    if (joints.length === 0) return [];
    return this.value.predict(joints.map((j) => this.ids(j)));
  }

  /** Variables a fit trains: the head, plus the LM body unless it is frozen (`reward_freeze_backbone`). */
  trainableVariables(freezeBackbone: boolean): tf.Variable[] {
    return freezeBackbone ? this.value.head.trainableVariables() : this.value.ownVariables();
  }

  /**
   * One optimizer step on the Bradley–Terry loss of `pairs` over `variables` (see
   * {@link JointRewardModel.trainableVariables}). A pair's winner and loser are scored in the
   * same pass; the planner counts a pair as one row twice as wide as its longer side, which
   * bounds what two rows cost.
   */
  step(optimizer: AdamW, variables: readonly tf.Variable[], pairs: readonly JointPreference[], options: RewardModelStepOptions): RewardModelStepResult {
    if (pairs.length === 0) throw new Error(`${options.label}: no preference pairs to fit`);
    const rows = pairs.map((p) => ({ w: this.ids({ prompts: p.prompts, completions: p.winner }), l: this.ids({ prompts: p.prompts, completions: p.loser }) }));
    const n = rows.length;
    const plan = this.value.backbone.planPasses(rows, (r) => ({ width: 2 * Math.max(r.w.length, r.l.length), scored: 0 }), {
      label: `${options.label}: reward scores`,
      // A taped pass keeps the body's activations even when only the head trains.
      backward: true,
      knobs: ['reward_max_length (tokens of the joint text)', 'reward_train_batch_size', CRITIC_INPUT_KNOB],
      maxRows: options.chunkSize,
      extraTrainable: this.value.head.trainableVariables(),
    });
    let wins = 0;
    const g = accumulateGradients(
      variables,
      plan.batches,
      (chunk) => {
        const v = this.value.values([...chunk.map((r) => r.w), ...chunk.map((r) => r.l)], plan.pass);
        const winners = tf.slice(v, 0, chunk.length) as tf.Tensor1D;
        const losers = tf.slice(v, chunk.length, chunk.length) as tf.Tensor1D;
        const data = v.dataSync();
        for (let i = 0; i < chunk.length; i++) if (data[i] > data[chunk.length + i]) wins++;
        // The loss is a mean over the whole batch: each chunk carries its share.
        return tf.mul(bradleyTerryLoss(winners, losers), chunk.length / n) as tf.Scalar;
      },
      (loss, size) => `${options.label}: the Bradley–Terry loss is ${loss} (non-finite) on a chunk of ${size} pairs; lower reward_learning_rate`,
    );
    const applied = applyGradients(optimizer, g.grads, options.maxGradNorm, options.label);
    return { loss: g.loss, accuracy: wins / n, gradNorm: applied.gradNorm };
  }

  /** Writes the LM (config + weights, or a LoRA adapter), its tokenizer and `value_head.*` into `dir`. */
  async save(dir: string): Promise<void> {
    await this.value.backbone.save(dir);
    await this.value.tokenizer.save(dir);
    await saveCriticHead(this.value.head, dir);
  }

  /** Frees the head, and the LM when this model loaded it (otherwise the LM stays with its caller). */
  dispose(): void {
    this.value.head.dispose();
    if (this.ownsBackbone) this.value.backbone.dispose();
  }
}
