import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTinyModel } from '../src/model/tiny.js';
import { cli, tempDir } from './cli-helpers.js';

// The heaviest shipped config (CoLLM-CC on HouseBuild: 4 turns, a centralized critic whose input
// holds both agents' observations, thousands of tokens with a small BPE vocabulary) crashed the
// wasm heap near 4.2 GB before memory planning, even on tiny models. Here it runs at reduced size
// (a hidden-64 checkpoint, 24 new tokens) through the real CLI, under a 256 MiB budget (a sixteenth
// of the wasm heap; critic rows run past 4,000 tokens), and must finish and report its peak memory.

let root: string;
let cleanup: () => Promise<void>;
let model: string;
beforeAll(async () => {
  ({ dir: root, cleanup } = await tempDir('memcli'));
  model = join(root, 'tiny');
  await createTinyModel({ dir: model, arch: 'qwen3', seed: 0, tokenizer: 'bpe', hiddenSize: 64, numLayers: 2 });
});
afterAll(async () => {
  await cleanup();
});

const config = join(process.cwd(), 'examples', 'configs', 'housebuild-collm-cc.yaml');
const base = (out: string, extra: string[]) => [
  'train', '--config', config,
  '--set', `model.agent_model=${model}`, '--set', `model.critic_model=${model}`,
  '--set', `output.dir=${out}`, '--set', 'output.plots=false', '--set', 'output.eval_before_after=false',
  '--set', 'collm_cc.max_new_tokens=24', '--set', 'collm_cc.eval_interval=1000',
  ...extra.flatMap((s) => ['--set', s]),
  '--stop-after', '1',
];

describe('housebuild-collm-cc at reduced size', () => {
  it('trains one item under a 256 MiB budget, splitting passes, and prints its peak memory', async () => {
    const out = join(root, 'run-budget');
    const r = await cli(base(out, ['memory.budget=256MiB']));
    expect(r.code, r.err).toBe(0);
    expect(r.err).toMatch(/peak memory: tensors [\d.]+ (KiB|MiB|GiB) · wasm heap [\d.]+ (MiB|GiB) \(its high-water mark\) · process RSS/);
    expect(existsSync(join(out, 'checkpoints', 'step-000001'))).toBe(true);
    const rows = readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, number>);
    expect(rows.some((m) => Number.isFinite(m['critic/value_loss']))).toBe(true);
    // ~38 s of CPU; on 2 cores shared with other jobs the wall time ran past the default 120 s.
  }, 300_000);

  it('a budget too small for one row is refused before training, naming what to reduce, with nothing lost', async () => {
    const out = join(root, 'run-tiny-budget');
    const r = await cli(base(out, ['memory.budget=2MiB']));
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/not enough memory for .*needs about [\d.]+ (KiB|MiB|GiB).*max_new_tokens.*num_generations.*memory\.micro_batch_size.*lora.*memory\.budget/s);
    expect(r.err).not.toMatch(/memory access out of bounds|Aborted\(\)/);
    // A start that fails before its first item leaves no run directory: the same command runs again.
    expect(existsSync(out)).toBe(false);
  });

  it('memory.offload_frozen_layers takes true, false or auto, and names itself when given anything else', async () => {
    const out = join(root, 'run-bad-offload');
    const r = await cli(base(out, ['memory.offload_frozen_layers=sometimes']));
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/memory\.offload_frozen_layers must be 'auto' or true or false/);
  });
});
