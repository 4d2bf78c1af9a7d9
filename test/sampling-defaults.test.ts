/**
 * `top_k: null` means what it means in CoMLRL: CoMLRL leaves `top_k` out of `generate()`, and
 * transformers then uses the checkpoint's generation_config.json `top_k`, else its own default.
 * That default is 50: transformers 5.x `GenerationConfig._get_default_generation_params()` returns
 * `temperature: 1.0, top_k: 50, top_p: 1.0`, and `GenerationMixin._prepare_generation_config`
 * fills what the call leaves unset first from the model's generation_config, then from those
 * defaults; its TopKLogitsWarper is skipped for `top_k` None or 0. The expected 3 below is the
 * value the test writes into generation_config.json; 50 is that documented default.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { ToyCoordEnv, toyTrainTasks } from '../envs/index.js';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { loadAgent } from '../src/decpomdp/load-agent.js';
import { readMetrics } from '../src/logging/metrics.js';
import { createTinyModel } from '../src/model/tiny.js';
import { parseGenerationSampling, resolveSampling } from '../src/sampling/defaults.js';
import { createRng } from '../src/util/rng.js';
import { agentSampling, generateGroups, type GenerationSettings } from '../trainers/core/generation.js';
import { MAGRPOTrainer } from '../trainers/magrpo/trainer.js';
import { cli, tinyModels } from './cli-helpers.js';

const TRANSFORMERS_TOP_K = 50;
const CHECKPOINT_TOP_K = 3;

describe('resolveSampling: unset values as transformers fills them', () => {
  const file = '/m/generation_config.json';
  test('top_k null takes the checkpoint value, else 50; 0 is off; a number wins', () => {
    const ckpt = parseGenerationSampling({ top_k: CHECKPOINT_TOP_K, do_sample: true }, file);
    expect(resolveSampling({ topK: null }, ckpt)).toMatchObject({ topK: CHECKPOINT_TOP_K, sources: { topK: 'checkpoint' } });
    expect(resolveSampling({ topK: null }, null)).toMatchObject({ topK: TRANSFORMERS_TOP_K, sources: { topK: 'transformers' } });
    expect(resolveSampling({}, parseGenerationSampling({ top_k: null }, file))).toMatchObject({ topK: TRANSFORMERS_TOP_K, sources: { topK: 'transformers' } });
    expect(resolveSampling({ topK: 0 }, ckpt)).toMatchObject({ topK: 0, sources: { topK: 'config' } });
    expect(resolveSampling({ topK: 7 }, ckpt)).toMatchObject({ topK: 7, sources: { topK: 'config' } });
    // A checkpoint may turn top-k off itself (transformers skips the warper for 0).
    expect(resolveSampling({ topK: null }, parseGenerationSampling({ top_k: 0 }, file)).topK).toBe(0);
  });

  test('unset temperature and top_p: the checkpoint value, else 1.0 and 1.0', () => {
    const ckpt = parseGenerationSampling({ temperature: 0.7, top_p: 0.8 }, file);
    expect(resolveSampling({}, ckpt)).toMatchObject({ temperature: 0.7, topP: 0.8, topK: TRANSFORMERS_TOP_K });
    expect(resolveSampling({}, null)).toMatchObject({ temperature: 1, topP: 1, topK: TRANSFORMERS_TOP_K });
    expect(resolveSampling({ temperature: 0.6, topP: 0.6 }, ckpt)).toMatchObject({ temperature: 0.6, topP: 0.6, sources: { temperature: 'config', topP: 'config' } });
  });

  test('a checkpoint value that would be used and is unusable names the file; an overridden one does not matter', () => {
    const bad = parseGenerationSampling({ top_k: -1, temperature: 0 }, file);
    expect(() => resolveSampling({ topK: null, temperature: 1 }, bad)).toThrow(`${file}: top_k -1 is not an integer >= 0 (0 = off); set top_k in the config to override it`);
    expect(() => resolveSampling({ topK: 5 }, bad)).toThrow(`${file}: temperature 0 is not a number > 0`);
    expect(resolveSampling({ topK: 5, temperature: 1 }, bad).topK).toBe(5);
    expect(() => parseGenerationSampling({ top_k: 'fifty' }, file)).toThrow(`${file}: field 'top_k' must be a number or null`);
  });
});

/** log p of every token after `prompt` under the model (no filter): one length-1 completion per token. */
async function nextTokenLogProbs(agent: Agent, prompt: number[]): Promise<number[]> {
  const V = agent.model.vocabSize;
  const rows = await agent.model.tokenLogProbs(
    Array.from({ length: V }, () => prompt),
    Array.from({ length: V }, (_, v) => [v]),
  );
  return rows.map((r) => r[0]);
}

