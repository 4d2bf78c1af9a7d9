/**
 * A config value the run would silently ignore is an error naming it and the setting that makes it
 * moot (src/config/ignored.ts; docs/cli.md, "Config files").
 */
import { describe, expect, test } from 'vitest';
import { TRAINER_CONFIG_SCHEMAS } from '../cli/schemas.js';
import { ConfigError, parseRunConfig } from '../src/config/schema.js';
import { parseCoLLMDCConfig } from '../trainers/collm/config.js';

const parse = (doc: unknown) => parseRunConfig(doc, TRAINER_CONFIG_SCHEMAS, 'test.yaml');

function issues(doc: unknown): string[] {
  try {
    parse(doc);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues.map((i) => `${i.key}: ${i.message}`);
  }
  throw new Error('expected a ConfigError');
}

const LORA = { r: 2, lora_alpha: 4, target_modules: 'all-linear' };
const dc = (section: Record<string, unknown>, model: Record<string, unknown> = {}, rest: Record<string, unknown> = {}) => ({
  model: { agent_model: '/m/a', ...model },
  dataset: { task: 'toy-coord' },
  collm_dc: { num_turns: 1, ...section },
  ...rest,
});

describe('critic models with shared value heads (CoLLM-DC use_separate_critic: false)', () => {
  test.each([
    ['critics', { critics: ['/m/c0', '/m/c1'] }],
    ['critic_model', { critic_model: '/m/c' }],
    ['critic_lora', { lora: LORA, critic_lora: LORA }],
  ])('model.%s is refused naming collm_dc.use_separate_critic', (key, model) => {
    const got = issues(dc({ use_separate_critic: false }, model));
    expect(got).toHaveLength(1);
    expect(got[0]).toMatch(new RegExp(`^model\\.${key}: would be ignored: collm_dc\\.use_separate_critic is false .*trains no critic model`));
  });

  test('the alias section is named as written; separate critics take the same keys', () => {
    const doc = { model: { agent_model: '/m/a', critics: ['/m/c0', '/m/c1'] }, dataset: { task: 'toy-coord' }, iac: { num_turns: 1, use_separate_critic: false } };
    expect(issues(doc)).toEqual([expect.stringMatching(/^model\.critics: .*iac\.use_separate_critic is false/)]);
    expect(parse(dc({}, { critics: ['/m/c0', '/m/c1'], critic_lora: false })).model.critics).toEqual(['/m/c0', '/m/c1']);
    expect(parse(dc({ use_separate_critic: false })).trainer).toBe('collm-dc');
  });

  test("a head width for the other kind of critic is refused (0 and null are the linear head's either way)", () => {
    expect(() => parseCoLLMDCConfig({ value_head_hidden_dim: 8 })).toThrow(/value_head_hidden_dim would be ignored: use_separate_critic is true, so the heads take critic_value_head_hidden_dim/);
    expect(() => parseCoLLMDCConfig({ use_separate_critic: false, critic_value_head_hidden_dim: 8 })).toThrow(/critic_value_head_hidden_dim would be ignored: use_separate_critic is false/);
    expect(parseCoLLMDCConfig({ use_separate_critic: false, value_head_hidden_dim: 8, critic_value_head_hidden_dim: 0 }).value_head_hidden_dim).toBe(8);
    expect(issues(dc({ value_head_hidden_dim: 16 }))).toEqual([expect.stringMatching(/^collm_dc\.value_head_hidden_dim: value_head_hidden_dim would be ignored/)]);
  });
});

describe('other settings that would be ignored', () => {
  const magrpo = (model: Record<string, unknown>, rest: Record<string, unknown> = {}, section: Record<string, unknown> = {}) => ({
    model: { agent_model: '/m/a', ...model },
    dataset: { task: 'toy-coord' },
    magrpo: { num_turns: 1, ...section },
    ...rest,
  });

  test('save_merged and save_dtype without a final model', () => {
    const noFinal = { output: { save_final_model: false } };
    expect(issues(magrpo({ lora: { ...LORA, save_merged: true } }, noFinal))).toEqual([expect.stringMatching(/^model\.lora\.save_merged: would be ignored: output\.save_final_model is false/)]);
    expect(issues(magrpo({}, { output: { save_final_model: false, save_dtype: 'bfloat16' } }))).toEqual([expect.stringMatching(/^output\.save_dtype: would be ignored: output\.save_final_model is false/)]);
    expect(issues(dc({}, { lora: LORA, critic_lora: { ...LORA, save_merged: true } }, noFinal))).toEqual([expect.stringMatching(/^model\.critic_lora\.save_merged: would be ignored/)]);
    // With the final model, or at their defaults, they are fine.
    expect(parse(magrpo({ lora: { ...LORA, save_merged: true } }, { output: { save_dtype: 'bfloat16' } })).output.save_dtype).toBe('bfloat16');
    expect(parse(magrpo({ lora: LORA }, { output: { save_final_model: false, save_dtype: 'float32' } })).output.save_final_model).toBe(false);
  });

  test('system_prompt and enable_thinking without the chat template', () => {
    expect(issues(magrpo({ system_prompt: 'Be brief.', enable_thinking: false }))).toEqual([
      expect.stringMatching(/^model\.system_prompt: would be ignored: .*model\.use_chat_template is false/),
      expect.stringMatching(/^model\.enable_thinking: would be ignored: /),
    ]);
    expect(parse(magrpo({ system_prompt: 'Be brief.', enable_thinking: false, use_chat_template: true })).model.system_prompt).toBe('Be brief.');
  });

  test('reference_model without the reference KL', () => {
    expect(issues(magrpo({ reference_model: '/m/ref' }))).toEqual([expect.stringMatching(/^model\.reference_model: would be ignored: magrpo\.reference_kl_enabled is false/)]);
    expect(parse(magrpo({ reference_model: '/m/ref' }, {}, { reference_kl_enabled: true })).model.reference_model).toBe('/m/ref');
  });
});
