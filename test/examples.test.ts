/**
 * The examples: every config in examples/configs validates with the trainers' own schemas and
 * carries the paper's hyperparameters (checked against the actor-critic presets), and the
 * quickstart script runs end to end on tiny models.
 */
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { quickstart } from '../examples/quickstart.js';
import { TRAINER_CONFIG_SCHEMAS } from '../cli/schemas.js';
import { setBackendLogger } from '../src/backend/init.js';
import { readConfigFile } from '../src/config/load.js';
import { parseRunConfig } from '../src/config/schema.js';
import { readMetrics } from '../src/logging/metrics.js';
import { loadCausalLM } from '../src/model/load.js';
import { actorCriticPreset } from '../trainers/presets.js';
import { tempDir } from './cli-helpers.js';

const DIR = join(import.meta.dirname, '..', 'examples', 'configs');
const TASKS = ['tldr', 'coophe', 'housebuild'] as const;
const TRAINERS = ['magrpo', 'collm-dc', 'collm-cc'] as const;

describe('example configs', () => {
  test('one per (task, trainer), and nothing else unexpected', async () => {
    const files = (await readdir(DIR)).filter((f) => f.endsWith('.yaml')).sort();
    for (const t of TASKS) for (const tr of TRAINERS) expect(files).toContain(`${t}-${tr}.yaml`);
  });

  for (const task of TASKS) {
    for (const trainer of TRAINERS) {
      test(`${task}-${trainer}.yaml validates`, () => {
        const file = join(DIR, `${task}-${trainer}.yaml`);
        const config = parseRunConfig(readConfigFile(file), TRAINER_CONFIG_SCHEMAS, file);
        expect(config.trainer).toBe(trainer);
        expect(config.dataset.task).toBe(task);
        // Model paths are placeholders the user replaces (documented in each file's header).
        expect(config.model.agent_model).toMatch(/^\/path\/to\//);
        if (trainer !== 'magrpo') expect(config.model.critic_model).toMatch(/^\/path\/to\//);
        const tc: Readonly<Record<string, unknown>> = config.trainerConfig;
        expect(tc.num_agents).toBe(2);
        if (trainer !== 'magrpo') {
          // The actor-critic configs carry the preset's numbers (tasks-reference §1.6, §2.6, §3.5).
          const preset = actorCriticPreset(`${task}-${trainer === 'collm-dc' ? 'dc' : 'cc'}`);
          for (const [k, v] of Object.entries(preset.config)) {
            if (k === 'seed') continue;
            expect(tc[k], `${task}-${trainer}: ${k}`).toEqual(v);
          }
          expect(config.rewardProcessor.shift).toBe(preset.rewardProcessor.shift);
          expect(config.model.agent_model).toContain(preset.agentModel.split('/')[1]);
        }
      });
    }
  }

  test('the papers’ MAGRPO numbers', () => {
    const load = (name: string) => parseRunConfig(readConfigFile(join(DIR, name)), TRAINER_CONFIG_SCHEMAS, name);
    const tldr = load('tldr-magrpo.yaml');
    expect(tldr.trainerConfig).toMatchObject({ num_turns: 1, num_train_epochs: 2, agent_learning_rate: 5e-6, num_generations: 4, max_new_tokens: 256, rollout_buffer_size: 1, temperature: 0.7, top_p: 0.9, top_k: null });
    expect(tldr.dataset).toMatchObject({ train_split: 'train[:1100]', eval_split: 'test[:1100]' });
    const che = load('coophe-magrpo.yaml');
    expect(che.trainerConfig).toMatchObject({ num_turns: 2, num_train_epochs: 8, agent_learning_rate: 2e-5, num_generations: 4, discount: 1, early_termination_threshold: -0.2, rollout_buffer_size: 4, temperature: 0.6, top_p: 0.6 });
    expect(che.rewardProcessor.shift).toBe(-4);
    expect(che.external).toMatchObject({ mode: 'level_feedback', sandbox_slice: 1 });
    const house = load('housebuild-magrpo.yaml');
    expect(house.trainerConfig).toMatchObject({ num_turns: 4, num_train_epochs: 20, agent_learning_rate: 1e-5, num_generations: 2, max_new_tokens: 512, early_termination_threshold: -0.1, eval_interval: 2, eval_num_samples: 2, logging_steps: 5 });
    expect(house.task).toMatchObject({ max_commands: 600, limited_resource: true, player: { hp: 5 }, spider: { num: 3, atk_low: 1, atk_high: 3 } });
    expect(house.external).toMatchObject({ mode: 'score_feedback', original_prompt: true, previous_response: true, lim: 20 });
    expect(house.model.use_chat_template).toBe(true);
    expect(house.rewardProcessor.shift).toBe(-1);
  });
});

describe('quickstart', () => {
  let out: string;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    setBackendLogger(null);
    ({ dir: out, cleanup } = await tempDir('quickstart'));
  });
  afterAll(async () => cleanup());

  test('runs end to end on tiny models and saves loadable agents', async () => {
    const r = await quickstart({ epochs: 2, out, verbose: false });
    expect(Number.isFinite(r.before)).toBe(true);
    expect(Number.isFinite(r.after)).toBe(true);
    expect(r.savedTo).toHaveLength(2);
    const m = await loadCausalLM(r.savedTo[1]);
    expect(m.architecture).toBe('qwen3');
    m.dispose();
    const rows = readMetrics(r.metricsFile);
    expect(rows.some((row) => 'turn_1/reward_mean' in row)).toBe(true);
    expect(existsSync(join(out, 'rewards.png'))).toBe(true);
  });
});
