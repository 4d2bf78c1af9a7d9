/**
 * `comlrl eval` never loads the reference model of the reference KL: evaluation plays the agents
 * only, so a run trained with `reference_kl_enabled` evaluates when its reference folder is gone,
 * and a config naming a reference that does not exist evaluates its base models. (Training, by
 * contrast, needs it: the same config is refused by `comlrl train`.)
 */
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { setBackendLogger } from '../src/backend/init.js';
import { cli, tempDir, tinyModels, toyConfigYaml } from './cli-helpers.js';

let root: string;
let cleanup: () => Promise<void>;
let agentDirs: string[];

beforeAll(async () => {
  setBackendLogger(null);
  ({ dir: root, cleanup } = await tempDir('eval-reference'));
  agentDirs = await tinyModels(root, ['a0', 'a1']);
});
afterAll(async () => cleanup());

const MISSING = '/nonexistent/comlrl-reference-model';

test('a run trained with reference KL evaluates after its reference folder is removed', async () => {
  const [refDir] = await tinyModels(root, ['ref'], 7);
  const out = join(root, 'run');
  const file = join(root, 'run.yaml');
  const yaml = toyConfigYaml({ agents: agentDirs, out, trainItems: 2, section: { reference_kl_enabled: true, reference_kl_coef: 0.5 } });
  await writeFile(file, yaml.replace('model:\n', `model:\n  reference_model: ${refDir}\n`));
  const trained = await cli(['train', '--config', file]);
  expect(trained.code, trained.err).toBe(0);
  await rm(refDir, { recursive: true, force: true });
  const r = await cli(['eval', '--config', join(out, 'config.yaml'), '--checkpoint', out]);
  expect(r.code, r.err).toBe(0);
  expect(r.out).toMatch(/eval_items\s+4/);
  expect(r.err).not.toMatch(/reference model/i);
});

test('base models: a reference_model that does not exist is no error at eval (training refuses it)', async () => {
  const file = join(root, 'base.yaml');
  const yaml = toyConfigYaml({ agents: agentDirs, out: join(root, 'base-run'), trainItems: 2, section: { reference_kl_enabled: true } });
  await writeFile(file, yaml.replace('model:\n', `model:\n  reference_model: ${MISSING}\n`));
  const r = await cli(['eval', '--config', file]);
  expect(r.code, r.err).toBe(0);
  expect(r.out).toMatch(/episode_reward_mean/);
  const train = await cli(['train', '--config', file]);
  expect(train.code).not.toBe(0);
  expect(train.err).toContain(MISSING);
});