/** The k tokens of highest log p. */
function topTokens(logp: readonly number[], k: number): Set<number> {
  return new Set(logp.map((lp, v) => [lp, v] as const).sort((a, b) => b[0] - a[0]).slice(0, k).map(([, v]) => v));
}

describe('agents sample with their checkpoint top_k when the config leaves it null', () => {
  let root: string;
  let withFile: Agent;
  let without: Agent;
  const DRAWS = 300;

  beforeAll(async () => {
    setBackendLogger(null);
    await initBackend('wasm');
    root = await mkdtemp(join(tmpdir(), 'comlrl-sampling-defaults-'));
    // BPE tokenizer: 516 tokens, so top-50 is a real filter; N(0, 0.02) weights keep the
    // next-token distribution close to uniform, so unfiltered draws leave any small set often.
    for (const [name, seed] of [['with', 1], ['without', 2]] as const) {
      await createTinyModel({ dir: join(root, name), arch: 'qwen3', seed, tokenizer: 'bpe', hiddenSize: 32, numLayers: 1 });
    }
    await writeFile(join(root, 'with', 'generation_config.json'), JSON.stringify({ do_sample: true, top_k: CHECKPOINT_TOP_K, eos_token_id: [] }));
    withFile = await loadAgent(join(root, 'with'), { name: 'with' });
    without = await loadAgent(join(root, 'without'), { name: 'without' });
  });
  afterAll(async () => {
    withFile?.model.dispose();
    without?.model.dispose();
    await rm(root, { recursive: true, force: true });
  });

  const settings = (topK: number | null): GenerationSettings => ({ maxNewTokens: 1, temperature: 1, topP: 1, topK });

  async function draws(agent: Agent, topK: number | null, prompt: number[]): Promise<{ tokens: number[]; logProbs: number[] }> {
    const [group] = await generateGroups(agent, [prompt], DRAWS, settings(topK), createRng(11));
    return { tokens: group.ids.map((ids) => ids[0]), logProbs: group.tokenLogProbs.map((lps) => lps[0]) };
  }

  test('the resolved filter: 3 from generation_config.json, 50 without one, 0 when the config says 0', () => {
    expect(withFile.model.vocabSize).toBeGreaterThan(TRANSFORMERS_TOP_K * 5);
    expect(agentSampling(withFile, settings(null))).toMatchObject({ topK: CHECKPOINT_TOP_K, sources: { topK: 'checkpoint' } });
    expect(agentSampling(without, settings(null))).toMatchObject({ topK: TRANSFORMERS_TOP_K, sources: { topK: 'transformers' } });
    expect(agentSampling(withFile, settings(0)).topK).toBe(0);
    expect(agentSampling(without, settings(0)).topK).toBe(0);
  });

  test('top_k null on the checkpoint with top_k 3: only its 3 most likely tokens, at their renormalised probabilities', async () => {
    const prompt = withFile.tokenizer.encode('hello there');
    const logp = await nextTokenLogProbs(withFile, prompt);
    const top3 = topTokens(logp, CHECKPOINT_TOP_K);
    const { tokens, logProbs } = await draws(withFile, null, prompt);
    expect(new Set(tokens)).toEqual(top3);
    const norm = Math.log([...top3].reduce((s, v) => s + Math.exp(logp[v]), 0));
    tokens.forEach((t, i) => expect(logProbs[i]).toBeCloseTo(logp[t] - norm, 4));
    // top_k 0 on the same checkpoint: no filter, so tokens outside those 3 are drawn.
    const off = await draws(withFile, 0, prompt);
    expect(off.tokens.filter((t) => !top3.has(t)).length).toBeGreaterThan(DRAWS / 2);
  });

  test("top_k null on a checkpoint without generation_config.json: transformers' top 50", async () => {
    const prompt = without.tokenizer.encode('hello there');
    const top50 = topTokens(await nextTokenLogProbs(without, prompt), TRANSFORMERS_TOP_K);
    const { tokens } = await draws(without, null, prompt);
    expect(tokens.every((t) => top50.has(t))).toBe(true);
    const off = await draws(without, 0, prompt);
    expect(off.tokens.filter((t) => !top50.has(t)).length).toBeGreaterThan(DRAWS / 2);
  });

  test("an unusable generation_config.json value names the agent and the file; a config value overrides it", async () => {
    const dir = join(root, 'bad');
    const file = join(dir, 'generation_config.json');
    await createTinyModel({ dir, arch: 'qwen3', seed: 3, tokenizer: 'word', words: ['a', 'b'], hiddenSize: 32, numLayers: 1 });
    await writeFile(file, JSON.stringify({ top_k: -1 }));
    const agent = await loadAgent(dir, { name: 'bad' });
    try {
      expect(() => agentSampling(agent, settings(null))).toThrow(`agent 'bad': ${file}: top_k -1 is not an integer >= 0 (0 = off); set top_k in the config to override it`);
      expect(agentSampling(agent, settings(4)).topK).toBe(4);
    } finally {
      agent.model.dispose();
    }
    await writeFile(file, JSON.stringify({ top_k: 'fifty' }));
    await expect(loadAgent(dir)).rejects.toThrow(`${file}: field 'top_k' must be a number or null`);
  });

  test('a trainer resolves each agent on its own checkpoint and reports it', () => {
    const make = (top_k: number | null) =>
      new MAGRPOTrainer({
        agents: [withFile, without],
        env: new ToyCoordEnv(),
        trainTasks: toyTrainTasks,
        config: { num_turns: 1, num_generations: 2, max_new_tokens: 1, temperature: 0.6, top_p: 0.6, top_k, eval_interval: 0 },
      });
    expect(make(null).sampling.map((s) => s.topK)).toEqual([CHECKPOINT_TOP_K, TRANSFORMERS_TOP_K]);
    expect(make(0).sampling.map((s) => s.topK)).toEqual([0, 0]);
    // MAGRPO's default is CoMLRL's 50, whatever the checkpoint says.
    expect(make(50).sampling.map((s) => [s.temperature, s.topP, s.topK])).toEqual([[0.6, 0.6, 50], [0.6, 0.6, 50]]);
  });
});

