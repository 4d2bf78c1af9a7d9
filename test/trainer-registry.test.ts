/**
 * The trainer registry: a trainer registered in one file (here, this one: a toy trainer whose
 * update is a fixed AdamW step) is selected by its config section and runs through the CLI like a
 * built-in one — `comlrl train` (with its checkpoints and an exact `--resume`) and `comlrl eval`;
 * config parsing reads its schema and rules from the registry.
 */
import * as tf from '@tensorflow/tfjs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { stringify } from 'yaml';
import { z } from 'zod';
import { ConfigError, parseRunConfig } from '../src/config/schema.js';
import { readMetrics } from '../src/logging/metrics.js';
import { readSafetensors } from '../src/model/safetensors.js';
import type { AdamW } from '../src/optim/adamw.js';
import { finiteNumber, intAtLeast, runSettingsFields } from '../trainers/core/config.js';
import { saveAgents, type SaveOptions } from '../trainers/core/save.js';
import type { TrainerState } from '../trainers/core/state.js';
import { TrainerBase, type TrainerInputs } from '../trainers/core/trainer.js';
import { parseMAGRPOConfig } from '../trainers/magrpo/config.js';
import { getTrainer, registerTrainer, trainerNames, type TrainerSpec } from '../trainers/registry.js';
import { backendUnderTest } from './backend-under-test.js';
import { cli, useCliWorkspace } from './cli-helpers.js';

// ---- the toy trainer, registered in this file ----

const fixedStepSchema = z.strictObject({
  num_agents: intAtLeast('num_agents', 1).optional(),
  num_turns: intAtLeast('num_turns', 1).default(1),
  num_train_epochs: intAtLeast('num_train_epochs', 1).default(1),
  max_new_tokens: intAtLeast('max_new_tokens', 1).default(2),
  temperature: finiteNumber('temperature', { min: 0, exclusiveMin: true }).default(1),
  top_p: finiteNumber('top_p', { min: 0, max: 1, exclusiveMin: true }).default(1),
  top_k: intAtLeast('top_k', 0).nullable().default(null),
  discount: finiteNumber('discount', { min: 0, max: 1 }).default(1),
  eval_interval: intAtLeast('eval_interval', 0).default(0),
  eval_num_samples: intAtLeast('eval_num_samples', 0).default(2),
  eval_batch_size: intAtLeast('eval_batch_size', 1).default(2),
  rollout_buffer_size: intAtLeast('rollout_buffer_size', 1).default(1),
  train_batch_size: intAtLeast('train_batch_size', 1).nullable().default(null),
  logging_steps: intAtLeast('logging_steps', 1).default(1),
  learning_rate: finiteNumber('learning_rate', { min: 0 }).default(0.01),
  ...runSettingsFields(),
});
type FixedStepConfig = z.output<typeof fixedStepSchema>;

/** Per training item, one AdamW step of every agent along a fixed gradient: every weight's is 1, 3 or 2 (by step). */
class FixedStepTrainer extends TrainerBase<unknown, unknown, FixedStepConfig> {
  private readonly optimizers: readonly AdamW[];

  constructor(inputs: TrainerInputs<unknown, unknown> & { readonly config: FixedStepConfig }) {
    super({ className: 'FixedStepTrainer', label: 'FixedStep', stateTag: 'fixed-step' }, inputs.config, inputs);
    this.optimizers = this.agents.map((a) => this.adamW(a.model.trainableVariables(), this.config.learning_rate));
  }

  protected async trainOn(): Promise<void> {
    const scale = 1 + (this.optimizerSteps % 3);
    for (const o of this.optimizers) {
      const grads = o.variables.map((v) => tf.fill(v.shape, scale));
      o.step(grads);
      tf.dispose(grads);
      this.optimizerSteps++;
    }
    this.envStep++;
    if (this.trainLogDue()) await this.logger?.log(this.envStep, { 'train/fixed_step': scale });
  }

  protected async endEpoch(): Promise<void> {}

  async evaluate(): Promise<{ metrics: { 'eval/episodes': number }; episodes: Awaited<ReturnType<FixedStepTrainer['playEvalEpisodes']>> }> {
    const episodes = await this.playEvalEpisodes(null);
    const metrics = { 'eval/episodes': episodes.length };
    await this.logger?.log(this.envStep, metrics);
    return { metrics, episodes };
  }

  override save(dir: string, options: SaveOptions = {}): Promise<string[]> {
    return saveAgents(dir, this.agents, options);
  }

  exportState(): TrainerState<null> {
    return this.snapshot(this.optimizers, null);
  }

  importState(state: TrainerState<null>): void {
    this.restoreSnapshot(state, this.optimizers, () => {});
  }

