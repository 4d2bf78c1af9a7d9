/**
 * The config hash stored in checkpoints must not move when the code around the config changes: an
 * exact-resume checkpoint written before stays resumable only while its config hashes the same.
 * The literals were computed with `runConfigHash` on the code before the run-config refactor
 * (commit ad4634b), from these same documents.
 */
import { describe, expect, test } from 'vitest';
import { loadConfig } from '../cli/schemas.js';
import { runConfigHash } from '../cli/run.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// examples/configs/{tldr,housebuild,coophe}-magrpo.yaml as of commit ad4634b (copied so that
// later changes to the example values do not move these literals).
const TLDR_MAGRPO = `
model: { agent_model: /path/to/Qwen3-1.7B, temperature: 0.7, top_p: 0.9, top_k: null, use_chat_template: false }
dataset: { task: tldr, path: /path/to/trl-lib-tldr, train_split: 'train[:1100]', eval_split: 'test[:1100]' }
magrpo:
  num_agents: 2
  num_turns: 1
  num_train_epochs: 2
  agent_learning_rate: 5.0e-6
  num_generations: 4
  max_new_tokens: 256
  rollout_buffer_size: 1
  train_batch_size: 1
  advantage_normalization: true
  joint_mode: aligned
  eval_interval: 20
  eval_num_samples: 4
  eval_batch_size: 1
  logging_steps: 50
reward_processor: { enabled: true, scale: 1.0, shift: 0.0 }
output: { dir: runs/tldr-magrpo, save_steps: 100, save_final_model: true }
seed: 42
`;

const HOUSE_MAGRPO = `
model: { agent_model: /path/to/Qwen3-4B-Instruct-2507, temperature: 0.6, top_p: 0.6, top_k: null, use_chat_template: true }
dataset: { task: housebuild, train_split: '[:8]', eval_split: '[8:]' }
external: { mode: score_feedback, original_prompt: true, previous_response: true, lim: 20 }
task:
  block_agent1: [white_concrete, obsidian, stone_stairs, stone_bricks, planks, air]
  block_agent2: [white_concrete, obsidian, stone_stairs, stone_bricks, planks, air]
  max_commands: 600
  limited_resource: true
  player: { hp: 5 }
  spider: { num: 3, atk_low: 1, atk_high: 3 }
magrpo:
  num_agents: 2
  num_turns: 4
  num_train_epochs: 20
  agent_learning_rate: 1.0e-5
  num_generations: 2
  max_new_tokens: 512
  discount: 0.9
  joint_mode: aligned
  early_termination_threshold: -0.1
  rollout_buffer_size: 1
  train_batch_size: 1
  advantage_normalization: true
  eval_interval: 2
  eval_num_samples: 2
  eval_batch_size: 1
  logging_steps: 5
reward_processor: { enabled: true, scale: 1.0, shift: -1.0 }
output: { dir: runs/housebuild-magrpo, save_steps: 20, save_final_model: false }
seed: 42
`;

const COOPHE_MAGRPO = `
model:
  agent_model: /path/to/Qwen2.5-Coder-3B
  temperature: 0.6
  top_p: 0.6
  top_k: null
  use_chat_template: false
dataset:
  task: coophe
  path: /path/to/CoopHumanEval.json
  train_split: train[16:]
  eval_split: train[:16]
external:
  mode: level_feedback
  sandbox_slice: 1
magrpo:
  num_agents: 2
  num_turns: 2
  num_train_epochs: 8
  agent_learning_rate: 2.0e-5
  num_generations: 4
  max_new_tokens: 256
  discount: 1.0
  joint_mode: aligned
  early_termination_threshold: -0.2
  rollout_buffer_size: 4
  train_batch_size: 4
  advantage_normalization: true
  eval_interval: 4
  eval_num_samples: 4
  eval_batch_size: 1
  logging_steps: 50
reward_processor:
  enabled: true
  scale: 1.0
  shift: -4.0
output:
  dir: runs/coophe-magrpo
  save_steps: 200
  save_final_model: true
seed: 42
`;

describe('config hash (checkpoint identity) is unchanged', () => {
  const dir = mkdtempSync(join(tmpdir(), 'comlrl-hash-'));
  const load = (text: string, sets: string[] = []) => {
    const file = join(dir, 'c.yaml');
    writeFileSync(file, text);
    return loadConfig(file, sets);
  };
  test('MAGRPO configs hash as before the refactor', () => {
    // The configs without `discount` hash with MAGRPO's default, CoMLRL's 1.0 (computed with this
    // code; the default of 0.9 before it gave b08f…/eebc…): a checkpoint trained with γ 0.9 must
    // not resume as 1.0.
    expect(runConfigHash(load(TLDR_MAGRPO))).toBe('2ed854c71b4a7e45');
    expect(runConfigHash(load(HOUSE_MAGRPO))).toBe('45e36fcb8076ef9c');
    // CoopHE: external options and the task's sandbox options (now parsed by the task's own spec).
    expect(runConfigHash(load(COOPHE_MAGRPO))).toBe('213432adbb8f11b3');
    expect(runConfigHash(load(COOPHE_MAGRPO, ['task.pool_size=2']))).not.toBe('213432adbb8f11b3');
    const toy = load(TLDR_MAGRPO, ['dataset.task=toy-coord', 'dataset.path=null', 'dataset.train_split=null', 'dataset.eval_split=null']);
    expect(runConfigHash(toy)).toBe('77257be33e687711');
    rmSync(dir, { recursive: true, force: true });
  });
});
