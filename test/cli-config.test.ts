/**
 * Run-config files: YAML/JSON reading, `--set` overrides as YAML scalars, and the validation rules
 * (strict sections, errors naming the dotted key, trainer sections checked by the trainers' schemas).
 */
import { describe, expect, test } from 'vitest';
import { TRAINER_CONFIG_SCHEMAS } from '../cli/schemas.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { applyOverrides, parseConfigText, parseOverride, readConfigFile } from '../src/config/load.js';
import { ConfigError, memorySettingsOf, parseRunConfig, runConfigIdentity, runConfigToDocument } from '../src/config/schema.js';
import { configHash } from '../src/config/hash.js';

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

const base = () => ({ model: { agent_model: '/m/a' }, dataset: { task: 'toy-coord' }, magrpo: { num_turns: 1 } });

describe('--set overrides', () => {
  test('values are YAML scalars and flow collections', () => {
    expect(parseOverride('magrpo.agent_learning_rate=1e-5')).toEqual({ path: ['magrpo', 'agent_learning_rate'], value: 1e-5 });
    expect(parseOverride('a.b=null').value).toBeNull();
    expect(parseOverride('a=true').value).toBe(true);
    expect(parseOverride('a="007"').value).toBe('007');
    expect(parseOverride('a=007').value).toBe(7);
    expect(parseOverride('model.agents=[/m/a, /m/b]').value).toEqual(['/m/a', '/m/b']);
    expect(parseOverride('a=x=y').value).toBe('x=y');
    expect(parseOverride('a=').value).toBeNull();
    expect(() => parseOverride('novalue')).toThrow(/key\.path=value/);
    expect(() => parseOverride('a..b=1')).toThrow(/empty segment/);
  });

  test('sections are created; scalars are not descended into', () => {
    const doc = applyOverrides({ magrpo: { num_turns: 1 }, seed: 1 }, ['magrpo.num_turns=2', 'output.dir=runs/x', 'seed=5']);
    expect(doc).toEqual({ magrpo: { num_turns: 2 }, output: { dir: 'runs/x' }, seed: 5 });
    expect(() => applyOverrides({ seed: 1 }, ['seed.x=2'])).toThrow(/seed: is 1, not a section; cannot set seed\.x/);
  });
});

describe('--set null and string keys', () => {
  test('key=null removes the key, so an alternative key or the default applies; !!null keeps a null', () => {
    const doc = { model: { agent_model: '/m/a' }, dataset: { task: 'toy-coord' }, magrpo: { num_turns: 1, top_k: 7 } };
    const out = applyOverrides(doc, ['model.agent_model=null', 'model.agents=[/m/a, /m/b]', 'magrpo.top_k=null']);
    expect(out.model).toEqual({ agents: ['/m/a', '/m/b'] });
    const c = parse(out);
    expect(c.model.agents).toEqual(['/m/a', '/m/b']);
    // The default (50) applies again.
    expect(c.trainerConfig.top_k).toBe(50);
    // An explicit null stays null (top-k off).
    expect(parse(applyOverrides(doc, ['magrpo.top_k=!!null'])).trainerConfig.top_k).toBeNull();
    // Removing a key under a missing section is a no-op, not a new empty section.
    expect(applyOverrides({ seed: 1 }, ['task.spider.num=null', 'seed=~'])).toEqual({});
  });

  test('split keys keep the raw text when YAML reads a non-string; other keys stay strict', () => {
    expect(parseOverride('dataset.train_split=[:5]').value).toBe('[:5]');
    expect(parseOverride('dataset.eval_split=[8:]').value).toBe('[8:]');
    expect(parseOverride('dataset.eval_split=test[:16]').value).toBe('test[:16]');
    expect(parse(applyOverrides(base(), ['dataset.train_split=[:5]'])).dataset.train_split).toBe('[:5]');
    expect(parseOverride('model.agents=[/m/a]').value).toEqual(['/m/a']);
    expect(() => parse(applyOverrides(base(), ['dataset.path=[x]']))).toThrow(/dataset\.path/);
  });
});

