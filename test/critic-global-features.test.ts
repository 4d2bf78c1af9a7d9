/**
 * Numeric m_t for critics (`critic_global_features`, the CoLLM paper's §4.1 m_t "in a numerical
 * representation"): the env boundary check, heads that read [h; f] (shapes, zero-initialised
 * feature columns, the gradient that reaches them, save/load, mismatched sizes refused), the value
 * model and the distinct-row prediction with features, the config key and its refusals, and
 * CoLLM-CC / CoLLM-DC runs on the hidden-cue relay with features: stored per transition, values
 * that part from the featureless run's once the critic steps, exact resume, and checkpoints whose
 * head or buffer does not match refused. Numbers on the cpu backend.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import {
  createCriticHead,
  createLinearHead,
  CRITIC_LAYOUT_WORDS,
  HEAD_CONFIG_FILE,
  loadCriticHead,
  readHiddenAt,
  registerCriticHead,
  saveCriticHead,
  ValueModel,
  type CriticHead,
  type CriticLM,
} from '../src/critic/index.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { declaredGlobalFeatures, GlobalFeaturesError, globalFeaturesOf } from '../src/decpomdp/features.js';
import type { GlobalFeatures, GlobalInfo, LLMDecPOMDP, StepResult } from '../src/decpomdp/types.js';
import { loadCausalLM } from '../src/model/load.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { rngFor } from '../src/util/rng.js';
import { HiddenCueEnv, hiddenCueTasks, hiddenCueWords } from '../envs/hidden-cue/index.js';
import { HiddenCueRelayEnv, relayFeatures, relayTasks, RELAY_PROGRESS_WORDS, type RelayState, type RelayTask } from '../envs/hidden-cue/relay.js';
import { parseCoLLMCCConfig, parseCoLLMDCConfig } from '../trainers/collm/config.js';
import { CoLLMCCTrainer } from '../trainers/collm/centralized.js';
import { CoLLMDCTrainer } from '../trainers/collm/decentralized.js';
import { predictDistinct } from '../trainers/collm/rollout.js';
import { backendUnderTest } from './backend-under-test.js';
import { tinyCritic } from './collm-helpers.js';
import { tempDir, tinyAgents } from './magrpo-helpers.js';

let dir: string;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend(backendUnderTest('cpu'));
  ({ dir, cleanup } = await tempDir('critic-features'));
});
afterAll(async () => cleanup());

/** A minimal env whose numeric m_t is whatever `of` returns, for the boundary checks. */
function envWith(features: GlobalFeatures<number> | undefined): LLMDecPOMDP<number, number> {
  return {
    name: 'probe',
    numAgents: 1,
    horizon: 1,
    initialState: (t) => t,
    observe: () => 'cue',
    step: async (s): Promise<StepResult<number>> => ({ reward: 0, next: s, done: true, info: {} }),
    globalInfo: (): GlobalInfo => ({ turn: 0, numTurns: 1, lastReward: null, maxReward: null }),
    ...(features ? { globalFeatures: features } : {}),
  };
}

describe('the env boundary', () => {
  it('checks the declaration and every vector, naming the env and the entry', () => {
    const good = envWith({ size: 2, names: ['a', 'b'], of: (s) => [s, 2 * s] });
    expect(globalFeaturesOf(good, 3)).toEqual([3, 6]);
    expect(() => declaredGlobalFeatures(envWith(undefined))).toThrow(GlobalFeaturesError);
    expect(() => declaredGlobalFeatures(envWith(undefined))).toThrow(/env 'probe' provides no globalFeatures/);
    expect(() => declaredGlobalFeatures(envWith({ size: 0, of: () => [] }))).toThrow(/env 'probe': globalFeatures.size must be an integer >= 1, got 0/);
    expect(() => declaredGlobalFeatures(envWith({ size: 2, names: ['a'], of: () => [0, 0] }))).toThrow(/declares size 2 but 1 names/);
    expect(() => globalFeaturesOf(envWith({ size: 2, of: () => [1] }), 0)).toThrow(/env 'probe': globalFeatures.of returned 1 entries, declared size 2/);
    expect(() => globalFeaturesOf(envWith({ size: 2, names: ['a', 'b'], of: () => [1, Number.NaN] }), 0)).toThrow(/env 'probe': global feature entry 1 \('b'\) is NaN/);
    expect(() => globalFeaturesOf(envWith({ size: 2, of: () => [Infinity, 0] }), 0)).toThrow(/global feature entry 0 is Infinity/);
  });
});