  dispose(): void {
    for (const o of this.optimizers) o.dispose();
  }
}

// Its spec: section, schema, model roles (agents only: no critics, a reference only with the
// reference KL) and how it is built — the one registration line a trainer needs
// (docs/trainers/adding-a-trainer.md).
const FIXED_STEP_TRAINER: TrainerSpec<FixedStepConfig> = {
  name: 'fixed-step',
  label: 'FixedStep',
  section: 'fixed_step',
  schema: fixedStepSchema,
  roles: { reference: 'kl' },
  build: (inputs) => new FixedStepTrainer(inputs),
};
registerTrainer(FIXED_STEP_TRAINER);

// ---- through the CLI ----

const ws = useCliWorkspace('trainer-registry', { backend: backendUnderTest('wasm') });

/** A toy-task run config selecting the toy trainer: 2 epochs of 4 items, a checkpoint every 2. */
async function configFile(name: string): Promise<{ file: string; out: string }> {
  const out = join(ws.root, name);
  const file = join(ws.root, `${name}.yaml`);
  const doc = {
    model: { agents: ws.agents },
    dataset: { task: 'toy-coord', train_split: '[:4]', eval_split: '[:2]' },
    fixed_step: { num_train_epochs: 2, learning_rate: 0.01, weight_decay: 0 },
    output: { dir: out, save_steps: 2 },
    seed: 3,
  };
  await writeFile(file, stringify(doc));
  return { file, out };
}

test('the registry holds the built-in trainers and the one registered here', () => {
  expect(trainerNames()).toEqual(['magrpo', 'collm-dc', 'collm-cc', 'mareinforce', 'maremax', 'marloo', 'centralized-magrpo', 'madpo', 'marlhf', 'fixed-step']);
  expect(getTrainer('fixed-step').section).toBe('fixed_step');
  expect(() => getTrainer('nope')).toThrow(/unknown trainer 'nope' \(registered: magrpo, collm-dc, collm-cc, mareinforce, maremax, marloo, centralized-magrpo, madpo, marlhf, fixed-step\)/);
  expect(() => registerTrainer({ ...FIXED_STEP_TRAINER, name: 'other', section: 'magrpo' })).toThrow(/trainer section 'magrpo' is taken by trainer 'magrpo'/);
  registerTrainer(FIXED_STEP_TRAINER); // the same spec again: a no-op
  expect(getTrainer('fixed-step').roles).toMatchObject({ reference: 'kl' });
});

test('roles declare the models: counts from the section and the agents, critic keys allowed by them', () => {
  const dc = getTrainer('collm-dc');
  const section = (s: Record<string, unknown>) => parseRunConfig({ model: { agent_model: '/m' }, dataset: { task: 'toy-coord' }, collm_dc: s }).trainerConfig;
  expect(dc.roles.critics?.hint).toBe('one per agent');
  expect(dc.criticCount(section({}), 3)).toBe(3);
  expect(dc.criticCount(section({ use_separate_critic: false }), 3)).toBe(0);
  expect(dc.roles.critics?.off?.(section({ use_separate_critic: false }))).toMatchObject({ field: 'use_separate_critic' });
  expect(getTrainer('madpo').roles.reference).toBe('always');
  expect(getTrainer('centralized-magrpo').roles.agents?.count?.(parseRunConfig({ model: { agent_model: '/m' }, dataset: { task: 'toy-coord' }, centralized_magrpo: {} }).trainerConfig, 3)).toBe(1);
  // MARLHF: the reward model comes first of its value models, then maac / iac's critics.
  expect(getTrainer('marlhf').roles.rewardModel).toMatchObject({ modelField: 'reward_model_name' });
  expect(getTrainer('marlhf').criticsHint).toBe('one joint reward model, then maac: one centralized critic, iac: one critic per agent');
});


