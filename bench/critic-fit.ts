/**
 * `npm run bench -- critic-fit`: can the paper bench's centralized critic fit the sparse reward at
 * all? A supervised check, no actors: the critic reads the joint history at the LAST turn of a
 * hidden-cue episode (the input CoLLM-CC gives it, `critic_history: full`, with m_t) and regresses
 * on that episode's reward, which is a fixed function of the cues and the first turn's words that
 * this input contains. Turn-1 words are one of the four answers half of the time (else any of the
 * 9 words) so that about 57% of the rewards are non-zero, far more than the ~5% an untrained
 * policy earns; later turns' words are uniform. Training uses the trainers' own critic step
 * (`criticStep`: AdamW, value_loss_coef 0.6, no value clip) on minibatches of 4 fresh episodes;
 * the figure is the explained variance on 200 held-out episodes after 0, 80, 320 and 1,280 steps
 * (the paper bench's CoLLM-CC critic takes 640 steps in all on H = 4, 160 on H = 1).
 *
 * Knobs: COMLRL_CRITIC_FIT_H (horizons, default `2,4`), COMLRL_CRITIC_FIT_SIZES (critics as
 * hidden×layers, default `64x2`, the paper bench's), COMLRL_CRITIC_FIT_SEEDS (default `1,2`),
 * COMLRL_CRITIC_FIT_LR (default 1e-2, the paper bench's critic learning rate); wasm unless
 * COMLRL_BACKEND names another backend. Figures only.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { initBackend } from '../src/backend/init.js';
import { explainedVariance } from '../src/buffer/targets.js';
import { createCriticHead } from '../src/critic/heads.js';
import { centralizedCriticIds, CRITIC_LAYOUT_WORDS } from '../src/critic/inputs.js';
import { ValueModel } from '../src/critic/value-model.js';
import { createTinyModel } from '../src/model/tiny.js';
import { loadCausalLM } from '../src/model/load.js';
import { AdamW } from '../src/optim/adamw.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import type { Tokenizer } from '../src/tokenizer/types.js';
import { createRng, rngFor, type Rng } from '../src/util/rng.js';
import { hiddenCueAnswers, hiddenCueCues, HiddenCueEnv, hiddenCueScore, hiddenCueTasks, hiddenCueWords, type HiddenCueTask } from '../envs/hidden-cue/index.js';
import { criticStep } from '../trainers/collm/steps.js';

const CHECKPOINTS = [0, 80, 320, 1280] as const;
const HELD_OUT = 200;
const BATCH = 4;
const VALUE_LOSS_COEF = 0.6;

/** One critic's fit. */
export interface CriticFitRow {
  readonly horizon: number;
  readonly size: string;
  readonly seed: number;
  /** Tokens of a last-turn critic input. */
  readonly tokens: number;
  /** Share of held-out episodes with a non-zero reward. */
  readonly nonZero: number;
  /** Held-out explained variance at each of {@link CHECKPOINTS}. */
  readonly explainedVariance: number[];
  readonly seconds: number;
}

interface Example {
  ids: number[];
  target: number;
}

const ANSWERS = hiddenCueCues.flatMap((c) => hiddenCueAnswers[c]);

function word(rng: Rng, answerShare: number): string {
  return rng.next() < answerShare ? ANSWERS[Math.floor(rng.next() * ANSWERS.length)] : hiddenCueWords[Math.floor(rng.next() * hiddenCueWords.length)];
}

/** The last turn's critic input of one episode with random words, and the episode's reward. */
async function example(env: HiddenCueEnv, tokenizer: Tokenizer, task: HiddenCueTask, rng: Rng): Promise<Example> {
  let state = env.initialState(task);
  const history: { observations: string[]; actions: string[] }[] = [];
  let first: string[] = [];
  for (let t = 0; ; t++) {
    const observations = [env.observe(state, 0), env.observe(state, 1)];
    if (t === env.horizon - 1) {
      const ids = centralizedCriticIds(tokenizer, { observations, globalInfo: env.globalInfo(state), history }, 2048);
      return { ids, target: hiddenCueScore(task.cues, first) };
    }
    const actions = t === 0 ? [word(rng, 0.5), word(rng, 0.5)] : [word(rng, 0), word(rng, 0)];
    if (t === 0) first = actions;
    history.push({ observations, actions });
    state = (await env.step(state, actions)).next;
  }
}

