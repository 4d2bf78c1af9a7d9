/**
 * CoMLRL's parallelism and device keys (`parallel_training`, `agent_devices`, `critic_devices`,
 * `reference_devices`): parsed in every trainer section CoMLRL has them in, validated as CoMLRL
 * validates them, every refusal naming its key; `mp` and roles on different devices are refused
 * with what runs today; a CoMLRL-style config whose devices are all the run's device trains as
 * without them, and absent keys leave the config hash as it was.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { ConfigError, parseRunConfig } from '../src/config/schema.js';
import { runDeviceIssues } from '../src/config/devices.js';
import { findTrainerSection, sectionRoles, type TrainerSectionFields } from '../src/config/trainers.js';
import '../trainers/builtin.js';
import { parseCoLLMCCConfig } from '../trainers/collm/config.js';
import { parseMAGRPOConfig } from '../trainers/magrpo/config.js';
import { runConfigHash } from '../cli/training/run-dir.js';
import { backendUnderTest } from './backend-under-test.js';
import { cli, toyConfigYaml, trainerRows, trainRun, useCliWorkspace } from './cli-helpers.js';

const base = { model: { agent_model: '/m' }, dataset: { task: 'toy-coord' } };

/** The issues of a config document, as `key: message` lines (none: []). */
function issues(doc: Record<string, unknown>): string[] {
  try {
    parseRunConfig(doc);
    return [];
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues.map((i) => `${i.key}: ${i.message}`);
  }
}

