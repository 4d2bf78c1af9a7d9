/**
 * LoRA through `comlrl train`: agents (and a CoLLM-CC critic) on one frozen base, PEFT-format
 * adapters in checkpoints and the final save, the merged model beside them, and exact resume:
 * a run stopped part-way and resumed ends with the same adapter bytes as an uninterrupted run.
 */
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parse, stringify } from 'yaml';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import { parseConfigText } from '../src/config/load.js';
import { ConfigError, parseRunConfig } from '../src/config/schema.js';
import { loadCausalLM } from '../src/model/load.js';
import { liveFrozenBases } from '../src/model/lora/base.js';
import { loraSectionSchema, loraSettings } from '../src/model/lora/config.js';
import { loadAgents } from '../cli/trainer.js';
import { TRAINER_CONFIG_SCHEMAS } from '../cli/schemas.js';
import { cli, tempDir, tinyModels, toyConfigYaml } from './cli-helpers.js';

let root: string;
let cleanup: () => Promise<void>;
let base: string;

const LORA = { r: 4, lora_alpha: 8, lora_dropout: 0.1, target_modules: 'all-linear', save_merged: true };

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend('wasm');
  ({ dir: root, cleanup } = await tempDir('lora-cli'));
  [base] = await tinyModels(root, ['base']);
});
afterAll(async () => cleanup());

/** The toy config with both agents on `base` and a LoRA section. */
function loraYaml(out: string, trainer: 'magrpo' | 'collm_cc' | 'collm_dc', section: Record<string, unknown> = {}): string {
  const doc = parse(toyConfigYaml({ agents: [base, base], trainer, out, trainItems: 5, section })) as { model: Record<string, unknown> };
  delete doc.model.agents;
  doc.model.agent_model = base;
  doc.model.lora = LORA;
  return stringify(doc);
}

async function train(name: string, yaml: string, extra: string[] = []): Promise<string> {
  const out = join(root, name);
  const file = join(root, `${name}.yaml`);
  await writeFile(file, yaml.replaceAll('__OUT__', out));
  const r = await cli(['train', '--config', file, ...extra]);
  expect(r.code, r.err).toBe(0);
  return out;
}