describe('heads that read global features', () => {
  it('linear: [1, H + F] weight, the h columns drawn as the featureless head draws them, the feature columns zero; value w·[h; f] + b', () => {
    const plain = createCriticHead(4, { type: 'linear' }, rngFor(5, 'init'));
    const head = createCriticHead(4, { type: 'linear' }, rngFor(5, 'init'), 3);
    expect(head.featureSize).toBe(3);
    const [w, b] = head.trainableVariables();
    expect(w.shape).toEqual([1, 7]);
    const wd = Array.from(w.dataSync());
    expect(wd.slice(0, 4)).toEqual(Array.from(plain.trainableVariables()[0].dataSync()));
    expect(wd.slice(4)).toEqual([0, 0, 0]);
    // Set known weights: w = [1, 2, 3, 4 | 10, 20, 30], b = 0.5.
    tf.tidy(() => {
      w.assign(tf.tensor2d([[1, 2, 3, 4, 10, 20, 30]]));
      b.assign(tf.tensor1d([0.5]));
    });
    const h = tf.tensor2d([
      [1, 0, 0, 0],
      [0, 1, 1, 0],
    ]);
    const f = tf.tensor2d([
      [0.1, 0, 0],
      [0, 0.5, 1],
    ]);
    // Row 0: 1 + 10·0.1 + 0.5 = 2.5; row 1: 2 + 3 + 20·0.5 + 30·1 + 0.5 = 45.5.
    const v = head.apply(h, f);
    expect(Array.from(v.dataSync())).toEqual([2.5, 45.5]);
    expect(() => head.apply(h)).toThrow(/reads 3 global features beside the hidden state, none given/);
    expect(() => head.apply(h, tf.zeros([2, 2]) as tf.Tensor2D)).toThrow(/expected global features \[2, 3\], got \[2, 2\]/);
    expect(() => plain.apply(h, f)).toThrow(/built without them \(featureSize 0\)/);
    tf.dispose([h, f, v]);
    plain.dispose();
    head.dispose();
  });

  it('the gradient reaches the feature weights: linear Σ_n f_n; mlp Σ_n w2_d (1 − z_nd²) f_n (hand-derived)', () => {
    const h = tf.tensor2d([
      [0.3, -0.2],
      [0.1, 0.4],
    ]);
    const f = tf.tensor2d([
      [1, 0.5],
      [0.25, -1],
    ]);
    const lin = createCriticHead(2, { type: 'linear' }, rngFor(1, 'init'), 2);
    const { grads } = tf.variableGrads(() => tf.sum(lin.apply(h, f)) as tf.Scalar, lin.trainableVariables());
    const gw = Array.from(grads[lin.trainableVariables()[0].name].dataSync());
    // ∂Σ_n v_n/∂w = Σ_n [h_n; f_n]: feature columns 1 + 0.25 and 0.5 − 1.
    expect(gw[2]).toBeCloseTo(1.25, 6);
    expect(gw[3]).toBeCloseTo(-0.5, 6);
    tf.dispose(Object.values(grads));

    const mlp = createCriticHead(2, { type: 'mlp', hiddenDim: 3 }, rngFor(2, 'init'), 2);
    const [w1, b1, w2] = mlp.trainableVariables();
    expect(w1.shape).toEqual([3, 4]);
    const plainMlp = createCriticHead(2, { type: 'mlp', hiddenDim: 3 }, rngFor(2, 'init'));
    // Same draws: w1's h columns and w2 equal the featureless head's.
    const w1d = Array.from(w1.dataSync());
    const pw1 = Array.from(plainMlp.trainableVariables()[0].dataSync());
    for (let r = 0; r < 3; r++) expect(w1d.slice(r * 4, r * 4 + 2)).toEqual(pw1.slice(r * 2, r * 2 + 2));
    expect(Array.from(w2.dataSync())).toEqual(Array.from(plainMlp.trainableVariables()[2].dataSync()));
    // With non-zero feature columns, the hand derivation: z_nd = tanh(Σ_j W1[d, j] x_nj + b1_d).
    tf.tidy(() => w1.assign(tf.add(w1, tf.tensor2d([0, 0, 0.1, -0.2, 0, 0, 0.3, 0.05, 0, 0, -0.15, 0.2], [3, 4]))));
    const { grads: g2 } = tf.variableGrads(() => tf.sum(mlp.apply(h, f)) as tf.Scalar, mlp.trainableVariables());
    const got = Array.from(g2[w1.name].dataSync());
    const W1 = Array.from(w1.dataSync());
    const B1 = Array.from(b1.dataSync());
    const W2 = Array.from(w2.dataSync());
    const x = [
      [0.3, -0.2, 1, 0.5],
      [0.1, 0.4, 0.25, -1],
    ];
    for (let d = 0; d < 3; d++) {
      for (const j of [2, 3]) {
        let want = 0;
        for (const xn of x) {
          const z = Math.tanh(xn.reduce((a, xv, k) => a + W1[d * 4 + k] * xv, B1[d]));
          want += W2[d] * (1 - z * z) * xn[j];
        }
        expect(got[d * 4 + j]).toBeCloseTo(want, 6);
        expect(Math.abs(want)).toBeGreaterThan(0);
      }
    }
    tf.dispose([h, f, ...Object.values(g2)]);
    for (const x of [lin, mlp, plainMlp]) x.dispose();
  });

  it('saves the feature size with the head and loads it back; a featureless head saves as before', async () => {
    const head = createCriticHead(5, { type: 'mlp', hiddenDim: 4 }, rngFor(7, 'init'), 3);
    tf.tidy(() => head.trainableVariables()[0].assign(tf.randomNormal([4, 8], 0, 1, 'float32', 3)));
    const d = join(dir, 'head-features');
    await saveCriticHead(head, d);
    const cfg = JSON.parse(readFileSync(join(d, HEAD_CONFIG_FILE), 'utf8')) as Record<string, unknown>;
    expect(cfg).toMatchObject({ input_size: 5, feature_size: 3, spec: { type: 'mlp', hiddenDim: 4 } });
    const back = await loadCriticHead(d, rngFor(99, 'init'));
    expect(back.featureSize).toBe(3);
    head.trainableVariables().forEach((v, i) => expect(Array.from(back.trainableVariables()[i].dataSync())).toEqual(Array.from(v.dataSync())));
    const plain = createCriticHead(5, { type: 'linear' }, rngFor(7, 'init'));
    const pd = join(dir, 'head-plain');
    await saveCriticHead(plain, pd);
    expect(Object.keys(JSON.parse(readFileSync(join(pd, HEAD_CONFIG_FILE), 'utf8')) as object)).not.toContain('feature_size');
    expect((await loadCriticHead(pd, rngFor(0, 'x'))).featureSize).toBe(0);
    for (const x of [head, back, plain]) x.dispose();
  });

  it('refuses a head kind that ignores the feature size it is asked for', () => {
    registerCriticHead('features-ignored', (n, spec, rng) => createLinearHead(n, spec, rng));
    expect(() => createCriticHead(4, { type: 'features-ignored' }, rngFor(0, 'init'), 2)).toThrow(/value head 'features-ignored' was asked for 2 global features and reads 0/);
    const ok = createCriticHead(4, { type: 'features-ignored' }, rngFor(0, 'init'));
    expect(ok.featureSize).toBe(0);
    ok.dispose();
  });
});

