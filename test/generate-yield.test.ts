/**
 * Generation lets the event loop run while it samples (every `yieldEveryMs`), so a Ctrl-C handler
 * runs mid-generation instead of after it, and the tokens drawn do not depend on it.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { initBackend } from '../src/backend/init.js';
import { GENERATION_YIELD_MS } from '../src/model/types.js';
import { createRng } from '../src/util/rng.js';
import { toyWords } from '../envs/toy/index.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { disposeAgents, tempDir, tinyAgents } from './magrpo-helpers.js';

let agents: Agent[];
let cleanup: () => Promise<void>;

beforeAll(async () => {
  await initBackend('wasm');
  const t = await tempDir('generate-yield');
  cleanup = t.cleanup;
  agents = await tinyAgents(t.dir, [{ name: 'g', arch: 'qwen3', seed: 5, words: [...toyWords] }]);
});
afterAll(async () => {
  disposeAgents(agents);
  await cleanup();
});

test('a callback queued on the event loop runs during generation; the samples are the same with or without yields', async () => {
  expect(GENERATION_YIELD_MS).toBeLessThanOrEqual(1000);
  const model = agents[0].model;
  const prompt = [agents[0].tokenizer.encode('cue red')];
  // No eos: every row runs all 12 steps.
  const options = { maxNewTokens: 12, temperature: 1, numReturnSequences: 3, eosTokenIds: [] };
  const order: string[] = [];
  setImmediate(() => order.push('callback'));
  const yielding = await model.generate(prompt, { ...options, rng: createRng('s'), yieldEveryMs: 0 });
  order.push('generated');
  // Without yields, the whole generation runs before the queued callback (what a Ctrl-C met).
  const never = Number.POSITIVE_INFINITY;
  let ranFirst = false;
  setImmediate(() => {
    ranFirst = true;
  });
  const blocking = await model.generate(prompt, { ...options, rng: createRng('s'), yieldEveryMs: never });
  const ranBefore = ranFirst;
  expect(order).toEqual(['callback', 'generated']);
  expect(ranBefore).toBe(false);
  expect(yielding.sequences).toEqual(blocking.sequences);
  expect(yielding.logProbs).toEqual(blocking.logProbs);
});