describe.each([
  { name: 'magrpo', trainer: 'magrpo' as const, section: { rollout_buffer_size: 3, train_batch_size: 2, num_generations: 3 }, files: ['agent_0', 'agent_1'] },
  { name: 'collm-cc', trainer: 'collm_cc' as const, section: { update_epochs: 2 }, files: ['agent_0', 'agent_1', 'critic'] },
  // Separate critics, one per agent: four models on one base.
  { name: 'collm-dc', trainer: 'collm_dc' as const, section: {}, files: ['agent_0', 'agent_1', 'agent_0/critic', 'agent_1/critic'] },
])('$name with LoRA: interrupted and resumed equals uninterrupted', ({ name, trainer, section, files }) => {
  let straight: string;
  let resumed: string;

  beforeAll(async () => {
    straight = await train(`${name}-straight`, loraYaml('__OUT__', trainer, section));
    resumed = await train(`${name}-stopped`, loraYaml('__OUT__', trainer, section), ['--stop-after', '3']);
  });

  test('checkpoints and the final save hold PEFT adapters, not full weights', async () => {
    const ck = join(resumed, 'checkpoints', 'step-000002', 'agent_0');
    const names = await readdir(ck);
    expect(names).toEqual(expect.arrayContaining(['adapter_config.json', 'adapter_model.safetensors', 'comlrl_adapter_state.json']));
    expect(names).not.toContain('model.safetensors');
    // Dropout ran during the losses (train mode) and its stream position is saved for the resume.
    const state = JSON.parse(await readFile(join(straight, 'final', 'agent_0', 'comlrl_adapter_state.json'), 'utf8')) as { dropout_passes: number };
    expect(state.dropout_passes).toBeGreaterThan(0);
    const fin = await readdir(join(straight, 'final', 'agent_0'));
    expect(fin).toEqual(expect.arrayContaining(['adapter_config.json', 'adapter_model.safetensors', 'merged']));
    const cfg = JSON.parse(await readFile(join(straight, 'final', 'agent_0', 'adapter_config.json'), 'utf8')) as Record<string, unknown>;
    expect(cfg).toMatchObject({ peft_type: 'LORA', r: 4, lora_alpha: 8, base_model_name_or_path: base, target_modules: ['down_proj', 'gate_proj', 'k_proj', 'o_proj', 'q_proj', 'up_proj', 'v_proj'] });
  });

  test('resume finishes with bit-identical adapters (and critic head)', async () => {
    const r = await cli(['train', '--resume', resumed]);
    expect(r.code, r.err).toBe(0);
    expect(r.err).toMatch(/resuming .*step-000003 at step 3\/10/);
    for (const d of files) {
      const a = await readFile(join(straight, 'final', d, 'adapter_model.safetensors'));
      const b = await readFile(join(resumed, 'final', d, 'adapter_model.safetensors'));
      expect(b.equals(a), d).toBe(true);
      // Training moved the adapter off B = 0.
      const init = await loadCausalLM(base, { adapter: join(straight, 'final', d) });
      try {
        const bVals = await Promise.all(init.trainableVariables().filter((_, i) => i % 2 === 1).map((v) => v.data()));
        expect(bVals.some((x) => Array.from(x).some((v) => v !== 0))).toBe(true);
      } finally {
        init.dispose();
      }
    }
    for (const d of files.filter((f) => f.endsWith('critic'))) {
      const a = await readFile(join(straight, 'final', d, 'value_head.safetensors'));
      const b = await readFile(join(resumed, 'final', d, 'value_head.safetensors'));
      expect(b.equals(a), d).toBe(true);
    }
  });

  test('the merged model gives the adapter model its log-probs', async () => {
    const withAdapter = await loadCausalLM(base, { adapter: join(straight, 'final', 'agent_1') });
    const merged = await loadCausalLM(join(straight, 'final', 'agent_1', 'merged'));
    try {
      const a = await withAdapter.tokenLogProbs([[1, 2, 3]], [[4, 5, 6, 7]]);
      const b = await merged.tokenLogProbs([[1, 2, 3]], [[4, 5, 6, 7]]);
      a[0].forEach((v, j) => expect(Math.abs(v - b[0][j])).toBeLessThan(1e-4));
    } finally {
      withAdapter.dispose();
      merged.dispose();
    }
  });
});

describe('LoRA config', () => {
  const parseYaml = (y: string) => parseRunConfig(parseConfigText(y, 'x.yaml'), TRAINER_CONFIG_SCHEMAS, 'x.yaml');

  test('agents of one checkpoint share one frozen base; the section is validated by key', async () => {
    const config = parseYaml(loraYaml(join(root, 'unused'), 'magrpo'));
    const agents = await loadAgents(config, [base, base]);
    try {
      expect(agents[0].model.loraInfo?.r).toBe(4);
      expect((await liveFrozenBases()).length).toBe(1);
      // A critic on the same checkpoint (as buildTrainer loads it) joins the same base.
      const critic = await loadCausalLM(base, { lora: { settings: loraSettings(loraSectionSchema.parse(LORA)), seed: 'c' } });
      expect((await liveFrozenBases()).length).toBe(1);
      critic.dispose();
    } finally {
      for (const a of agents) a.model.dispose();
    }
    expect(await liveFrozenBases()).toEqual([]);
    const bad = loraYaml(join(root, 'unused'), 'magrpo').replace('lora_alpha: 8', 'lora_alpha: 8\n    modules_to_save: [lm_head]\n    rank: 3');
    let err: unknown;
    try {
      parseYaml(bad);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const keys = (err as ConfigError).issues.map((i) => i.key);
    expect(keys).toEqual(expect.arrayContaining(['model.lora.modules_to_save', 'model.lora.rank']));
    expect(() => parseYaml(loraYaml(join(root, 'unused'), 'magrpo').replace('lora:', 'critic_lora: false\n  lora:'))).toThrow(/model.critic_lora: MAGRPO has no critic/);
  });
});