describe('the value model with features', () => {
  let lm: CriticLM;
  beforeAll(async () => {
    lm = await tinyCritic(dir, 'vm-critic', 3, [...hiddenCueWords]);
  });
  afterAll(() => lm.model.dispose());

  it('reads the features beside the last hidden state; predict matches values in any micro-batching', async () => {
    const head = createCriticHead(lm.model.hiddenSize, { type: 'linear' }, rngFor(0, 'init'), 2);
    tf.tidy(() => head.trainableVariables()[0].assign(tf.randomNormal([1, lm.model.hiddenSize + 2], 0, 1, 'float32', 4)));
    const vm = new ValueModel(lm.model, head, lm.tokenizer, false);
    expect(vm.featureSize).toBe(2);
    const ids = [lm.tokenizer.encode('cue red'), lm.tokenizer.encode('cue blue partner sky')];
    const feats = [
      [0.5, -1],
      [1, 0.25],
    ];
    const want = tf.tidy(() => {
      const hidden = lm.model.hiddenStates(ids);
      return Array.from(head.apply(readHiddenAt(hidden, ids.map((r) => r.length - 1)), tf.tensor2d(feats)).dataSync());
    });
    const got = tf.tidy(() => Array.from(vm.values(ids, undefined, feats).dataSync()));
    expect(got).toEqual(want);
    const one = await vm.predict(ids, 1, feats);
    one.forEach((v, i) => expect(v).toBeCloseTo(want[i], 5));
    expect(() => vm.values(ids)).toThrow(/reads 2 global features per row, none given/);
    expect(() => vm.values(ids, undefined, [[1, 2]])).toThrow(/1 feature vectors for 2 input rows/);
    expect(() => vm.values(ids, undefined, [[1, 2], [3]])).toThrow(/row 1 has 1 entries, the value head reads 2/);
    expect(() => vm.values(ids, undefined, [[1, 2], [3, Number.NaN]])).toThrow(/global feature 1 of row 1 is NaN/);
    head.dispose();
  });

  it('predictDistinct keys a row by its ids and its features', async () => {
    const asked: number[][][] = [];
    const predict = async (rows: number[][], f: number[][] | null) => {
      asked.push(f ?? []);
      return rows.map((r, i) => r[0] + (f ? f[i][0] : 0));
    };
    const out = await predictDistinct(predict, [[1], [1], [1]], [[0], [5], [0]]);
    expect(out).toEqual([1, 6, 1]);
    expect(asked).toEqual([[[0], [5]]]);
    expect(await predictDistinct(predict, [[2], [2]])).toEqual([2, 2]);
  });
});