describe('comlrl train with a CoMLRL config saying top_k: null', () => {
  let root: string;
  beforeAll(async () => {
    setBackendLogger(null);
    await initBackend('wasm');
    root = await mkdtemp(join(tmpdir(), 'comlrl-sampling-cli-'));
  });
  afterAll(async () => rm(root, { recursive: true, force: true }));

  test('prints and records what each agent samples with', async () => {
    const [a0, a1] = await tinyModels(root, ['a0', 'a1']);
    await writeFile(join(a0, 'generation_config.json'), JSON.stringify({ top_k: CHECKPOINT_TOP_K, temperature: 0.3 }));
    const out = join(root, 'run');
    const config = join(root, 'run.yaml');
    await writeFile(
      config,
      stringify({
        model: { agents: [a0, a1], temperature: 0.6, top_p: 0.6, top_k: null },
        dataset: { task: 'toy-coord', train_split: '[:2]', eval_split: '[:2]' },
        magrpo: { num_turns: 1, num_generations: 2, max_new_tokens: 1, num_train_epochs: 1, eval_interval: 0, rollout_buffer_size: 1 },
        output: { dir: out, plots: false, eval_before_after: false },
        seed: 1,
      }),
    );
    const r = await cli(['train', '--config', config, '--stop-after', '1']);
    expect(r.code, r.err).toBe(0);
    // temperature and top_p come from the config (CoMLRL passes them); only top_k was left unset.
    expect(r.err).toContain('[comlrl] agent 0 samples with temperature 0.6 · top_p 0.6 · top_k 3 (generation_config.json)');
    expect(r.err).toContain("[comlrl] agent 1 samples with temperature 0.6 · top_p 0.6 · top_k 50 (transformers' default)");
    const header = readMetrics(join(out, 'metrics.jsonl')).find((row) => 'run/backend' in row);
    expect(header).toMatchObject({
      'run/sampling/agent_0/temperature': 0.6,
      'run/sampling/agent_0/top_p': 0.6,
      'run/sampling/agent_0/top_k': CHECKPOINT_TOP_K,
      'run/sampling/agent_1/top_k': TRANSFORMERS_TOP_K,
    });
  });
});
