/**
 * A critic alone regresses toward a known value function on a toy task: V(h) for the toy
 * coordination prompts (cue word and turn), learnt with the trainers' critic step.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import { createCriticHead } from '../src/critic/heads.js';
import { centralizedCriticIds } from '../src/critic/inputs.js';
import { ValueModel, type CriticLM } from '../src/critic/value-model.js';
import { AdamW } from '../src/optim/adamw.js';
import { rngFor } from '../src/util/rng.js';
import { toyCues, toyWords } from '../envs/toy/index.js';
import { criticStep } from '../trainers/common/actor-critic.js';
import { tinyCritic } from './collm-helpers.js';
import { tempDir } from './magrpo-helpers.js';

let cleanup: () => Promise<void>;
let lm: CriticLM;
beforeAll(async () => {
  setBackendLogger(null);
  await initBackend('wasm');
  let dir: string;
  ({ dir, cleanup } = await tempDir('critic-regress'));
  lm = await tinyCritic(dir, 'critic', 9, toyWords);
});
afterAll(async () => {
  lm.model.dispose();
  await cleanup();
});

test('a centralized critic regresses toward a known value function', async () => {
  const LR = Number(process.env.CLR ?? 1e-2);
  // The known V: a value per (cue, turn), distinct enough that a constant predictor is poor.
  const value = (cue: number, turn: number) => 0.2 * cue + (turn === 0 ? 0.1 : 0.5);
  const rows = toyCues.flatMap((cue, c) =>
    [0, 1].map((turn) => ({
      criticIds: centralizedCriticIds(lm.tokenizer, {
        observations: [`cue ${cue}`, `cue ${cue}`],
        globalInfo: { turn, numTurns: 2, lastReward: turn === 0 ? null : 0, maxReward: 1 },
      }),
      target: value(c, turn),
      oldValue: 0,
    })),
  );
  const critic = new ValueModel(lm.model, createCriticHead(lm.model.hiddenSize, { type: 'linear' }, rngFor(0, 'init')), lm.tokenizer, false);
  const opt = new AdamW(critic.ownVariables(), { lr: LR });
  const losses: number[] = [];
  for (let step = 0; step < Number(process.env.STEPS ?? 100); step++) {
    const r = criticStep(critic, opt, rows, 1, null, { maxGradNorm: null, chunkSize: null, label: 'critic regression' });
    losses.push(r.loss);
  }
  console.log(losses.filter((_, i) => i % 10 === 0).map((l) => l.toFixed(4)).join(' '), losses[losses.length - 1]);
  expect(losses[losses.length - 1]).toBeLessThan(losses[0] / 10);
  opt.dispose();
  critic.head.dispose();
});
