/**
 * MARLHF through `comlrl train`: a seeded run stopped part-way (phase 2) and resumed from its
 * checkpoint — the agents, the fitted reward model (`reward_model/`: LM, tokenizer, value head) and
 * the phase — ends with exactly the weights, optimizer state and metrics of a run that was never
 * stopped, without fitting the reward model again, and writes the plots every trainer writes.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { CRITIC_LAYOUT_WORDS } from '../src/critic/inputs.js';
import { createTinyModel } from '../src/model/tiny.js';
import { toyWords } from '../envs/toy/index.js';
import { cli, trainerRows, trainRun, useCliWorkspace } from './cli-helpers.js';
import { backendUnderTest } from './backend-under-test.js';

const ws = useCliWorkspace('marlhf-resume', { backend: backendUnderTest('wasm') });
let rewardModel: string;

// Runs after the workspace's beforeAll (registered first): the reward model goes in its root.
beforeAll(async () => {
  rewardModel = join(ws.root, 'rm');
  await createTinyModel({ dir: rewardModel, arch: 'qwen3', seed: 9, tokenizer: 'word', words: [...new Set([...toyWords, ...CRITIC_LAYOUT_WORDS])], hiddenSize: 32, numLayers: 1 });
});

/** A toy-task run: 5 items × 2 epochs after phase 1, a checkpoint every 2 items, a buffer of 3 node samples (part-full at the stop). */
function yaml(out: string): string {
  return stringify({
    model: { agents: ws.agents, critic_model: rewardModel, temperature: 1, top_p: 1, top_k: 0 },
    dataset: { task: 'toy-coord', train_split: '[:5]', eval_split: '[:4]' },
    marlhf: {
      num_generations: 3,
      max_new_tokens: 2,
      num_train_epochs: 2,
      agent_learning_rate: 0.01,
      logging_steps: 1,
      eval_interval: 2,
      eval_num_samples: 4,
      eval_batch_size: 4,
      rollout_buffer_size: 3,
      train_batch_size: 2,
      preference_num_candidates: 4,
      preference_pairs_per_sample: 3,
      reward_learning_rate: 0.01,
      reward_train_batch_size: 2,
      reward_num_train_epochs: 2,
    },
    output: { dir: out, save_steps: 2 },
    seed: 3,
  });
}

const train = (name: string, extra: string[] = []): Promise<string> => trainRun(ws.root, name, yaml, extra);

test('interrupted and resumed equals uninterrupted: agents, reward model, optimizer state, metrics', async () => {
  const straight = await train('straight');
  const stopped = await train('stopped', ['--stop-after', '4']);
  const ckpt = join(stopped, 'checkpoints', 'step-000004');
  const state = JSON.parse(await readFile(join(ckpt, 'trainer_state.json'), 'utf8')) as { trainer: string; extra: { marlhf: { phase: string } } };
  expect(state.trainer).toBe('marlhf');
  expect(state.extra.marlhf.phase).toBe('policy');
  for (const f of ['config.json', 'model.safetensors', 'value_head.safetensors', 'value_head.json']) expect(existsSync(join(ckpt, 'reward_model', f)), f).toBe(true);
  const r = await cli(['train', '--resume', stopped]);
  expect(r.code, r.err).toBe(0);
  expect(r.err).toMatch(/resuming .*step-000004 at step 4\/10/);
  for (const f of ['agent_0/model.safetensors', 'agent_1/model.safetensors', 'reward_model/model.safetensors', 'reward_model/value_head.safetensors']) {
    expect((await readFile(join(stopped, 'final', f))).equals(await readFile(join(straight, 'final', f))), f).toBe(true);
  }
  const optA = await readFile(join(straight, 'checkpoints', 'step-000008', 'optimizer.safetensors'));
  const optB = await readFile(join(stopped, 'checkpoints', 'step-000008', 'optimizer.safetensors'));
  expect(optB.equals(optA)).toBe(true);
  const rows = trainerRows(stopped);
  expect(rows).toEqual(trainerRows(straight));
  // The reward model was fitted once (phase 1 is not repeated on resume).
  expect(rows.filter((m) => 'reward_model/num_pairs' in m)).toHaveLength(1);
  for (const plot of ['rewards.png', 'losses.png']) await expect(readFile(join(straight, plot))).resolves.toBeInstanceOf(Buffer);
});
