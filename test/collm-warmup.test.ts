/**
 * Critic warm-up (`critic_warmup_items`) of the actor-critic trainers: during the first N training
 * items only critic parameters step (separate critics, the centralized critic, or a shared value
 * head but not the actor's backbone); afterwards the actors update too; the config field is
 * validated; and a run interrupted inside the warm-up and resumed across its end equals an
 * uninterrupted one, weight for weight.
 */
import { join } from 'node:path';
import type * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import { loadCriticHead } from '../src/critic/heads.js';
import type { CriticLM } from '../src/critic/value-model.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { loadCausalLM } from '../src/model/load.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { rngFor } from '../src/util/rng.js';
import { ToyCoordEnv, toyTasks, toyWords } from '../envs/toy/index.js';
import { parseCoLLMCCConfig, parseCoLLMDCConfig } from '../trainers/collm/config.js';
import { CoLLMCCTrainer } from '../trainers/collm/centralized.js';
import { CoLLMDCTrainer } from '../trainers/collm/decentralized.js';
import { disposeCritics, toyCritics } from './collm-helpers.js';
import { disposeAgents, tempDir, tinyAgents } from './magrpo-helpers.js';

let dir: string;
let cleanup: () => Promise<void>;
/** The start actors' weights. */
let startWeights: number[][];

const load = async (d: string) => ({ model: await loadCausalLM(d), tokenizer: await loadTokenizer(d) });

/** Fresh copies of the two start actors (written once in beforeAll). */
async function startAgents(from = dir): Promise<Agent[]> {
  return [
    { name: 'a0', chat: false, ...(await load(join(from, from === dir ? 'a0' : 'agent_0'))) },
    { name: 'a1', chat: false, ...(await load(join(from, from === dir ? 'a1' : 'agent_1'))) },
  ];
}

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend('wasm');
  ({ dir, cleanup } = await tempDir('collm-warmup'));
  disposeAgents(
    await tinyAgents(dir, [
      { name: 'a0', arch: 'qwen3', seed: 1, words: [...toyWords] },
      { name: 'a1', arch: 'llama', seed: 2, words: [...toyWords] },
    ]),
  );
  disposeCritics(await toyCritics(dir)); // writes c0, c1 (decentralized) and cc (centralized)
  const start = await startAgents();
  startWeights = actorWeights(start);
  disposeAll(start);
});
afterAll(async () => {
  await cleanup();
});

const env = new ToyCoordEnv({ numTurns: 2 });
const tasks = toyTasks(8, 'warmup');
// Two transitions per item: with a buffer of 2 every item ends in exactly one update.
const cfg = {
  num_turns: 2,
  max_new_tokens: 2,
  temperature: 1,
  top_p: 1,
  early_termination_threshold: null,
  rollout_buffer_size: 2,
  update_epochs: 2,
  agent_learning_rate: 1e-2,
  critic_learning_rate: 1e-2,
  eval_interval: 0,
  logging_steps: 1_000_000,
  seed: 3,
} as const;

const snap = (vars: readonly tf.Variable[]) => vars.map((v) => Array.from(v.dataSync()));
const actorWeights = (agents: readonly Agent[]) => agents.flatMap((a) => snap(a.model.trainableVariables()));
const disposeAll = (models: readonly { model: { dispose(): void } }[]) => {
  for (const m of models) m.model.dispose();
};

describe('critic_warmup_items config', () => {
  it('defaults to 0 (off) and accepts integers >= 0 in both trainers', () => {
    expect(parseCoLLMDCConfig({}).critic_warmup_items).toBe(0);
    expect(parseCoLLMCCConfig({}).critic_warmup_items).toBe(0);
    expect(parseCoLLMCCConfig({ critic_warmup_items: 32 }).critic_warmup_items).toBe(32);
    expect(parseCoLLMDCConfig({ critic_warmup_items: 0 }).critic_warmup_items).toBe(0);
  });

  it('rejects negative, fractional and non-number values naming the field', () => {
    for (const parse of [parseCoLLMDCConfig, parseCoLLMCCConfig]) {
      for (const bad of [-1, 1.5, '4', null, Number.NaN]) {
        expect(() => parse({ critic_warmup_items: bad } as never)).toThrow(/critic_warmup_items must be an integer >= 0/);
      }
    }
  });
});

