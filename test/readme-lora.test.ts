/**
 * docs/lora.md's LoRA config (examples/lora.yaml: test/docs.test.ts keeps the page's block equal to
 * it), run as written (the model path and run directory pointed at temp dirs): agents and critic
 * train adapters on one base, and the final save holds PEFT adapters, the critic's value head and
 * the merged models.
 */
import { existsSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toyWords } from '../envs/toy/task.js';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import { loadCausalLM } from '../src/model/load.js';
import { createTinyModel } from '../src/model/tiny.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { cli, tempDir } from './cli-helpers.js';

const LORA_YAML = resolve(import.meta.dirname, '..', 'examples', 'lora.yaml');

function loraYaml(): string {
  return readFileSync(LORA_YAML, 'utf8');
}

let root: string;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend('wasm');
  ({ dir: root, cleanup } = await tempDir('readme-lora'));
});
afterAll(async () => cleanup());

describe('docs/lora.md LoRA example (examples/lora.yaml)', () => {
  it('trains, saves PEFT adapters for agents and critic, and merged models that load', async () => {
    const yaml = loraYaml();
    expect(yaml).toContain('/tmp/tiny');
    expect(yaml).toContain('runs/lora-toy');
    const tiny = join(root, 'tiny');
    // What the yaml's first comment line runs: comlrl tiny-model --arch qwen3 --tokenizer word --words toy
    await createTinyModel({ dir: tiny, arch: 'qwen3', seed: 0, tokenizer: 'word', words: [...toyWords] });
    const out = join(root, 'run');
    const file = join(root, 'lora.yaml');
    await writeFile(file, yaml.replaceAll('/tmp/tiny', tiny).replaceAll('runs/lora-toy', out));
    const r = await cli(['train', '--config', file]);
    expect(r.code, r.err).toBe(0);
    for (const d of ['agent_0', 'agent_1', 'critic']) {
      expect(existsSync(join(out, 'final', d, 'adapter_config.json')), d).toBe(true);
      expect(existsSync(join(out, 'final', d, 'adapter_model.safetensors')), d).toBe(true);
      expect(existsSync(join(out, 'final', d, 'model.safetensors')), d).toBe(false);
    }
    expect(existsSync(join(out, 'final', 'critic', 'value_head.safetensors'))).toBe(true);
    // `eval --checkpoint` loads the adapters onto the base their adapter_config.json names.
    const ev = await cli(['eval', '--config', file, '--checkpoint', join(out, 'final')]);
    expect(ev.code, ev.err).toBe(0);
    // merged/ is a whole model: its tokenizer loads from that folder alone and encodes as the base's.
    const [baseTok, mergedTok] = [await loadTokenizer(tiny), await loadTokenizer(join(out, 'final', 'critic', 'merged'))];
    for (const t of ['red blue green', 'zzz 42 <|im_end|>']) expect(mergedTok.encode(t), t).toEqual(baseTok.encode(t));
    expect(readFileSync(join(out, 'final', 'agent_0', 'merged', 'tokenizer.json')).equals(readFileSync(join(tiny, 'tokenizer.json')))).toBe(true);
    const merged = await loadCausalLM(join(out, 'final', 'agent_0', 'merged'));
    const adapted = await loadCausalLM(tiny, { adapter: join(out, 'final', 'agent_0') });
    try {
      expect(merged.loraInfo).toBeNull();
      expect(adapted.loraInfo?.modules).toHaveLength(4 * adapted.numLayers);
      const a = await merged.tokenLogProbs([[1, 2, 3]], [[4, 5]]);
      const b = await adapted.tokenLogProbs([[1, 2, 3]], [[4, 5]]);
      b[0].forEach((v, j) => expect(Math.abs(v - a[0][j])).toBeLessThan(1e-4));
    } finally {
      merged.dispose();
      adapted.dispose();
    }
  });
});
