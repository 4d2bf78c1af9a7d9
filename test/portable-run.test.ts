/**
 * Portable runs: model and data paths in a config file are relative to its folder, and a
 * checkpoint records its models by content, so a LoRA run whose base moved resumes with
 * `--set model.agent_model=NEW` to the bytes of an uninterrupted run, while another model at the
 * new path is refused by name. A checkpoint written before models were recorded resumes only with
 * them at the paths it names.
 */
import { cpSync, existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parse, stringify } from 'yaml';
import { loadConfig } from '../cli/schemas.js';
import { modelIdentity, modelIdentityDifference } from '../src/checkpoint/model-identity.js';
import { cli, snapshot, tempDir, tinyModels, toyConfigYaml } from './cli-helpers.js';

let root: string;
let cleanup: () => Promise<void>;
let orig: string;
let other: string;

beforeAll(async () => {
  ({ dir: root, cleanup } = await tempDir('portable'));
  [orig] = await tinyModels(root, ['orig']);
  // The same architecture and tokenizer, another seed: only the weights differ.
  [other] = await tinyModels(root, ['other'], 7);
});
afterAll(async () => cleanup());

describe('model identity', () => {
  test('a copy is the same model; another seed or a config field is named', async () => {
    const copy = join(root, 'copy');
    cpSync(orig, copy, { recursive: true });
    for (const fullHashBytes of [undefined, 256]) {
      const a = await modelIdentity(orig, { fullHashBytes });
      expect(Object.keys(a.files)).toEqual(expect.arrayContaining(['config.json', 'model.safetensors', 'tokenizer.json']));
      expect(a.files['model.safetensors'].hashed).toBe(fullHashBytes === undefined ? 'full' : 'sampled');
      expect(modelIdentityDifference(a, await modelIdentity(copy, { fullHashBytes }))).toBeUndefined();
      expect(modelIdentityDifference(a, await modelIdentity(other, { fullHashBytes }))).toMatch(/^weight file model\.safetensors: same size, different content/);
    }
    const cfg = JSON.parse(readFileSync(join(copy, 'config.json'), 'utf8')) as Record<string, unknown>;
    writeFileSync(join(copy, 'config.json'), JSON.stringify({ ...cfg, rms_norm_eps: 0.5 }));
    expect(modelIdentityDifference(await modelIdentity(orig), await modelIdentity(copy))).toMatch(/config\.json field rms_norm_eps: recorded .*, found 0\.5/);
  });
});

test('relative model and data paths: a config file\'s against its folder, --set values against the working directory', async () => {
  const folder = join(root, 'configs', 'sub');
  await mkdir(folder, { recursive: true });
  const file = join(folder, 'run.yaml');
  const doc = parse(toyConfigYaml({ agents: ['../../orig', orig], out: join(root, 'unused'), section: { reference_kl_enabled: true } })) as { model: Record<string, unknown>; dataset: Record<string, unknown> };
  doc.model.reference_model = 'refs/r';
  doc.dataset.path = 'data.jsonl';
  await writeFile(file, stringify(doc));
  const config = loadConfig(file, []);
  expect(config.model.agents).toEqual([orig, orig]);
  expect(config.model.reference_model).toBe(join(folder, 'refs', 'r'));
  expect(config.dataset.path).toBe(join(folder, 'data.jsonl'));
  const set = loadConfig(file, ['model.reference_model=here/r', `dataset.eval_path=${join(root, 'e.jsonl')}`]);
  expect(set.model.reference_model).toBe(resolve('here/r'));
  expect(set.dataset.eval_path).toBe(join(root, 'e.jsonl'));
  // A run directory's config.yaml written before paths were made absolute: relative to the working directory.
  expect(loadConfig(file, [], { baseDir: root }).model.agents).toEqual([resolve(root, '../../orig'), orig]);
});