describe('critic warm-up freezes the actors', () => {
  it('CoLLM-CC: N items step only the centralized critic; then the actors update', async () => {
    const agents = await startAgents();
    const critic: CriticLM = await load(join(dir, 'cc'));
    const trainer = new CoLLMCCTrainer({ agents, critic, env, trainTasks: tasks, config: { ...cfg, critic_warmup_items: 2 } });
    const actors0 = actorWeights(agents);
    const agentStart = agents.map((a) => snap(a.model.trainableVariables()));
    const critic0 = snap(trainer.critic.ownVariables());
    expect(trainer.inCriticWarmup).toBe(true);

    await trainer.train({ maxItems: 2 });
    expect(actorWeights(agents)).toEqual(actors0); // bit-identical
    const critic1 = snap(trainer.critic.ownVariables());
    expect(critic1).not.toEqual(critic0);
    // 2 items × 1 update × (2 epochs × 2 turn groups) critic steps, no actor step.
    expect(trainer.updateSteps).toBe(8);
    expect(trainer.lastUpdateMetrics).toMatchObject({ critic_warmup: 1, optimizer_steps: 8 });
    expect(Object.keys(trainer.lastUpdateMetrics).some((k) => k.includes('policy_loss') || k.includes('ratio'))).toBe(false);
    expect(trainer.lastUpdateMetrics['turn_1/value_loss']).toBeGreaterThan(0);

    await trainer.train({ maxItems: 1 });
    expect(trainer.inCriticWarmup).toBe(false);
    expect(trainer.lastUpdateMetrics.critic_warmup).toBeUndefined();
    expect(trainer.lastUpdateMetrics['agent_0/policy_loss']).toBeDefined();
    agents.forEach((a, i) => expect(snap(a.model.trainableVariables())).not.toEqual(agentStart[i])); // each actor moved
    expect(snap(trainer.critic.ownVariables())).not.toEqual(critic1);
    expect(trainer.updateSteps).toBe(8 + 4 * 3); // 4 minibatches × (2 actors + critic)
    trainer.dispose();
    disposeAll([...agents, critic]);
  });

  it('CoLLM-DC with separate critics: only the critic LMs and heads step during warm-up', async () => {
    const agents = await startAgents();
    const critics: CriticLM[] = [await load(join(dir, 'c0')), await load(join(dir, 'c1'))];
    const trainer = new CoLLMDCTrainer({ agents, critics, env, trainTasks: tasks, config: { ...cfg, critic_warmup_items: 1 } });
    const actors0 = actorWeights(agents);
    const critics0 = trainer.critics.map((c) => snap(c.ownVariables()));

    await trainer.train({ maxItems: 1 });
    expect(actorWeights(agents)).toEqual(actors0);
    trainer.critics.forEach((c, i) => expect(snap(c.ownVariables())).not.toEqual(critics0[i]));
    expect(trainer.actorOptimizers.map((o) => o.stepCount)).toEqual([0, 0]);
    expect(trainer.criticOptimizers.map((o) => o.stepCount)).toEqual([4, 4]);
    expect(trainer.lastUpdateMetrics).toMatchObject({ critic_warmup: 1 });
    expect(trainer.lastUpdateMetrics['agent_0/critic_grad_norm']).toBeGreaterThan(0);

    await trainer.train({ maxItems: 1 });
    expect(actorWeights(agents)).not.toEqual(actors0);
    expect(trainer.actorOptimizers.map((o) => o.stepCount)).toEqual([4, 4]);
    trainer.dispose();
    disposeAll([...agents, ...critics]);
  });

  it('CoLLM-DC with shared heads: only the head steps during warm-up, never the backbone', async () => {
    const agents = await startAgents();
    const trainer = new CoLLMDCTrainer({ agents, env, trainTasks: tasks, config: { ...cfg, use_separate_critic: false, critic_warmup_items: 1 } });
    const actors0 = actorWeights(agents);
    const heads0 = trainer.critics.map((c) => snap(c.head.trainableVariables()));

    await trainer.train({ maxItems: 1 });
    expect(actorWeights(agents)).toEqual(actors0); // backbone untouched: no step, no weight decay
    trainer.critics.forEach((c, i) => expect(snap(c.head.trainableVariables())).not.toEqual(heads0[i]));
    // The head steps through the actor's AdamW; the backbone's per-parameter step counts stay 0.
    const state = trainer.actorOptimizers[0].getState();
    const nBackbone = agents[0].model.trainableVariables().length;
    expect(state.paramSteps.slice(0, nBackbone).every((s) => s === 0)).toBe(true);
    expect(state.paramSteps.slice(nBackbone).every((s) => s === 4)).toBe(true);

    await trainer.train({ maxItems: 1 });
    expect(actorWeights(agents)).not.toEqual(actors0);
    trainer.dispose();
    disposeAll(agents);
  });
});