describe('parsing: the keys in every trainer section, as CoMLRL reads them', () => {
  const sections = ['magrpo', 'mareinforce', 'maremax', 'marloo', 'centralized_magrpo', 'madpo', 'marlhf', 'collm_dc', 'iac', 'collm_cc', 'maac'];

  test.each(sections)('%s: none (and CoMLRL\'s null) with the run\'s device in every key parses', (section) => {
    for (const parallel_training of ['none', 'null', null, 'NONE']) {
      const config = parseRunConfig({ ...base, [section]: { parallel_training, agent_devices: ['cpu', 'cpu'], reference_devices: 'cpu' } });
      expect(config.trainerConfig.parallel_training).toBe('none');
      expect(config.trainerConfig.agent_devices).toEqual(['cpu', 'cpu']);
    }
  });

  test.each(sections)("%s: parallel_training other than none / mp is refused by name (CoMLRL's auto and ddp included)", (section) => {
    for (const mode of ['auto', 'ddp', 'invalid']) {
      expect(issues({ ...base, [section]: { parallel_training: mode } })[0]).toMatch(new RegExp(`^${section}\\.parallel_training: parallel_training must be 'none' or 'mp'`));
    }
  });

  test('critic_devices only where CoMLRL has it (IAC / MAAC)', () => {
    expect(parseRunConfig({ ...base, collm_dc: { critic_devices: 'cpu' } }).trainerConfig.critic_devices).toBe('cpu');
    expect(parseRunConfig({ ...base, maac: { critic_devices: ['cpu'] } }).trainerConfig.critic_devices).toEqual(['cpu']);
    expect(issues({ ...base, magrpo: { critic_devices: 'cpu' } })[0]).toMatch(/^magrpo\.critic_devices: unknown key/);
  });

  test('unknown device names and an empty list are refused naming the key', () => {
    expect(issues({ ...base, magrpo: { agent_devices: 'gpu:0' } })[0]).toMatch(/^magrpo\.agent_devices: agent_devices must be a torch device/);
    expect(issues({ ...base, magrpo: { agent_devices: ['cpu', 'mps'] } })[0]).toMatch(/^magrpo\.agent_devices\[1\]: each entry of agent_devices must be a torch device: cpu, cuda or cuda:N/);
    expect(issues({ ...base, magrpo: { agent_devices: [] } })[0]).toMatch(/^magrpo\.agent_devices: agent_devices must not be an empty list/);
    expect(issues({ ...base, collm_dc: { critic_devices: 'cuda:x' } })[0]).toMatch(/^collm_dc\.critic_devices: critic_devices must be a torch device/);
    expect(issues({ ...base, magrpo: { reference_devices: ['tpu'] } })[0]).toMatch(/^magrpo\.reference_devices\[0\]: each entry of reference_devices must be a torch device/);
  });

  test("mp requires agent_devices (and critic_devices where there are critics), as CoMLRL; then mp itself is refused with what runs today", () => {
    const magrpo = issues({ ...base, magrpo: { parallel_training: 'mp' } });
    expect(magrpo[0]).toMatch(/^magrpo\.agent_devices: parallel_training: mp requires agent_devices/);
    expect(magrpo[1]).toMatch(/^magrpo\.parallel_training: parallel_training: mp .* is not supported by comlrl; what runs today is parallel_training: none with every role on one device/);
    const iac = issues({ ...base, iac: { parallel_training: 'mp', agent_devices: 'cpu' } });
    expect(iac[0]).toMatch(/^iac\.critic_devices: parallel_training: mp requires critic_devices/);
    const maac = issues({ ...base, maac: { parallel_training: 'mp', critic_devices: 'cpu' } });
    expect(maac[0]).toMatch(/^maac\.agent_devices: parallel_training: mp requires agent_devices/);
    // Every device given: only mp itself is refused.
    expect(issues({ ...base, collm_cc: { parallel_training: 'mp', agent_devices: 'cpu', critic_devices: 'cpu' } })).toEqual([expect.stringMatching(/^collm_cc\.parallel_training: parallel_training: mp /)]);
    // MARLHF with CoLLM's update: refused once, under the MARLHF section's key.
    expect(issues({ ...base, marlhf: { rl_algorithm: 'maac', parallel_training: 'mp', agent_devices: 'cpu' } })).toEqual([expect.stringMatching(/^marlhf\.parallel_training: parallel_training: mp /)]);
    // Value heads on the actors (no critic LMs): mp needs no critic_devices.
    expect(issues({ ...base, collm_dc: { parallel_training: 'mp', agent_devices: 'cpu', use_separate_critic: false } })).toEqual([expect.stringMatching(/^collm_dc\.parallel_training: parallel_training: mp /)]);
  });

  test('a config built in code (the library parsers) refuses mp too, naming the field', () => {
    expect(() => parseMAGRPOConfig({ parallel_training: 'mp' })).toThrow(/invalid MAGRPO config: parallel_training: mp requires agent_devices.*; parallel_training: mp .* is not supported by comlrl/);
    expect(() => parseCoLLMCCConfig({ parallel_training: 'mp', agent_devices: 'cpu', critic_devices: 'cpu' })).toThrow(/parallel_training: mp .* is not supported by comlrl/);
    expect(parseMAGRPOConfig({ parallel_training: 'none', agent_devices: 'cpu' })).toMatchObject({ parallel_training: 'none', agent_devices: 'cpu' });
  });

  test('roles on different devices are refused naming the first key that differs', () => {
    expect(issues({ ...base, magrpo: { agent_devices: ['cuda:0', 'cuda:1'] } })).toEqual([
      expect.stringMatching(/^magrpo\.agent_devices\[1\]: is cuda:1 but magrpo\.agent_devices\[0\] is cuda:0: roles on different devices are not supported by comlrl; what runs today/),
    ]);
    expect(issues({ ...base, collm_cc: { agent_devices: 'cpu', critic_devices: 'cuda' } })[0]).toMatch(/^collm_cc\.critic_devices: is cuda but collm_cc\.agent_devices is cpu/);
    // `cuda` is device 0, as torch reads it.
    expect(issues({ ...base, collm_cc: { agent_devices: 'cuda', critic_devices: ['cuda:0'] } })).toEqual([]);
    // A reference is placed only when one is loaded: with the reference KL on (or MADPO).
    expect(issues({ ...base, magrpo: { agent_devices: 'cpu', reference_devices: 'cuda:1' } })).toEqual([]);
    expect(issues({ ...base, magrpo: { agent_devices: 'cpu', reference_devices: 'cuda:1', reference_kl_enabled: true } })[0]).toMatch(/^magrpo\.reference_devices: is cuda:1 but magrpo\.agent_devices is cpu/);
    expect(issues({ ...base, madpo: { agent_devices: 'cpu', reference_devices: ['cuda:1'] } })[0]).toMatch(/^madpo\.reference_devices\[0\]: is cuda:1/);
  });

  test('critic_devices where the section trains no critic model would be ignored: refused naming the field that says so', () => {
    expect(issues({ ...base, collm_dc: { use_separate_critic: false, critic_devices: 'cpu' } })[0]).toMatch(/^collm_dc\.critic_devices: would be ignored: collm_dc\.use_separate_critic is false/);
  });
});

