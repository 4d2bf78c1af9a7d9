/**
 * A checkpoint written before the config / task-registry / run refactor still resumes exactly.
 * test/fixtures/pre-refactor-run is a run directory written by commit ad4634b's CLI
 * (`node dist/cli/main.js train --config run.yaml --stop-after 2`, toy task, MAGRPO, two tiny
 * word-level qwen3 agents made with `comlrl tiny-model --arch qwen3 --tokenizer word --words toy
 * --hidden 32 --layers 1 --seed 1|2 --out models/a|b`, 2 epochs × 4 items, buffer 3 so that two
 * samples per agent wait in the checkpoint's rollout buffers). The same commit's uninterrupted run
 * of that config ended with the final weights whose SHA-256 are below; resuming the stopped run
 * with this code must end with the same bytes. The model paths are relative and only enter the
 * config hash (a full fine-tune resumes its weights from the checkpoint).
 */
import { createHash } from 'node:crypto';
import { cpSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { cli, tempDir } from './cli-helpers.js';

const FIXTURE = join(import.meta.dirname, 'fixtures', 'pre-refactor-run');
const UNINTERRUPTED_SHA256 = [
  'bd7672578883298e9cf4d9fd64105b81e5119cf9b1a6192959abeee1a93681b1',
  'bed031f65074b5ed8e0a05d392c14d29f91d4bf2b1825b0949fbed5cc0544828',
];

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  ({ dir: root, cleanup } = await tempDir('pre-refactor'));
});
afterAll(async () => cleanup());

test('a run stopped by the pre-refactor CLI resumes to the bytes of its uninterrupted run', async () => {
  const runDir = join(root, 'run');
  cpSync(FIXTURE, runDir, { recursive: true });
  const r = await cli(['train', '--resume', runDir]);
  expect(r.code, r.err).toBe(0);
  expect(r.err).toMatch(/resuming .*step-000002 at step 2\/8/);
  const sha = [0, 1].map((i) => createHash('sha256').update(readFileSync(join(runDir, 'final', `agent_${i}`, 'model.safetensors'))).digest('hex'));
  expect(sha).toEqual(UNINTERRUPTED_SHA256);
});