describe('config', () => {
  it('critic_global_features: absent unless set (left out of the hash), a boolean', () => {
    expect('critic_global_features' in parseCoLLMCCConfig({})).toBe(false);
    expect('critic_global_features' in parseCoLLMDCConfig({})).toBe(false);
    expect(parseCoLLMCCConfig({ critic_global_features: true }).critic_global_features).toBe(true);
    expect(parseCoLLMDCConfig({ critic_global_features: false }).critic_global_features).toBe(false);
    expect(() => parseCoLLMCCConfig({ critic_global_features: 'yes' } as never)).toThrow(/critic_global_features/);
  });
});

// ---------------------------------------------------------------------------------------------
// Trainer runs on the hidden-cue relay (H = 2, sparse), tiny word-level actors and critics.
// ---------------------------------------------------------------------------------------------

const RELAY_WORDS = [...hiddenCueWords];
const CRITIC_WORDS = [...RELAY_WORDS, ...RELAY_PROGRESS_WORDS, ...CRITIC_LAYOUT_WORDS, '25', '75'];
const env = new HiddenCueRelayEnv({ numTurns: 2, payment: 'sparse' });
const tasks: RelayTask[] = relayTasks(4, 2, 'features');
const RUN = {
  num_turns: 2,
  max_new_tokens: 2,
  temperature: 1,
  top_p: 1,
  top_k: 0,
  eval_interval: 0,
  logging_steps: 1_000_000,
  early_termination_threshold: null,
  rollout_buffer_size: 3,
  update_epochs: 2,
  agent_learning_rate: 1e-2,
  critic_learning_rate: 1e-2,
  seed: 5,
} as const;

