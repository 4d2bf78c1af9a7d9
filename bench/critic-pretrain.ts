/**
 * The paper bench's pretrained critic: a tiny word-level LM trained by next-token prediction on
 * the text its critic inputs have (bench/relay-episodes.ts): centralized and decentralized critic
 * texts at every turn of behaviour-policy episodes of every relay variant the bench runs. No
 * reward or value enters: like the paper's pretrained critics, it only learns to read the text.
 * The value head stays random; the trainers add it.
 */
import * as tf from '@tensorflow/tfjs';
import type { CausalLM } from '../src/model/types.js';
import { AdamW } from '../src/optim/adamw.js';
import type { Tokenizer } from '../src/tokenizer/types.js';
import { createRng } from '../src/util/rng.js';
import { HiddenCueRelayEnv, relayTasks, type RelayPayment } from '../envs/hidden-cue/relay.js';
import { ccCriticText, dcCriticText, randomEpisode } from './relay-episodes.js';

/** Pretraining budget: optimizer steps × sequences per step, at learning rate `lr`. */
export interface PretrainBudget {
  readonly steps: number;
  readonly batch: number;
  readonly lr: number;
}

/** What the bench spends on each pretrained critic (stated in docs/paper-bench.md). */
export const PRETRAIN_BUDGET: PretrainBudget = { steps: 600, batch: 16, lr: 3e-3 };

/** The relay variants the pretraining text is drawn from. */
export interface TextVariant {
  readonly horizon: number;
  readonly payment: RelayPayment;
}

/**
 * Draws critic texts: a random variant, a behaviour episode on one of its 16 tasks, a random turn,
 * then the centralized text or one agent's decentralized text (equally likely).
 */
export function criticTextSource(variants: readonly TextVariant[], seed: number): () => Promise<string> {
  const rng = createRng(`pretrain-text:${seed}`);
  const envs = variants.map((v) => ({ env: new HiddenCueRelayEnv({ numTurns: v.horizon, payment: v.payment }), tasks: relayTasks(16, v.horizon, 'pretrain') }));
  return async () => {
    const { env, tasks } = envs[rng.int(envs.length)];
    const turns = await randomEpisode(env, tasks, rng);
    const t = rng.int(turns.length);
    const kind = rng.int(3);
    return kind === 2 ? ccCriticText(turns, t) : dcCriticText(turns, t, kind);
  };
}

/** Mean next-token negative log-likelihood of `rows` (each at least 2 tokens); differentiable. */
export function nextTokenLoss(model: CausalLM, rows: readonly number[][]): tf.Scalar {
  const scores = model.scoreCompletions(rows.map((r) => r.slice(0, 1)), rows.map((r) => r.slice(1)));
  return tf.tidy(() => tf.neg(tf.div(tf.sum(tf.mul(scores.tokenLogProbs, scores.mask)), tf.sum(scores.mask))) as tf.Scalar);
}

/**
 * Trains every weight of `model` by next-token prediction on texts from `next` for
 * `budget.steps` AdamW steps. Returns the mean loss of the first and last 10 steps.
 */
export async function pretrainCritic(
  model: CausalLM,
  tokenizer: Tokenizer,
  next: () => Promise<string>,
  budget: PretrainBudget,
): Promise<{ firstLoss: number; lastLoss: number }> {
  const vars = model.trainableVariables();
  const optimizer = new AdamW(vars, { lr: budget.lr });
  const losses: number[] = [];
  try {
    for (let step = 0; step < budget.steps; step++) {
      const rows: number[][] = [];
      for (let i = 0; i < budget.batch; i++) rows.push(tokenizer.encode(await next()));
      const { value, grads } = tf.variableGrads(() => nextTokenLoss(model, rows), vars);
      losses.push(value.dataSync()[0]);
      optimizer.step(grads);
      value.dispose();
      tf.dispose(grads);
    }
  } finally {
    optimizer.dispose();
  }
  const avg = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  return { firstLoss: avg(losses.slice(0, 10)), lastLoss: avg(losses.slice(-10)) };
}
