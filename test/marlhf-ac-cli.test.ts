/**
 * MARLHF with the actor-critic phase 2 through `comlrl train` (`rl_algorithm: maac`): the reward
 * model and the centralized critic load from `model.critic_model` as two LMs; a run stopped in
 * phase 2 (CoLLM's `update_order: agent` set through `actor_critic`) and resumed from its checkpoint (agents, `reward_model/`, `critic/`, phase) ends with
 * exactly the weights and metrics of a run that was never stopped, fitting the reward model once.
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

const ws = useCliWorkspace('marlhf-ac', { backend: backendUnderTest('wasm') });
let criticModel: string;

// Runs after the workspace's beforeAll (registered first): the critics' base goes in its root.
beforeAll(async () => {
  criticModel = join(ws.root, 'critic-base');
  await createTinyModel({ dir: criticModel, arch: 'qwen3', seed: 9, tokenizer: 'word', words: [...new Set([...toyWords, ...CRITIC_LAYOUT_WORDS])], hiddenSize: 32, numLayers: 1 });
});

/** A toy-task run: 4 items × 2 epochs after phase 1, a checkpoint every 3 items (mid epoch, a part-full buffer). */
function yaml(out: string): string {
  return stringify({
    model: { agents: ws.agents, critic_model: criticModel, temperature: 1, top_p: 1, top_k: 0 },
    dataset: { task: 'toy-coord', train_split: '[:4]', eval_split: '[:2]' },
    marlhf: {
      rl_algorithm: 'maac',
      num_generations: 3,
      max_new_tokens: 2,
      num_train_epochs: 2,
      agent_learning_rate: 0.01,
      critic_learning_rate: 0.01,
      logging_steps: 1,
      eval_interval: 3,
      eval_num_samples: 2,
      rollout_buffer_size: 4,
      preference_num_candidates: 4,
      preference_pairs_per_sample: 3,
      reward_learning_rate: 0.01,
      reward_train_batch_size: 2,
      // CoLLM's options without a MARLHFConfig field: CoMLRL's agent-by-agent update order.
      actor_critic: { update_order: 'agent' },
    },
    output: { dir: out, save_steps: 3 },
    seed: 3,
  });
}

const train = (name: string, extra: string[] = []): Promise<string> => trainRun(ws.root, name, yaml, extra);

test('maac: interrupted in phase 2 and resumed equals uninterrupted (agents, reward model, centralized critic, metrics)', async () => {
  const straight = await train('straight');
  const stopped = await train('stopped', ['--stop-after', '3']);
  const ckpt = join(stopped, 'checkpoints', 'step-000003');
  const state = JSON.parse(await readFile(join(ckpt, 'trainer_state.json'), 'utf8')) as { trainer: string; extra: { marlhf: { phase: string; rl_algorithm: string } } };
  expect(state.trainer).toBe('marlhf');
  expect(state.extra.marlhf).toEqual({ phase: 'policy', rl_algorithm: 'maac' });
  for (const d of ['reward_model', 'critic']) for (const f of ['model.safetensors', 'value_head.safetensors']) expect(existsSync(join(ckpt, d, f)), `${d}/${f}`).toBe(true);
  const r = await cli(['train', '--resume', stopped]);
  expect(r.code, r.err).toBe(0);
  expect(r.err).toMatch(/resuming .*step-000003 at step 3\/8/);
  for (const f of ['agent_0/model.safetensors', 'agent_1/model.safetensors', 'reward_model/model.safetensors', 'reward_model/value_head.safetensors', 'critic/model.safetensors', 'critic/value_head.safetensors']) {
    expect((await readFile(join(stopped, 'final', f))).equals(await readFile(join(straight, 'final', f))), f).toBe(true);
  }
  // The critic kept training after the checkpoint: its final weights differ from the checkpoint's.
  expect((await readFile(join(straight, 'final', 'critic', 'model.safetensors'))).equals(await readFile(join(ckpt, 'critic', 'model.safetensors')))).toBe(false);
  const rows = trainerRows(stopped);
  expect(rows).toEqual(trainerRows(straight));
  expect(rows.filter((m) => 'reward_model/num_pairs' in m)).toHaveLength(1);
  expect(rows.some((m) => 'critic/grad_norm' in m && 'agent_0/policy_loss' in m)).toBe(true);
  expect(rows.some((m) => 'eval/return_mean' in m)).toBe(true);
});
