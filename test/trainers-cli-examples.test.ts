/**
 * The trainers added after CoMLRL 1.3.6 run from their example configs through `comlrl train`:
 * each example config (examples/configs/<task>-<trainer>.yaml) on a hidden-256, 4-layer tiny model
 * with `--stop-after 2` — the model, data and output paths and a short generation length set with
 * `--set`, everything else as the file has it — logs MAGRPO's metrics and writes a checkpoint whose
 * trainer state carries the trainer's own name. Their presets (`reinforcePreset`) are those files'
 * trainer configs.
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { setBackendLogger } from '../src/backend/init.js';
import { readConfigFile } from '../src/config/load.js';
import { parseRunConfig } from '../src/config/schema.js';
import { readMetrics } from '../src/logging/metrics.js';
import { createTinyModel } from '../src/model/tiny.js';
import { loadConfig } from '../cli/schemas.js';
import { REINFORCE_PRESET_NAMES, reinforcePreset, reinforcePresetConfigFile } from '../trainers/presets.js';
import { cli, tempDir } from './cli-helpers.js';

const EXAMPLES = join(import.meta.dirname, '..', 'examples', 'configs');

/** Each new trainer's example config, its section and the agent models it trains. */
const RUNS: readonly { file: string; trainer: string; section: string; models: number; extra?: readonly string[] }[] = [
  { file: 'tldr-mareinforce.yaml', trainer: 'mareinforce', section: 'mareinforce', models: 2 },
  { file: 'tldr-maremax.yaml', trainer: 'maremax', section: 'maremax', models: 2 },
  { file: 'tldr-marloo.yaml', trainer: 'marloo', section: 'marloo', models: 2 },
  { file: 'tldr-centralized-magrpo.yaml', trainer: 'centralized-magrpo', section: 'centralized_magrpo', models: 1 },
  // TLDR pays only completions of 8 words or more: 8 tokens would tie every candidate at 0 (no pair, no update).
  // top_k 0: the random tiny model's top 50 (what `top_k: null` means) rarely writes 8 words, so no pair forms.
  { file: 'tldr-madpo.yaml', trainer: 'madpo', section: 'madpo', models: 2, extra: ['--set', 'madpo.max_new_tokens=40', '--set', 'model.top_k=0'] },
  // MARLHF: the same for its preference pairs (no pair is an error); 4 candidates and 2 pairs per post keep phase 1 short.
  { file: 'tldr-marlhf.yaml', trainer: 'marlhf', section: 'marlhf', models: 2, extra: ['--set', 'marlhf.max_new_tokens=40', '--set', 'marlhf.preference_num_candidates=4', '--set', 'marlhf.preference_pairs_per_sample=2'] },
];

/** The REINFORCE family: MAGRPO's config with another baseline. */
const REINFORCE_FAMILY = new Set(['mareinforce', 'maremax', 'marloo']);

let root: string;
let cleanup: () => Promise<void>;
let model: string;
let data: string;

beforeAll(async () => {
  setBackendLogger(null);
  ({ dir: root, cleanup } = await tempDir('new-trainers-cli'));
  model = join(root, 'tiny-256x4');
  await createTinyModel({ dir: model, arch: 'qwen3', seed: 5, tokenizer: 'bpe', hiddenSize: 256, numLayers: 4 });
  // HouseBuild's centralized joint prompt (~4,300 tokens) needs more than the writer's 4,096 positions
  // (prompts longer than the context are refused); Qwen3's own checkpoints have 40,960.
  const configFile = join(model, 'config.json');
  await writeFile(configFile, JSON.stringify({ ...JSON.parse(await readFile(configFile, 'utf8')), max_position_embeddings: 40960 }, null, 2));
  data = join(root, 'tldr');
  await mkdir(data);
  const rows = (split: string) => Array.from({ length: 4 }, (_, i) => JSON.stringify({ prompt: `SUBREDDIT: r/${split} TITLE: post ${i} POST: some words about item ${i}` })).join('\n');
  await writeFile(join(data, 'train.jsonl'), rows('train'));
  await writeFile(join(data, 'test.jsonl'), rows('test'));
});
afterAll(async () => cleanup());