describe('a LoRA run whose base moved', () => {
  const LORA = { r: 4, lora_alpha: 8, lora_dropout: 0.1, target_modules: 'all-linear', save_merged: true };
  let straight: string;
  let stopped: string;
  let moved: string;

  /** The LoRA config written into `root/configs/NAME.yaml`, its base given relative to that folder. */
  async function train(name: string, extra: string[] = []): Promise<string> {
    const out = join(root, name);
    const doc = parse(toyConfigYaml({ agents: [orig, orig], out, trainItems: 3, section: { rollout_buffer_size: 3, train_batch_size: 2 } })) as { model: Record<string, unknown> };
    delete doc.model.agents;
    doc.model.agent_model = relative(join(root, 'configs'), orig);
    doc.model.lora = LORA;
    const file = join(root, 'configs', `${name}.yaml`);
    await mkdir(join(root, 'configs'), { recursive: true });
    await writeFile(file, stringify(doc));
    const r = await cli(['train', '--config', file, ...extra]);
    expect(r.code, r.err).toBe(0);
    return out;
  }

  beforeAll(async () => {
    straight = await train('straight');
    stopped = await train('stopped', ['--stop-after', '3']);
    moved = join(root, 'moved-base');
    renameSync(orig, moved);
  });
  afterAll(() => {
    if (existsSync(moved)) renameSync(moved, orig);
  });

  test('the run directory and checkpoints name the base by absolute path and record it by content', async () => {
    expect((parse(await readFile(join(stopped, 'config.yaml'), 'utf8')) as { model: { agent_model: string } }).model.agent_model).toBe(orig);
    const rs = JSON.parse(await readFile(join(stopped, 'checkpoints', 'step-000003', 'run_state.json'), 'utf8')) as { models: Record<string, { path: string; identity: { files: Record<string, unknown> } }> };
    expect(Object.keys(rs.models)).toEqual(['model.agent_model']);
    expect(rs.models['model.agent_model'].path).toBe(orig);
    expect(Object.keys(rs.models['model.agent_model'].identity.files)).toEqual(expect.arrayContaining(['config.json', 'model.safetensors']));
  });

  test('another model at the new path is refused by name, and nothing is changed', async () => {
    const before = await snapshot(stopped);
    const r = await cli(['train', '--resume', stopped, '--set', `model.agent_model=${other}`]);
    expect(r.code).not.toBe(0);
    expect(r.err).toMatch(/model\.agent_model \(.*other\) is not the model the run was started with \(.*orig\): weight file model\.safetensors: same size, different content/);
    expect(await snapshot(stopped)).toEqual(before);
  });

  test('resumed with --set model.agent_model=NEW it ends with the bytes of the uninterrupted run', async () => {
    const r = await cli(['train', '--resume', stopped, '--set', `model.agent_model=${moved}`]);
    expect(r.code, r.err).toBe(0);
    expect(r.err).toMatch(/resuming .*step-000003 at step 3\/6/);
    for (const d of ['agent_0', 'agent_1']) {
      for (const f of ['adapter_model.safetensors', 'merged/model.safetensors']) {
        const a = await readFile(join(straight, 'final', d, f));
        const b = await readFile(join(stopped, 'final', d, f));
        expect(b.equals(a), `${d}/${f}`).toBe(true);
      }
    }
    // The run's hash still covers the path it started with; its config.yaml names where the base is now.
    expect(r.err).toContain(`config ${JSON.parse(await readFile(join(stopped, 'checkpoints', 'step-000003', 'manifest.json'), 'utf8')).configHash as string}`);
    expect((parse(await readFile(join(stopped, 'config.yaml'), 'utf8')) as { model: { agent_model: string } }).model.agent_model).toBe(moved);
  });
});

test('a checkpoint written before models were recorded is refused at a new path, naming why', async () => {
  const runDir = join(root, 'pre-refactor');
  cpSync(join(import.meta.dirname, 'fixtures', 'pre-refactor-run'), runDir, { recursive: true });
  const before = await snapshot(runDir);
  const r = await cli(['train', '--resume', runDir, '--set', `model.agents=[${orig}, ${other}]`]);
  expect(r.code).not.toBe(0);
  expect(r.err).toMatch(/model\.agents\[0\] is .*orig but the run used models\/a; this checkpoint was written before comlrl recorded models by content, so it resumes only with the model at that path/);
  expect(await snapshot(runDir)).toEqual(before);
});