test("config parsing reads the registry: the toy trainer's section, schema and rules", () => {
  const issues = (doc: unknown): string[] => {
    try {
      parseRunConfig(doc);
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as ConfigError).issues.map((i) => `${i.key}: ${i.message}`);
    }
    throw new Error('expected a ConfigError');
  };
  const base = { model: { agent_model: '/m' }, dataset: { task: 'toy-coord' } };
  const config = parseRunConfig({ ...base, fixed_step: { learning_rate: 0.5 }, seed: 4 });
  expect(config.trainer).toBe('fixed-step');
  expect(config.trainerConfig).toMatchObject({ learning_rate: 0.5, seed: 4, num_turns: 1 });
  // Parsed once: a trainer given the parsed section keeps it as it is; anything else is parsed.
  const magrpo = parseRunConfig({ ...base, magrpo: { num_turns: 1 } });
  expect(parseMAGRPOConfig(magrpo.trainerConfig)).toBe(magrpo.trainerConfig);
  expect(parseMAGRPOConfig({ ...magrpo.trainerConfig })).not.toBe(magrpo.trainerConfig);
  expect(parseMAGRPOConfig({ ...magrpo.trainerConfig })).toEqual(magrpo.trainerConfig);
  expect(issues(base)[0]).toMatch(/missing trainer section: add one of magrpo:, collm_dc: \(alias iac:\), collm_cc: \(alias maac:\), mareinforce:, maremax:, marloo:, centralized_magrpo:, madpo:, marlhf: or fixed_step:/);
  expect(issues({ ...base, fixed_step: { learning_rte: 1 } })[0]).toMatch(/^fixed_step\.learning_rte: unknown key \(allowed here: num_agents, num_turns/);
  expect(issues({ ...base, model: { agent_model: '/m', critic_model: '/c' }, fixed_step: {} })[0]).toMatch(/^model\.critic_model: FixedStep has no critic; remove it or use collm_dc \/ collm_cc/);
  expect(issues({ ...base, fixed_stp: {} })).toContainEqual(expect.stringMatching(/^fixed_stp: unknown key \(allowed here: model, dataset, magrpo, collm_dc, iac, collm_cc, maac, mareinforce, maremax, marloo, centralized_magrpo, madpo, marlhf, fixed_step, external/));
});

test('comlrl train runs the registered trainer: every item, checkpoints, final/ and an exact --resume', async () => {
  const { file, out } = await configFile('straight');
  const r = await cli(['train', '--config', file]);
  expect(r.code, r.err).toBe(0);
  expect(r.err).toMatch(/training fixed-step on toy-coord: 8 steps \(2 epochs × 4 items\)/);
  expect(JSON.parse(await readFile(join(out, 'run.json'), 'utf8'))).toMatchObject({ trainer: 'fixed-step' });
  // One train row per item, in the order of the fixed schedule (two optimizer steps per item).
  const rows = readMetrics(join(out, 'metrics.jsonl')).filter((row) => 'train/fixed_step' in row);
  expect(rows.map((row) => row['train/fixed_step'])).toEqual([1, 3, 2, 1, 3, 2, 1, 3]);
  // Every weight moved from the base model.
  for (const i of [0, 1]) {
    const base = readSafetensors(join(ws.agents[i], 'model.safetensors'));
    const trained = readSafetensors(join(out, 'final', `agent_${i}`, 'model.safetensors'));
    for (const [name, t] of base) expect(trained.get(name)?.data.every((v, j) => v < t.data[j]), name).toBe(true);
  }

  const stopped = await configFile('stopped');
  const s = await cli(['train', '--config', stopped.file, '--stop-after', '3']);
  expect(s.code, s.err).toBe(0);
  const resumed = await cli(['train', '--resume', stopped.out]);
  expect(resumed.code, resumed.err).toBe(0);
  expect(resumed.err).toMatch(/resuming .*step-000003 at step 3\/8/);
  for (const i of [0, 1]) {
    const a = await readFile(join(out, 'final', `agent_${i}`, 'model.safetensors'));
    const b = await readFile(join(stopped.out, 'final', `agent_${i}`, 'model.safetensors'));
    expect(b.equals(a), `agent_${i}`).toBe(true);
  }

  // comlrl eval finds the trained agents where the trainer's layout puts them.
  const ev = await cli(['eval', '--config', file, '--checkpoint', out, '--limit', '2']);
  expect(ev.code, ev.err).toBe(0);
  expect(ev.err).toMatch(/trained agents .*final/);
  expect(ev.out).toMatch(/episode_reward_mean/);
}, 300_000);

// Registered last: it adds a section that the messages checked above do not list.
test('a spec written with the deprecated hooks (before roles) still registers and runs its counts', () => {
  registerTrainer({
    name: 'legacy-hooks',
    label: 'LegacyHooks',
    section: 'legacy_hooks',
    schema: fixedStepSchema,
    usesCritics: true,
    usesReference: true,
    criticCount: (_config, n) => n + 1,
    criticsHint: 'n + 1',
    build: (inputs) => new FixedStepTrainer(inputs),
  });
  const t = getTrainer('legacy-hooks');
  const config = parseRunConfig({ model: { agent_model: '/m', critic_model: '/c' }, dataset: { task: 'toy-coord' }, legacy_hooks: {} }).trainerConfig;
  expect(t.criticCount(config, 2)).toBe(3);
  expect(t.criticsHint).toBe('n + 1');
  expect(t.roles.reference).toBe('always');
});