/** Fits one critic (see the module comment). */
async function fitOne(horizon: number, hidden: number, layers: number, seed: number, lr: number): Promise<CriticFitRow> {
  const t0 = performance.now();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-critic-fit-'));
  try {
    const words = [...new Set([...hiddenCueWords, ...CRITIC_LAYOUT_WORDS])];
    await createTinyModel({ dir, arch: 'qwen3', seed: 1000 * seed + 10, tokenizer: 'word', words, hiddenSize: hidden, numLayers: layers });
    const model = await loadCausalLM(dir);
    const tokenizer = await loadTokenizer(dir);
    try {
      const env = new HiddenCueEnv({ numTurns: horizon });
      const tasks = hiddenCueTasks(4, 'fit');
      const rng = createRng(7 * seed + 1);
      const draw = async (n: number) => {
        const out: Example[] = [];
        for (let i = 0; i < n; i++) out.push(await example(env, tokenizer, tasks[i % tasks.length], rng));
        return out;
      };
      const heldOut = await draw(HELD_OUT);
      const critic = new ValueModel(model, createCriticHead(model.hiddenSize, { type: 'linear' }, rngFor(seed, 'init')), tokenizer, false);
      const optimizer = new AdamW(critic.ownVariables(), { lr });
      const ev: number[] = [];
      let step = 0;
      for (const until of CHECKPOINTS) {
        for (; step < until; step++) {
          const batch = await draw(BATCH);
          criticStep(critic, optimizer, batch.map((e) => ({ criticIds: e.ids, target: e.target, oldValue: 0 })), VALUE_LOSS_COEF, null, { maxGradNorm: null, chunkSize: null, label: 'critic fit' });
        }
        ev.push(explainedVariance(await critic.predict(heldOut.map((e) => e.ids)), heldOut.map((e) => e.target)));
      }
      optimizer.dispose();
      critic.head.dispose();
      return {
        horizon,
        size: `${hidden}×${layers}`,
        seed,
        tokens: heldOut[0].ids.length,
        nonZero: heldOut.filter((e) => e.target > 0).length / heldOut.length,
        explainedVariance: ev,
        seconds: (performance.now() - t0) / 1000,
      };
    } finally {
      model.dispose();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function list(value: string | undefined, fallback: string): string[] {
  return (value ?? fallback).split(',').map((s) => s.trim()).filter(Boolean);
}

/** Every (horizon, size, seed) of the knobs, in order. */
export async function benchCriticFit(env: NodeJS.ProcessEnv = process.env): Promise<CriticFitRow[]> {
  const horizons = list(env.COMLRL_CRITIC_FIT_H, '2,4').map(Number);
  const sizes = list(env.COMLRL_CRITIC_FIT_SIZES, '64x2').map((s) => {
    const m = /^(\d+)x(\d+)$/.exec(s);
    if (!m) throw new Error(`COMLRL_CRITIC_FIT_SIZES: '${s}' is not hidden×layers like 64x2`);
    return [Number(m[1]), Number(m[2])] as const;
  });
  const seeds = list(env.COMLRL_CRITIC_FIT_SEEDS, '1,2').map(Number);
  const lr = Number(env.COMLRL_CRITIC_FIT_LR ?? 1e-2);
  for (const h of horizons) if (!Number.isInteger(h) || h < 2) throw new Error(`COMLRL_CRITIC_FIT_H: horizons must be integers ≥ 2 (the reward must lie in the history), got ${h}`);
  if (!(lr > 0)) throw new Error(`COMLRL_CRITIC_FIT_LR must be a positive number, got ${env.COMLRL_CRITIC_FIT_LR}`);
  // The paper bench's backend (wasm) unless COMLRL_BACKEND names another.
  await initBackend(env.COMLRL_BACKEND ? undefined : 'wasm');
  const rows: CriticFitRow[] = [];
  for (const h of horizons) {
    for (const [hidden, layers] of sizes) {
      for (const seed of seeds) {
        const row = await fitOne(h, hidden, layers, seed, lr);
        console.error(`[bench critic-fit] H=${h} critic ${row.size} seed ${seed}: EV ${row.explainedVariance.map((e) => e.toFixed(3)).join(' → ')} (${row.seconds.toFixed(0)} s)`);
        rows.push(row);
      }
    }
  }
  return rows;
}

/** Prints the table. */
export function printCriticFitTable(rows: readonly CriticFitRow[], lr: number): void {
  console.log(`\n## Can the centralized critic fit the hidden-cue reward? (supervised, last turn, lr ${lr}, minibatches of ${BATCH})\n`);
  console.log(`| H | critic (hidden × layers) | seed | input tokens | non-zero rewards | held-out EV after ${CHECKPOINTS.join(' / ')} steps | seconds |`);
  console.log('|---|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(`| ${r.horizon} | ${r.size} | ${r.seed} | ${r.tokens} | ${(100 * r.nonZero).toFixed(0)}% | ${r.explainedVariance.map((e) => e.toFixed(3)).join(' / ')} | ${r.seconds.toFixed(0)} |`);
  }
}