describe('CoLLM runs with numeric m_t', () => {
  let agentDirs: string[];
  let criticDirs: string[];
  beforeAll(async () => {
    const made = await tinyAgents(dir, [
      { name: 'ra0', arch: 'qwen3', seed: 11, words: RELAY_WORDS },
      { name: 'ra1', arch: 'qwen3', seed: 12, words: RELAY_WORDS },
    ]);
    for (const a of made) a.model.dispose();
    agentDirs = [join(dir, 'ra0'), join(dir, 'ra1')];
    criticDirs = [];
    for (const [i, name] of ['rc0', 'rc1', 'rcc'].entries()) {
      (await tinyCritic(dir, name, 21 + i, CRITIC_WORDS)).model.dispose();
      criticDirs.push(join(dir, name));
    }
  });

  const lmOf = async (d: string, name: string) => ({ name, model: await loadCausalLM(d), tokenizer: await loadTokenizer(d) });
  const loadAgents = async (dirs: readonly string[]): Promise<Agent[]> => Promise.all(dirs.map(async (d, i) => ({ ...(await lmOf(d, `a${i}`)), chat: false })));
  const weights = (xs: readonly { trainableVariables(): tf.Variable[] }[]) => xs.flatMap((x) => x.trainableVariables().map((v) => Array.from(v.dataSync())));

  it('CoLLM-CC: transitions carry m_t and m_{t+1}; values start equal to the text critic\'s and part once it steps', async () => {
    const runs: Record<string, { first: number[]; after: number[] }> = {};
    for (const on of [false, true]) {
      const agents = await loadAgents(agentDirs);
      const critic = await lmOf(criticDirs[2], 'cc');
      const trainer = new CoLLMCCTrainer<RelayTask, RelayState>({ agents, critic, env, trainTasks: tasks, evalTasks: tasks, config: { ...RUN, eval_num_samples: 2, ...(on ? { critic_global_features: true } : {}) } });
      expect(trainer.criticFeatureSize).toBe(on ? 4 : 0);
      const trs = await trainer.rollout(tasks[0]);
      if (on) {
        // Turn 0: nothing played, m_1 after the played turn; the last turn has no bootstrap input.
        expect(trs[0].joint?.criticFeatures).toEqual([0, 0, 0, 0]);
        expect(trs[0].joint?.nextCriticFeatures).toEqual(trs[1].joint?.criticFeatures);
        expect(trs[1].joint?.criticFeatures?.[0]).toBe(0.5);
        expect(trs[1].joint?.nextCriticFeatures).toBeNull();
        expect(trs[0].agents[0].criticFeatures).toBeUndefined();
      } else {
        expect(trs[0].joint && 'criticFeatures' in trs[0].joint).toBe(false);
      }
      const first = trs.map((t) => t.joint?.value ?? NaN);
      await trainer.train({ maxItems: 3 });
      const after = (await trainer.rollout(tasks[1])).map((t) => t.joint?.value ?? NaN);
      // Evaluation values every turn with the features of its states.
      const evalValues = Object.entries((await trainer.evaluate()).metrics).filter(([k]) => k.endsWith('value_pred_mean'));
      expect(evalValues).toHaveLength(2);
      for (const [, v] of evalValues) expect(Number.isFinite(v)).toBe(true);
      runs[String(on)] = { first, after };
      trainer.dispose();
      for (const a of agents) a.model.dispose();
      critic.model.dispose();
    }
    // Zero-initialised feature columns: the same critic before any step...
    expect(runs.true.first).toEqual(runs.false.first);
    // ...and another one after it.
    expect(runs.true.after).not.toEqual(runs.false.after);
  });

  it('CoLLM-CC with features resumes exactly from a save taken with transitions in the buffer', async () => {
    const cfg = { ...RUN, critic_global_features: true };
    const refAgents = await loadAgents(agentDirs);
    const refCritic = await lmOf(criticDirs[2], 'cc');
    const ref = new CoLLMCCTrainer<RelayTask, RelayState>({ agents: refAgents, critic: refCritic, env, trainTasks: tasks, config: cfg });
    await ref.train({ maxItems: 4 });

    const firstAgents = await loadAgents(agentDirs);
    const firstCritic = await lmOf(criticDirs[2], 'cc');
    const first = new CoLLMCCTrainer<RelayTask, RelayState>({ agents: firstAgents, critic: firstCritic, env, trainTasks: tasks, config: cfg });
    await first.train({ maxItems: 2 });
    expect(first.bufferedTransitions).toBe(1);
    const out = join(dir, 'cc-saved');
    await first.save(out);
    const state = structuredClone(first.exportState());
    expect(state.extra.buffer[0].joint?.criticFeatures).toHaveLength(4);
    expect(JSON.parse(readFileSync(join(out, 'critic', HEAD_CONFIG_FILE), 'utf8'))).toMatchObject({ feature_size: 4 });

    const resumedAgents = await loadAgents([join(out, 'agent_0'), join(out, 'agent_1')]);
    const resumedCritic = await lmOf(join(out, 'critic'), 'cc');
    const resumed = new CoLLMCCTrainer<RelayTask, RelayState>({
      agents: resumedAgents,
      critic: resumedCritic,
      criticHead: await loadCriticHead(join(out, 'critic'), rngFor(0, 'unused')),
      env,
      trainTasks: tasks,
      config: cfg,
    });
    resumed.importState(state);
    await resumed.train({ maxItems: 2 });
    expect(resumed.lastUpdateMetrics).toEqual(ref.lastUpdateMetrics);
    expect(weights(resumedAgents.map((a) => a.model))).toEqual(weights(refAgents.map((a) => a.model)));
    expect(weights([resumed.critic.head])).toEqual(weights([ref.critic.head]));

    // The same snapshot into a featureless trainer, and a featureless snapshot into this one: refused.
    const plainHead = await loadCriticHead(join(out, 'critic'), rngFor(0, 'unused'));
    expect(() => new CoLLMCCTrainer({ agents: resumedAgents, critic: resumedCritic, criticHead: plainHead, env, trainTasks: tasks, config: RUN })).toThrow(
      /CoLLM-CC: the value head of critic 0 reads 4 global features, but critic_global_features is off/,
    );
    const plain = new CoLLMCCTrainer<RelayTask, RelayState>({ agents: resumedAgents, critic: resumedCritic, env, trainTasks: tasks, config: RUN });
    await plain.train({ maxItems: 2 });
    expect(plain.bufferedTransitions).toBe(1);
    const fresh = new CoLLMCCTrainer<RelayTask, RelayState>({ agents: resumedAgents, critic: resumedCritic, env, trainTasks: tasks, config: cfg });
    expect(() => fresh.importState(structuredClone(plain.exportState()))).toThrow(/importState: a buffered transition \(episode \d+, turn \d+\) holds no global features for critic 0, but the heads read 4/);

    for (const t of [ref, first, resumed, plain, fresh]) t.dispose();
    plainHead.dispose();
    for (const a of [...refAgents, ...firstAgents, ...resumedAgents]) a.model.dispose();
    for (const c of [refCritic, firstCritic, resumedCritic]) c.model.dispose();
  });

  it('a checkpoint head with another feature size than the env declares is refused by name', async () => {
    const agents = await loadAgents(agentDirs);
    const critic = await lmOf(criticDirs[2], 'cc');
    const three: CriticHead = createCriticHead(critic.model.hiddenSize, { type: 'linear' }, rngFor(0, 'init'), 3);
    expect(() => new CoLLMCCTrainer({ agents, critic, criticHead: three, env, trainTasks: tasks, config: { ...RUN, critic_global_features: true } })).toThrow(
      /CoLLM-CC: the value head of critic 0 reads 3 global features, but env 'hidden-cue-relay-sparse-2' declares 4 \(critic_global_features: true\)/,
    );
    const plain = createCriticHead(critic.model.hiddenSize, { type: 'linear' }, rngFor(0, 'init'));
    expect(() => new CoLLMCCTrainer({ agents, critic, criticHead: plain, env, trainTasks: tasks, config: { ...RUN, critic_global_features: true } })).toThrow(/reads 0 global features, but env .* declares 4/);
    // An env without numeric m_t: refused by name.
    expect(() => new CoLLMCCTrainer({ agents, critic, env: new HiddenCueEnv({ numTurns: 2 }), trainTasks: hiddenCueTasks(1), config: { ...RUN, critic_global_features: true } })).toThrow(
      /CoLLM-CC: critic_global_features is true, but env 'hidden-cue-sparse-2' provides no globalFeatures/,
    );
    expect(() => new CoLLMDCTrainer({ agents, env: new HiddenCueEnv({ numTurns: 2 }), trainTasks: hiddenCueTasks(1), config: { ...RUN, use_separate_critic: false, critic_global_features: true } })).toThrow(
      /CoLLM-DC: critic_global_features is true, but env 'hidden-cue-sparse-2' provides no globalFeatures/,
    );
    for (const h of [three, plain]) h.dispose();
    for (const a of agents) a.model.dispose();
    critic.model.dispose();
  });

  for (const separate of [true, false]) {
    it(`CoLLM-DC (${separate ? 'a critic LM per agent' : 'heads on the actors'}) with features: per-agent m_t, values part from the text critics', exact resume`, async () => {
      const cfg = { ...RUN, use_separate_critic: separate, critic_global_features: true };
      const build = async (agentFrom: readonly string[], criticFrom: readonly string[] | null, heads?: readonly string[], config: Record<string, unknown> = cfg) => {
        const agents = await loadAgents(agentFrom);
        const critics = criticFrom ? await Promise.all(criticFrom.map((d, i) => lmOf(d, `c${i}`))) : [];
        const criticHeads = heads ? await Promise.all(heads.map((d) => loadCriticHead(d, rngFor(0, 'unused')))) : undefined;
        const trainer = new CoLLMDCTrainer<RelayTask, RelayState>({
          agents,
          ...(separate ? { critics } : {}),
          ...(criticHeads ? { criticHeads } : {}),
          env,
          trainTasks: tasks,
          config,
        });
        const dispose = () => {
          trainer.dispose();
          for (const m of [...agents, ...critics]) m.model.dispose();
        };
        return { trainer, agents, dispose };
      };
      const critics = separate ? criticDirs.slice(0, 2) : null;

      const plain = await build(agentDirs, critics, undefined, { ...RUN, use_separate_critic: separate });
      await plain.trainer.train({ maxItems: 3 });
      const plainAfter = (await plain.trainer.rollout(tasks[1])).flatMap((t) => t.agents.map((a) => a.value));
      plain.dispose();

      const ref = await build(agentDirs, critics);
      const trs = await ref.trainer.rollout(tasks[0]);
      for (const a of trs[0].agents) expect(a.criticFeatures).toEqual(relayFeatures({ turn: 0, scores: [], hits: 0, agreed: null }, 2));
      expect(trs[0].agents[1].nextCriticFeatures).toEqual(trs[1].agents[1].criticFeatures);
      expect(trs[0].joint).toBeNull();
      await ref.trainer.train({ maxItems: 3 });
      const refAfter = (await ref.trainer.rollout(tasks[1])).flatMap((t) => t.agents.map((a) => a.value));
      expect(refAfter).not.toEqual(plainAfter);
      ref.dispose();

      // Exact resume: 4 items straight vs 2, save (a transition waits in the buffer), rebuild, 2 more.
      const straight = await build(agentDirs, critics);
      await straight.trainer.train({ maxItems: 4 });
      const first = await build(agentDirs, critics);
      await first.trainer.train({ maxItems: 2 });
      expect(first.trainer.bufferedTransitions).toBe(1);
      const out = join(dir, `dc-saved-${separate}`);
      await first.trainer.save(out);
      const state = structuredClone(first.trainer.exportState());
      first.dispose();
      const layout = first.trainer.criticSet.layout(out);
      const again = await build([join(out, 'agent_0'), join(out, 'agent_1')], separate ? layout.critics : null, layout.heads);
      again.trainer.importState(state);
      await again.trainer.train({ maxItems: 2 });
      expect(again.trainer.lastUpdateMetrics).toEqual(straight.trainer.lastUpdateMetrics);
      expect(weights(again.agents.map((a) => a.model))).toEqual(weights(straight.agents.map((a) => a.model)));
      expect(weights(again.trainer.critics.map((c) => c.head))).toEqual(weights(straight.trainer.critics.map((c) => c.head)));
      straight.dispose();
      again.dispose();
    });
  }
});
