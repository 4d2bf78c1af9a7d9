/**
 * `npm run bench -- critic-fit`: the paper bench's gate. Can its centralized critic read its input,
 * within the critic steps one CoLLM-CC run of the bench takes? Supervised, no actors: the critic
 * reads CoLLM-CC's input (joint history and m_t with progress) at a random turn t of a hidden-cue
 * relay episode played by the behaviour policy of bench/relay-episodes.ts, and regresses on that
 * episode's return G_t (γ = 0.9) with the trainers' own critic step (`criticStep`, AdamW,
 * value_loss_coef 0.6, no value clip) on minibatches of the bench's size. The figure is the
 * explained variance (1 − Var(y − V)/Var(y)) on held-out histories whose target y is their value
 * under the behaviour policy, E[G_t | h_t], estimated from {@link CONTINUATIONS} continuations
 * each, so a critic that reads its input perfectly scores near 1.
 *
 * The gate passes when every variant's pretrained critic reaches EV ≥ {@link GATE_EV} at the end of
 * its step budget; `npm run bench -- paper` runs it first and reports its comparison only then.
 * The random-init critic is fitted alongside for the record.
 */
import { explainedVariance } from '../src/buffer/targets.js';
import { createCriticHead } from '../src/critic/heads.js';
import { ValueModel, type CriticLM } from '../src/critic/value-model.js';
import { AdamW } from '../src/optim/adamw.js';
import { createRng, rngFor } from '../src/util/rng.js';
import { HiddenCueRelayEnv, relayTasks, type RelayPayment } from '../envs/hidden-cue/relay.js';
import { criticStep } from '../trainers/collm/steps.js';
import { ccCriticText, playRelay, randomEpisode, returnsOf } from './relay-episodes.js';

/** Held-out explained variance the pretrained critic must reach. */
export const GATE_EV = 0.5;
/** Behaviour continuations per held-out history for its value. */
export const CONTINUATIONS = 16;
const VALUE_LOSS_COEF = 0.6;
const GAMMA = 0.9;

/** One fit's settings. */
export interface CriticFitOptions {
  readonly horizon: number;
  readonly payment: RelayPayment;
  /** The critic's LM and tokenizer (its value head is created here, seeded by `seed`). */
  readonly critic: CriticLM;
  /** Optimizer steps (the bench: one CoLLM-CC run's critic steps). */
  readonly steps: number;
  /** Rows per step. */
  readonly batch: number;
  readonly lr: number;
  readonly seed: number;
  /** Held-out histories. Default 128. */
  readonly heldOut?: number;
  /** Steps after which EV is measured besides the last (fractions of `steps`). Default 0, ¼, ½. */
  readonly checkpoints?: readonly number[];
}

/** One fit's outcome. */
export interface CriticFitResult {
  /** Steps at which EV was measured, the last = `steps`. */
  readonly at: number[];
  /** Held-out explained variance at each of `at`. */
  readonly explainedVariance: number[];
  /** Longest critic input seen (tokens). */
  readonly tokens: number;
  readonly seconds: number;
}

interface Row {
  ids: number[];
  target: number;
}

/** Fits a critic (see the module comment). Disposes only what it creates (the head, the optimizer). */
export async function fitCritic(o: CriticFitOptions): Promise<CriticFitResult> {
  const t0 = performance.now();
  const env = new HiddenCueRelayEnv({ numTurns: o.horizon, payment: o.payment });
  const tasks = relayTasks(16, o.horizon, 'critic-fit');
  const rng = createRng(`critic-fit:${o.seed}`);
  let tokens = 0;
  const encode = (text: string) => {
    const ids = o.critic.tokenizer.encode(text);
    tokens = Math.max(tokens, ids.length);
    return ids;
  };
  const heldOut: Row[] = [];
  for (let i = 0; i < (o.heldOut ?? 128); i++) {
    const turns = await randomEpisode(env, tasks, rng);
    const t = rng.int(turns.length);
    let sum = 0;
    for (let c = 0; c < CONTINUATIONS; c++) sum += returnsOf((await playRelay(env, turns[t].state, rng)).map((k) => k.reward), GAMMA)[0];
    heldOut.push({ ids: encode(ccCriticText(turns, t)), target: sum / CONTINUATIONS });
  }
  const draw = async (): Promise<Row> => {
    const turns = await randomEpisode(env, tasks, rng);
    const t = rng.int(turns.length);
    return { ids: encode(ccCriticText(turns, t)), target: returnsOf(turns.map((k) => k.reward), GAMMA)[t] };
  };
  const critic = new ValueModel(o.critic.model, createCriticHead(o.critic.model.hiddenSize, { type: 'linear' }, rngFor(o.seed, 'init')), o.critic.tokenizer, false);
  const optimizer = new AdamW(critic.ownVariables(), { lr: o.lr });
  try {
    const at = [...new Set([...(o.checkpoints ?? [0, Math.round(o.steps / 4), Math.round(o.steps / 2)]), o.steps])].sort((a, b) => a - b);
    const ev: number[] = [];
    let step = 0;
    for (const until of at) {
      for (; step < until; step++) {
        const rows: Row[] = [];
        for (let i = 0; i < o.batch; i++) rows.push(await draw());
        criticStep(critic, optimizer, rows.map((r) => ({ criticIds: r.ids, target: r.target, oldValue: 0 })), VALUE_LOSS_COEF, null, { maxGradNorm: null, chunkSize: null, label: 'critic fit' });
      }
      ev.push(explainedVariance(await critic.predict(heldOut.map((r) => r.ids)), heldOut.map((r) => r.target)));
    }
    return { at, explainedVariance: ev, tokens, seconds: (performance.now() - t0) / 1000 };
  } finally {
    optimizer.dispose();
    critic.head.dispose();
  }
}

/** A gate row as the paper bench prints it. */
export interface GateRow {
  readonly variant: string;
  readonly arm: 'random' | 'pretrained';
  readonly seed: number;
  readonly result: CriticFitResult;
}

/** Whether the gate passes: every pretrained row's last EV ≥ {@link GATE_EV} (and there is one). */
export function gatePasses(rows: readonly GateRow[]): boolean {
  const pre = rows.filter((r) => r.arm === 'pretrained');
  return pre.length > 0 && pre.every((r) => r.result.explainedVariance[r.result.explainedVariance.length - 1] >= GATE_EV);
}

/** Prints the gate's table. */
export function printGateTable(rows: readonly GateRow[], lr: number, batch: number): void {
  console.log(`\n## Critic-fit gate: can CoLLM-CC's critic read its input? (supervised, lr ${lr}, minibatches of ${batch}; pass: pretrained EV ≥ ${GATE_EV} at the end of the budget)\n`);
  console.log('| variant | critic | seed | input tokens (max) | held-out EV at steps | seconds |');
  console.log('|---|---|---|---|---|---|');
  for (const r of rows) {
    const ev = r.result.at.map((s, i) => `${s}: ${r.result.explainedVariance[i].toFixed(3)}`).join(' · ');
    console.log(`| ${r.variant} | ${r.arm === 'random' ? 'random init' : 'pretrained'} | ${r.seed} | ${r.result.tokens} | ${ev} | ${r.result.seconds.toFixed(0)} |`);
  }
  console.log(`\ngate: ${gatePasses(rows) ? 'PASSED' : 'FAILED'}`);
}