describe('config files', () => {
  test('YAML and JSON; syntax errors name the line', () => {
    expect(parseConfigText('seed: 3\n')).toEqual({ seed: 3 });
    expect(parseConfigText('{"seed": 3}')).toEqual({ seed: 3 });
    expect(parseConfigText('')).toEqual({});
    expect(() => parseConfigText('model:\n  a: [1, 2\n', 'x.yaml')).toThrow(/invalid config \(x\.yaml\)/);
    expect(() => parseConfigText('seed: 1\nseed: 2\n')).toThrow(/(Map keys must be unique|duplicate)/i);
    expect(() => parseConfigText('- 1\n- 2\n')).toThrow(/must be a mapping/);
  });

  test('NaN and infinities are named as such, not as null', () => {
    expect(issues(parseConfigText('model: {agent_model: /m/a}\ndataset: {task: toy-coord}\nmagrpo: {agent_learning_rate: .nan, top_p: .inf}\n'))).toEqual([
      'magrpo.agent_learning_rate: agent_learning_rate must be a finite number >= 0 (got NaN)',
      expect.stringMatching(/^magrpo\.top_p: .*\(got Infinity\)$/),
    ]);
  });

  test('a non-UTF-8 config file is refused with the byte offset, not read as a garbled key', () => {
    const dir = mkdtempSync(join(tmpdir(), 'comlrl-cfg-'));
    try {
      const file = join(dir, 'latin1.yaml');
      // "seed: 1\n" then the key "modèle" in Latin-1 (è = 0xE8 at offset 8 + 3 = 11).
      writeFileSync(file, Buffer.concat([Buffer.from('seed: 1\nmod'), Buffer.from([0xe8]), Buffer.from('le: x\n')]));
      expect(() => readConfigFile(file)).toThrow(`invalid config (${file}):\n  - (file): ${file}: invalid UTF-8 at byte offset 11 (line 2, column 4: byte 0xe8); save the file as UTF-8`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a valid config: defaults, model sampling merged into the trainer, seed', () => {
    const c = parse({ ...base(), model: { agent_model: '/m/a', temperature: 0.7, top_p: 0.9, top_k: null }, seed: 9 });
    expect(c.trainer).toBe('magrpo');
    expect(c.trainerConfig).toMatchObject({ temperature: 0.7, top_p: 0.9, top_k: null, seed: 9, num_generations: 4 });
    expect(c.output).toMatchObject({ save_steps: 0, save_final_model: true, verbose: false, plots: true });
    expect(c.rewardProcessor).toEqual({ enabled: true, scale: 1, shift: 0 });
    // The trainer section wins over the model section.
    expect(parse({ ...base(), model: { agent_model: '/m', temperature: 0.7 }, magrpo: { temperature: 0.3 } }).trainerConfig.temperature).toBe(0.3);
  });

  test('CoMLRL section names iac / maac are aliases', () => {
    expect(parse({ ...base(), magrpo: undefined, iac: { num_turns: 1 } }).trainer).toBe('collm-dc');
    expect(parse({ ...base(), magrpo: undefined, maac: { num_turns: 1 } }).trainer).toBe('collm-cc');
    const doc = runConfigToDocument(parse({ ...base(), magrpo: undefined, maac: { num_turns: 1 } }));
    expect(doc).toHaveProperty('collm_cc');
    // The document round-trips.
    expect(parse(doc).trainerConfig).toEqual(parse(doc).trainerConfig);
  });

  test('errors name every bad key', () => {
    expect(issues({ ...base(), modle: {} })).toEqual([expect.stringMatching(/^modle: unknown key \(allowed here: model, dataset, magrpo/)]);
    expect(issues({ ...base(), output: { save_step: 3 } })).toEqual([expect.stringMatching(/^output\.save_step: unknown key \(allowed here: dir, save_steps/)]);
    expect(issues({ ...base(), task: { spider: { num: 3, atk: 1 } } })).toContainEqual(expect.stringMatching(/^task\.spider\.atk: unknown key \(allowed here: num, atk_low, atk_high\)/));
    expect(issues({ ...base(), output: { save_steps: -1 } })).toEqual(['output.save_steps: output.save_steps must be an integer >= 0 (got -1)']);
    expect(issues({ ...base(), model: { agents: '/m/a' } })[0]).toMatch(/^model\.agents: model\.agents must be a list of model directories/);
    expect(issues({ ...base(), backend: 'cuda' })[0]).toMatch(/^backend: backend must be one of auto, wasm, cpu, tensorflow, tensorflow-gpu, torch, webgpu/);
    expect(issues({ ...base(), magrpo: { num_turns: 0, joint_mode: 'crossed' } })).toEqual([
      expect.stringMatching(/^magrpo\.num_turns: num_turns must be an integer >= 1 \(got 0\)/),
      expect.stringMatching(/^magrpo\.joint_mode: joint_mode must be one of 'aligned', 'cross'/),
    ]);
    expect(issues({ ...base(), magrpo: { numTurns: 2 } })[0]).toMatch(/^magrpo\.numTurns: unknown key \(allowed here: num_train_epochs/);
    expect(issues({ ...base(), magrpo: undefined })[0]).toMatch(/missing trainer section: add one of magrpo:, collm_dc: \(alias iac:\), collm_cc: \(alias maac:\), mareinforce:, maremax:, marloo:, centralized_magrpo:, madpo: or marlhf:/);
    expect(issues({ ...base(), collm_cc: {} })[0]).toMatch(/^magrpo, collm_cc: exactly one trainer section is allowed/);
    expect(issues({ ...base(), model: { agent_model: '/a', agents: ['/b'] } })[0]).toMatch(/^model\.agents: set either model\.agent_model/);
    expect(issues({ ...base(), model: { agent_model: '/a', critic_model: '/c' } })[0]).toMatch(/^model\.critic_model: MAGRPO has no critic/);
    expect(issues({ ...base(), external: { mode: 'level_feedback' } })[0]).toMatch(/^external\.mode: task 'toy-coord' has no external feedback modes/);
    expect(issues({ ...base(), dataset: { task: 'housebuild' }, external: { mode: 'level_feedback' } })[0]).toMatch(/^external\.mode: must be one of 'score_feedback'/);
    expect(issues({ ...base(), task: { max_commands: 10 } })[0]).toMatch(/^task\.max_commands: a HouseBuild option; dataset\.task is 'toy-coord'/);
    expect(issues({ ...base(), seed: 1, magrpo: { seed: 2 } })[0]).toMatch(/^magrpo\.seed: differs from the top-level seed/);
    expect(issues({ ...base(), collm_dc: undefined, magrpo: undefined, iac: { num_turns: 2, num_generations: 4 } })[0]).toMatch(/^iac\.num_generations: num_generations must be 1 when num_turns > 1/);
  });

  test('the identity hash ignores output and backend, not hyperparameters', () => {
    const a = parse({ ...base(), output: { dir: 'x', verbose: true }, backend: 'cpu' });
    const b = parse({ ...base(), output: { dir: 'y' } });
    const c = parse({ ...base(), magrpo: { num_turns: 1, agent_learning_rate: 1e-4 } });
    expect(configHash(runConfigIdentity(a))).toBe(configHash(runConfigIdentity(b)));
    expect(configHash(runConfigIdentity(a))).not.toBe(configHash(runConfigIdentity(c)));
  });

  test('memory.offload_frozen_layers reaches the library setting (auto by default)', () => {
    expect(memorySettingsOf(parse(base()).memory).offloadFrozenLayers).toBe('auto');
    expect(memorySettingsOf(parse({ ...base(), memory: { offload_frozen_layers: true } }).memory).offloadFrozenLayers).toBe(true);
    expect(memorySettingsOf(parse({ ...base(), memory: { offload_frozen_layers: false } }).memory).offloadFrozenLayers).toBe(false);
    expect(issues({ ...base(), memory: { offload_frozen_layers: 'yes' } })[0]).toMatch(/^memory\.offload_frozen_layers: memory\.offload_frozen_layers must be 'auto' or true or false/);
  });
});