describe('resume across the end of the warm-up', () => {
  it('CoLLM-CC: interrupted inside the warm-up, saved, reloaded and resumed equals an uninterrupted run', async () => {
    // Buffer of 3 transitions: updates straddle items, and the warm-up ends at item 3 mid-run.
    const config = { ...cfg, rollout_buffer_size: 3, critic_warmup_items: 3 } as const;

    const refAgents = await startAgents();
    const refCritic = await load(join(dir, 'cc'));
    const ref = new CoLLMCCTrainer({ agents: refAgents, critic: refCritic, env, trainTasks: tasks, config });
    await ref.train({ maxItems: 6 });

    const firstAgents = await startAgents();
    const firstCritic = await load(join(dir, 'cc'));
    const first = new CoLLMCCTrainer({ agents: firstAgents, critic: firstCritic, env, trainTasks: tasks, config });
    await first.train({ maxItems: 2 });
    expect(first.inCriticWarmup).toBe(true);
    expect(actorWeights(firstAgents)).toEqual(startWeights);
    const out = join(dir, 'saved-warmup');
    await first.save(out);
    const state = structuredClone(first.exportState());
    expect(state.extra.trainItems).toBe(2);

    const resume = async (s: typeof state) => {
      const agents = await startAgents(out);
      const critic = await load(join(out, 'critic'));
      const trainer = new CoLLMCCTrainer({
        agents,
        critic,
        criticHead: await loadCriticHead(join(out, 'critic'), rngFor(0, 'unused')),
        env,
        trainTasks: tasks,
        config,
      });
      trainer.importState(s);
      expect(trainer.inCriticWarmup).toBe(true);
      await trainer.train({ maxItems: 4 });
      return { agents, critic, trainer };
    };

    const resumed = await resume(state);
    expect(resumed.trainer.envSteps).toBe(ref.envSteps);
    expect(resumed.trainer.updateSteps).toBe(ref.updateSteps);
    expect(resumed.trainer.lastUpdateMetrics).toEqual(ref.lastUpdateMetrics);
    expect(actorWeights(resumed.agents)).toEqual(actorWeights(refAgents));
    expect(actorWeights(resumed.agents)).not.toEqual(actorWeights(firstAgents)); // the actors did train after the warm-up
    expect(snap(resumed.trainer.critic.ownVariables())).toEqual(snap(ref.critic.ownVariables()));

    // A snapshot written before the option existed (no trainItems): the cursor's position is used.
    const { trainItems: _dropped, ...legacyExtra } = state.extra;
    const legacy = await resume({ ...state, extra: legacyExtra });
    expect(actorWeights(legacy.agents)).toEqual(actorWeights(refAgents));

    // A bad count is refused before anything changes.
    expect(() => legacy.trainer.importState({ ...state, extra: { ...state.extra, trainItems: -1 } })).toThrow(/bad training item count/);

    for (const t of [ref, first, resumed.trainer, legacy.trainer]) t.dispose();
    disposeAll([...refAgents, ...firstAgents, ...resumed.agents, ...legacy.agents, refCritic, firstCritic, resumed.critic, legacy.critic]);
  });
});