test.each(RUNS.filter((r) => REINFORCE_FAMILY.has(r.trainer)))('$file validates with the registered schema and keeps tldr-magrpo.yaml’s numbers', ({ file, trainer }) => {
  const config = parseRunConfig(readConfigFile(join(EXAMPLES, file)), undefined, file);
  const magrpo = parseRunConfig(readConfigFile(join(EXAMPLES, 'tldr-magrpo.yaml')), undefined, 'tldr-magrpo.yaml');
  expect(config.trainer).toBe(trainer);
  expect(config.model.agent_model).toMatch(/^\/path\/to\//);
  // The same run as the MAGRPO paper's TLDR config, with the trainer's own baseline and no z-score.
  const tc: Readonly<Record<string, unknown>> = config.trainerConfig;
  const magrpoTc: Readonly<Record<string, unknown>> = magrpo.trainerConfig;
  const { advantage_mode: mode, advantage_normalization: norm, ...rest } = tc;
  const { advantage_mode: _m, advantage_normalization: _n, ...magrpoRest } = magrpoTc;
  expect(rest).toEqual(magrpoRest);
  expect(norm).toBe(false);
  expect(mode).toBe({ mareinforce: 'raw', maremax: 'max', marloo: 'rloo' }[trainer]);
  expect(config.dataset).toEqual(magrpo.dataset);
});

describe.each(RUNS)('$file', ({ file, trainer, section, models, extra = [] }) => {
  test('runs `--stop-after 2` on a hidden-256, 4-layer tiny model', async () => {
    const out = join(root, trainer);
    const r = await cli([
      'train',
      '--config',
      join(EXAMPLES, file),
      '--set',
      `model.agent_model=${model}`,
      '--set',
      `dataset.path=${data}`,
      '--set',
      'dataset.train_split=train[:4]',
      '--set',
      'dataset.eval_split=test[:2]',
      '--set',
      `output.dir=${out}`,
      '--set',
      `${section}.max_new_tokens=8`,
      '--set',
      `${section}.eval_num_samples=2`,
      '--set',
      `${section}.logging_steps=1`,
      ...extra,
      '--stop-after',
      '2',
    ]);
    expect(r.code, r.err).toBe(0);
    const ckpt = join(out, 'checkpoints', 'step-000002');
    expect(existsSync(join(ckpt, `agent_${models - 1}`, 'model.safetensors'))).toBe(true);
    expect(existsSync(join(ckpt, `agent_${models}`))).toBe(false);
    const state = JSON.parse(await readFile(join(ckpt, 'trainer_state.json'), 'utf8')) as { trainer: string };
    expect(state.trainer).toBe(trainer);
    const rows = readMetrics(join(out, 'metrics.jsonl'));
    expect(rows.some((m) => 'turn_1/reward_mean' in m && 'agent_0/loss' in m)).toBe(true);
    expect(rows.some((m) => 'eval/turn_1/mean_reward' in m)).toBe(true);
    // The task's own eval metric, which reads the roles' texts (split by the adapter when centralized).
    expect(rows.some((m) => 'eval/tldr/score' in m)).toBe(true);
  });

  // The hidden-256 model's weights and AdamW moments fit 24 MiB, one generation row does not (40 MiB trains).
  test('memory planning: a budget too small for one generation is refused before training, naming what to reduce', async () => {
    const out = join(root, `${trainer}-tiny-budget`);
    const r = await cli([
      'train',
      '--config',
      join(EXAMPLES, file),
      '--set',
      `model.agent_model=${model}`,
      '--set',
      `dataset.path=${data}`,
      '--set',
      'dataset.train_split=train[:4]',
      '--set',
      'dataset.eval_split=test[:2]',
      '--set',
      `output.dir=${out}`,
      '--set',
      `${section}.max_new_tokens=8`,
      '--set',
      `${section}.eval_interval=0`,
      '--set',
      'output.eval_before_after=false',
      '--set',
      'memory.budget=24MiB',
      '--stop-after',
      '1',
    ]);
    expect(r.code).toBe(1);
    // MADPO loads its frozen reference (a second copy of the weights under full fine-tuning) before it generates,
    // MARLHF its reward model's LM (here a third copy of the tiny model).
    const what = { madpo: 'reference model: not enough memory for loading the model', marlhf: 'critic 0: not enough memory for loading the model' }[trainer] ?? 'not enough memory for generation';
    expect(r.err).toMatch(new RegExp(`${what} .*needs about [\\d.]+ MiB but only [\\d.]+ MiB of the 24 MiB budget is free.*Reduce one of: max_new_tokens`, 's'));
    expect(existsSync(join(out, 'checkpoints'))).toBe(false);
  });
});

test('the centralized example config: one policy for the two roles, and `comlrl eval` plays its checkpoint the same way', async () => {
  const config = parseRunConfig(readConfigFile(join(EXAMPLES, 'tldr-centralized-magrpo.yaml')), undefined, 'tldr-centralized-magrpo.yaml');
  const magrpo = parseRunConfig(readConfigFile(join(EXAMPLES, 'tldr-magrpo.yaml')), undefined, 'tldr-magrpo.yaml');
  expect(config.trainer).toBe('centralized-magrpo');
  expect(config.trainerConfig).toMatchObject({ num_agents: 2, num_turns: 1, collaboration_mode: 'centralized', max_new_tokens: 512 });
  expect(config.dataset).toEqual(magrpo.dataset);
  const out = join(root, 'centralized-magrpo');
  const r = await cli([
    'eval',
    '--config',
    join(EXAMPLES, 'tldr-centralized-magrpo.yaml'),
    '--set',
    `model.agent_model=${model}`,
    '--set',
    `dataset.path=${data}`,
    '--set',
    'dataset.eval_split=test[:2]',
    '--set',
    'centralized_magrpo.max_new_tokens=8',
    '--checkpoint',
    join(out, 'checkpoints', 'step-000002'),
  ]);
  expect(r.code, r.err).toBe(0);
  expect(r.out).toMatch(/tldr\/score/);
  expect(r.out).toMatch(/eval_items\s+2/);
});

/**
 * CentralizedMAGRPO's other example configs: CoopHE (the adapter's <auxiliary>/<main> snippets,
 * scored in the sandbox: python3 on PATH) and HouseBuild (CoMLRL's <agent_i> sections), each run
 * `--stop-after 2` on the hidden-256, 4-layer tiny model with the task's own eval metric logged.
 */
describe.each([
  { file: 'coophe-centralized-magrpo.yaml', metric: 'eval/coophe/pass_rate', data: true },
  { file: 'housebuild-centralized-magrpo.yaml', metric: 'eval/housebuild/iou', data: false },
])('$file', ({ file, metric, data: needsData }) => {
  test('validates: one policy for the two roles, single-turn', () => {
    const config = parseRunConfig(readConfigFile(join(EXAMPLES, file)), undefined, file);
    expect(config.trainer).toBe('centralized-magrpo');
    expect(config.trainerConfig).toMatchObject({ num_agents: 2, num_turns: 1, collaboration_mode: 'centralized' });
    expect(config.model.agent_model).toMatch(/^\/path\/to\//);
  });

  test('runs `--stop-after 2` on a hidden-256, 4-layer tiny model', async () => {
    const out = join(root, file.replace(/\.yaml$/, ''));
    const che = join(root, 'che.json');
    if (needsData) {
      const problem = (i: number) => ({ task_id: `Toy/${i}`, prompt: `def add${i}(a, b):\n    """Return a + b + ${i}."""\n`, test: `def check(candidate):\n    assert candidate(1, 2) == ${3 + i}\n`, entry_point: `add${i}` });
      await writeFile(che, JSON.stringify([0, 1, 2, 3].map(problem)));
    }
    const r = await cli([
      'train',
      '--config',
      join(EXAMPLES, file),
      '--set',
      `model.agent_model=${model}`,
      // CoopHE: an update every item (its file buffers 4). HouseBuild: one eval item (~2000-token joint prompts), evaluated once before training.
      ...(needsData
        ? ['--set', `dataset.path=${che}`, '--set', 'dataset.train_split=train[:2]', '--set', 'dataset.eval_split=train[2:]', '--set', 'centralized_magrpo.rollout_buffer_size=1', '--set', 'centralized_magrpo.train_batch_size=1']
        : ['--set', 'dataset.train_split=[:2]', '--set', 'dataset.eval_split=[8:9]', '--set', 'centralized_magrpo.eval_interval=0']),
      '--set',
      `output.dir=${out}`,
      '--set',
      'centralized_magrpo.max_new_tokens=8',
      '--set',
      'centralized_magrpo.eval_num_samples=2',
      '--set',
      'centralized_magrpo.logging_steps=1',
      '--stop-after',
      '2',
    ]);
    expect(r.code, r.err).toBe(0);
    const ckpt = join(out, 'checkpoints', 'step-000002');
    expect(existsSync(join(ckpt, 'agent_0', 'model.safetensors'))).toBe(true);
    expect(existsSync(join(ckpt, 'agent_1'))).toBe(false);
    const state = JSON.parse(await readFile(join(ckpt, 'trainer_state.json'), 'utf8')) as { trainer: string };
    expect(state.trainer).toBe('centralized-magrpo');
    const rows = readMetrics(join(out, 'metrics.jsonl'));
    expect(rows.some((m) => 'turn_1/reward_mean' in m && 'agent_0/loss' in m)).toBe(true);
    // The task's own eval metric, read from the roles' responses the adapter split off.
    expect(rows.some((m) => metric in m)).toBe(true);
  }, 600_000);
});

test('the MADPO example config: CoMLRL\'s preference defaults, and its run logs the DPO metrics', () => {
  const config = parseRunConfig(readConfigFile(join(EXAMPLES, 'tldr-madpo.yaml')), undefined, 'tldr-madpo.yaml');
  const magrpo = parseRunConfig(readConfigFile(join(EXAMPLES, 'tldr-magrpo.yaml')), undefined, 'tldr-magrpo.yaml');
  expect(config.trainer).toBe('madpo');
  expect(config.trainerConfig).toMatchObject({ num_turns: 1, num_generations: 4, preference_pairs_per_sample: 16, pair_selection: 'reward_gap', dpo_beta: 0.1 });
  expect(config.dataset).toEqual(magrpo.dataset);
  // The `--stop-after 2` run above: TRL's and CoMLRL's DPO metrics next to MAGRPO's.
  const rows = readMetrics(join(root, 'madpo', 'metrics.jsonl'));
  expect(rows.some((m) => 'rewards/margins' in m && 'rewards/accuracies' in m && 'dpo/loss' in m)).toBe(true);
});

test('each REINFORCE preset is the trainer config the CLI builds from its example config', () => {
  expect(REINFORCE_PRESET_NAMES).toEqual(RUNS.map((r) => r.file.replace(/\.yaml$/, '')));
  for (const name of REINFORCE_PRESET_NAMES) {
    const p = reinforcePreset(name);
    const config = loadConfig(reinforcePresetConfigFile(name), []);
    expect(config.trainer, name).toBe(p.trainer);
    expect(p.config, name).toEqual(config.trainerConfig);
    expect(p.splits, name).toEqual({ train: config.dataset.train_split, eval: config.dataset.eval_split });
    expect(p.rewardProcessor.shift, name).toBe(config.rewardProcessor.shift);
  }
  expect(() => reinforcePreset('tldr-magrpo')).toThrow(/unknown REINFORCE preset 'tldr-magrpo'; known: tldr-mareinforce/);
});