describe('once the backend is up and the agents are counted', () => {
  const sectionOf = (name: string, section: Record<string, unknown>): { fields: TrainerSectionFields; roles: ReturnType<typeof sectionRoles> } => {
    const config = parseRunConfig({ ...base, [name]: section });
    return { fields: config.trainerConfig, roles: sectionRoles(findTrainerSection(config.trainer)!) };
  };
  const wasm = { backend: 'wasm', device: 'cpu', cudaDevices: 0 };

  test('a list must have 1 entry or one per model (CoMLRL resolve_devices)', () => {
    const { fields, roles } = sectionOf('magrpo', { agent_devices: ['cpu', 'cpu', 'cpu'] });
    expect(runDeviceIssues('magrpo', fields, roles, 2, wasm)).toEqual([{ key: 'magrpo.agent_devices', message: 'has 3 entries; it needs 1 (for all) or 2 (one per agent)' }]);
    expect(runDeviceIssues('magrpo', fields, roles, 3, wasm)).toEqual([]);
    const cc = sectionOf('collm_cc', { critic_devices: ['cpu', 'cpu'] });
    expect(runDeviceIssues('collm_cc', cc.fields, cc.roles, 2, wasm)[0]).toMatchObject({ key: 'collm_cc.critic_devices', message: 'has 2 entries; it needs 1 (for all) or 1 (one per critic)' });
    const one = sectionOf('collm_dc', { critic_devices: ['cpu'] });
    expect(runDeviceIssues('collm_dc', one.fields, one.roles, 2, wasm)).toEqual([]);
  });

  test('off torch, a device other than cpu is refused naming the key and the torch backend', () => {
    const { fields, roles } = sectionOf('magrpo', { agent_devices: 'cuda' });
    expect(runDeviceIssues('magrpo', fields, roles, 2, wasm)).toEqual([
      { key: 'magrpo.agent_devices', message: expect.stringMatching(/^is cuda, but the wasm backend runs every model on its one device .* devices per role need the torch backend \(backend: torch\)/) },
    ]);
    expect(runDeviceIssues('magrpo', fields, roles, 2, { backend: 'tensorflow', device: 'cpu', cudaDevices: 0 })[0].message).toMatch(/the tensorflow backend/);
  });

  test('on torch, a GPU index beyond the visible ones is refused naming the key and the index', () => {
    const { fields, roles } = sectionOf('magrpo', { agent_devices: ['cuda:3', 'cuda:3'], reference_devices: 'cuda:3', reference_kl_enabled: true });
    const torch = { backend: 'torch', device: 'cuda:0', cudaDevices: 2 };
    // Parsing refuses only a difference between roles; the index is checked against the GPUs here, per entry.
    expect(runDeviceIssues('magrpo', fields, roles, 2, torch)).toEqual(
      ['agent_devices[0]', 'agent_devices[1]', 'reference_devices'].map((key) => ({ key: `magrpo.${key}`, message: 'is cuda:3, GPU index 3, but torch sees 2 CUDA devices (cuda:0..cuda:1); give a visible device' })),
    );
    const cpuOnly = sectionOf('magrpo', { agent_devices: 'cuda:0' });
    expect(runDeviceIssues('magrpo', cpuOnly.fields, cpuOnly.roles, 2, { backend: 'torch', device: 'cpu', cudaDevices: 0 })[0].message).toMatch(/GPU index 0, but torch sees no CUDA device/);
  });

  test("on torch, a visible device other than the run's is refused: placement per role is not built", () => {
    const { fields, roles } = sectionOf('magrpo', { agent_devices: 'cuda:1' });
    expect(runDeviceIssues('magrpo', fields, roles, 2, { backend: 'torch', device: 'cuda:0', cudaDevices: 2 })).toEqual([
      { key: 'magrpo.agent_devices', message: expect.stringMatching(/^is cuda:1, but this run's models are on cuda:0 .* what runs today is parallel_training: none/) },
    ]);
    expect(runDeviceIssues('magrpo', fields, roles, 2, { backend: 'torch', device: 'cuda:1', cudaDevices: 2 })).toEqual([]);
  });
});

describe('the config hash', () => {
  test('absent keys, and the keys written at their defaults, leave it as it was', () => {
    const plain = runConfigHash(parseRunConfig({ ...base, magrpo: {} }));
    expect(runConfigHash(parseRunConfig({ ...base, magrpo: { parallel_training: 'none', agent_devices: null, reference_devices: null } }))).toBe(plain);
    expect(runConfigHash(parseRunConfig({ ...base, magrpo: { parallel_training: null } }))).toBe(plain);
    const dc = runConfigHash(parseRunConfig({ ...base, collm_dc: {} }));
    expect(runConfigHash(parseRunConfig({ ...base, collm_dc: { critic_devices: null, parallel_training: 'none' } }))).toBe(dc);
  });
});

describe('through the CLI', () => {
  const ws = useCliWorkspace('parallel-devices', { backend: backendUnderTest('wasm') });

  test("a CoMLRL-style config with parallel_training: none and agent_devices [cpu, cpu] trains one item as without the keys", async () => {
    const plain = await trainRun(ws.root, 'plain', (out) => toyConfigYaml({ agents: ws.agents, out, trainItems: 1, section: { num_train_epochs: 1 } }));
    const comlrl = await trainRun(ws.root, 'comlrl', (out) => toyConfigYaml({ agents: ws.agents, out, trainItems: 1, section: { num_train_epochs: 1, parallel_training: 'none', agent_devices: ['cpu', 'cpu'] } }));
    expect(trainerRows(comlrl)).toEqual(trainerRows(plain));
    for (const i of [0, 1]) {
      const a = await readFile(join(plain, 'final', `agent_${i}`, 'model.safetensors'));
      const b = await readFile(join(comlrl, 'final', `agent_${i}`, 'model.safetensors'));
      expect(b.equals(a), `agent_${i}`).toBe(true);
    }
  }, 300_000);

  test('a device the run cannot honour stops `comlrl train` before any model loads, naming the key', async () => {
    const file = join(ws.root, 'three.yaml');
    await writeFile(file, toyConfigYaml({ agents: ws.agents, out: join(ws.root, 'three'), trainItems: 1, section: { agent_devices: ['cpu', 'cpu', 'cpu'] } }));
    const r = await cli(['train', '--config', file]);
    expect(r.code).not.toBe(0);
    expect(r.err).toMatch(/magrpo\.agent_devices: has 3 entries; it needs 1 \(for all\) or 2 \(one per agent\)/);
  }, 120_000);
});
