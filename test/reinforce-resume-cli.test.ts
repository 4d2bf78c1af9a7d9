/**
 * Checkpoints and exact resume through `comlrl train` for the trainers added from CoMLRL 1.4 (one
 * of the REINFORCE family, MARLOO, and CentralizedMAGRPO, whose one joint policy is saved as
 * `agent_0/` alone): a seeded run stopped part-way and resumed ends with exactly the weights,
 * optimizer state and metrics of a run that was never stopped, and writes its plots.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { cli, trainerRows, trainRun, useCliWorkspace } from './cli-helpers.js';
import { backendUnderTest } from './backend-under-test.js';

const ws = useCliWorkspace('reinforce-resume', { backend: backendUnderTest('wasm') });

/** A toy-task run: 5 items × 2 epochs, a checkpoint every 2 items, a buffer of 3 node samples (part-full at the stop). */
function yaml(section: string, models: readonly string[], out: string): string {
  return stringify({
    model: { agents: models, temperature: 1, top_p: 1, top_k: 0 },
    dataset: { task: 'toy-coord', train_split: '[:5]', eval_split: '[:4]' },
    [section]: { num_generations: 3, max_new_tokens: 2, num_train_epochs: 2, agent_learning_rate: 0.01, logging_steps: 1, eval_interval: 2, eval_num_samples: 4, eval_batch_size: 4, rollout_buffer_size: 3, train_batch_size: 2, advantage_normalization: false },
    output: { dir: out, save_steps: 2 },
    seed: 3,
  });
}

describe.each([
  { name: 'marloo', section: 'marloo', models: () => ws.agents, files: ['agent_0/model.safetensors', 'agent_1/model.safetensors'] },
  { name: 'centralized-magrpo', section: 'centralized_magrpo', models: () => ws.agents.slice(0, 1), files: ['agent_0/model.safetensors'] },
])('$name: interrupted and resumed equals uninterrupted', ({ name, section, models, files }) => {
  test('the resumed run ends with bit-identical weights, optimizer state and metrics', async () => {
    const straight = await trainRun(ws.root, `${name}-straight`, (out) => yaml(section, models(), out));
    const stopped = await trainRun(ws.root, `${name}-stopped`, (out) => yaml(section, models(), out), ['--stop-after', '4']);
    const state = JSON.parse(await readFile(join(stopped, 'checkpoints', 'step-000004', 'trainer_state.json'), 'utf8')) as { trainer: string; extra: { buffers: unknown[][] } };
    expect(state.trainer).toBe(name);
    expect(state.extra.buffers.flat().length).toBeGreaterThan(0);
    const r = await cli(['train', '--resume', stopped]);
    expect(r.code, r.err).toBe(0);
    expect(r.err).toMatch(/resuming .*step-000004 at step 4\/10/);
    for (const f of files) expect((await readFile(join(stopped, 'final', f))).equals(await readFile(join(straight, 'final', f))), f).toBe(true);
    await expect(readFile(join(straight, 'final', `agent_${files.length}`, 'model.safetensors'))).rejects.toThrow();
    const optA = await readFile(join(straight, 'checkpoints', 'step-000008', 'optimizer.safetensors'));
    const optB = await readFile(join(stopped, 'checkpoints', 'step-000008', 'optimizer.safetensors'));
    expect(optB.equals(optA)).toBe(true);
    expect(trainerRows(stopped)).toEqual(trainerRows(straight));
    // The run's plots, as every trainer's: rewards and losses.
    for (const plot of ['rewards.png', 'losses.png']) await expect(readFile(join(straight, plot))).resolves.toBeInstanceOf(Buffer);
  });
});
