/**
 * MADPO's checkpoints and exact resume through `comlrl train`: a seeded run stopped part-way (with
 * pairs still buffered) and resumed ends with exactly the weights, optimizer state and metrics of a
 * run that was never stopped, and writes its plots. Full fine-tuning: the CLI loads each agent's
 * starting folder as its reference in both runs (never the checkpoint's weights).
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { stringify } from 'yaml';
import { cli, trainerRows, trainRun, useCliWorkspace } from './cli-helpers.js';
import { backendUnderTest } from './backend-under-test.js';

const ws = useCliWorkspace('madpo-resume', { backend: backendUnderTest('wasm') });

/**
 * The toy task, 5 items × 2 epochs, a checkpoint every 2 items, K = 6 one-word candidates (one of
 * them often says an answer: a reward gap), a buffer of 7 pairs (part-full at the stop).
 */
function yaml(out: string): string {
  return stringify({
    model: { agents: ws.agents, temperature: 1, top_p: 1, top_k: 0 },
    dataset: { task: 'toy-coord', train_split: '[:5]', eval_split: '[:4]' },
    madpo: {
      num_generations: 6,
      max_new_tokens: 1,
      num_train_epochs: 2,
      agent_learning_rate: 0.01,
      dpo_beta: 0.5,
      logging_steps: 1,
      eval_interval: 2,
      eval_num_samples: 4,
      eval_batch_size: 4,
      rollout_buffer_size: 7,
      train_batch_size: 2,
    },
    output: { dir: out, save_steps: 2 },
    seed: 3,
  });
}

const train = (name: string, extra: string[] = []): Promise<string> => trainRun(ws.root, name, yaml, extra);

test('madpo: interrupted and resumed equals uninterrupted (weights, optimizer state, metrics), with plots', async () => {
  const straight = await train('straight');
  const stopped = await train('stopped', ['--stop-after', '4']);
  const state = JSON.parse(await readFile(join(stopped, 'checkpoints', 'step-000004', 'trainer_state.json'), 'utf8')) as { trainer: string; extra: { buffer: unknown[] } };
  expect(state.trainer).toBe('madpo');
  expect(state.extra.buffer.length).toBeGreaterThan(0);
  const r = await cli(['train', '--resume', stopped]);
  expect(r.code, r.err).toBe(0);
  expect(r.err).toMatch(/resuming .*step-000004 at step 4\/10/);
  for (const f of ['agent_0/model.safetensors', 'agent_1/model.safetensors']) {
    expect((await readFile(join(stopped, 'final', f))).equals(await readFile(join(straight, 'final', f))), f).toBe(true);
  }
  const optA = await readFile(join(straight, 'checkpoints', 'step-000008', 'optimizer.safetensors'));
  const optB = await readFile(join(stopped, 'checkpoints', 'step-000008', 'optimizer.safetensors'));
  expect(optB.equals(optA)).toBe(true);
  const rows = trainerRows(straight);
  expect(trainerRows(stopped)).toEqual(rows);
  expect(rows.some((m) => 'rewards/margins' in m && 'agent_0/loss' in m && 'turn_1/reward_mean' in m)).toBe(true);
  expect(rows.some((m) => 'eval/turn_1/mean_reward' in m)).toBe(true);
  for (const plot of ['rewards.png', 'losses.png']) await expect(readFile(join(straight, plot))).resolves.toBeInstanceOf(Buffer);
});
