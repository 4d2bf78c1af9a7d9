/**
 * One source for the actor-critic presets: examples/configs/*.yaml. A preset is exactly the trainer
 * config the CLI builds from its YAML file; a change to the YAML moves the preset with it; the YAML
 * files ship with the package (the presets read them at run time).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import { loadConfig } from '../cli/schemas.js';
import { ACTOR_CRITIC_PRESET_NAMES, actorCriticPreset, presetConfigFile } from '../trainers/presets.js';

describe('presets come from the example configs', () => {
  test('each preset equals the trainer config the CLI builds from its YAML (all fields)', () => {
    for (const name of ACTOR_CRITIC_PRESET_NAMES) {
      const p = actorCriticPreset(name);
      const config = loadConfig(presetConfigFile(name), []);
      expect(config.trainer, name).toBe(p.trainer);
      expect(p.config, name).toEqual(config.trainerConfig);
      expect(p.rewardProcessor.shift, name).toBe(config.rewardProcessor.shift);
      expect(p.splits, name).toEqual({ train: config.dataset.train_split, eval: config.dataset.eval_split });
    }
  });

  test('the YAML files are in the npm package', () => {
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { files: string[] };
    expect(pkg.files).toContain('examples/configs');
  });

  test('a preset is a fresh object each call', () => {
    const a = actorCriticPreset('tldr-dc');
    (a.config as { num_train_epochs?: number }).num_train_epochs = 1;
    expect(actorCriticPreset('tldr-dc').config.num_train_epochs).not.toBe(1);
  });
});
