/**
 * Every full model comlrl writes carries its tokenizer: a merged LoRA model (`merged/` beside an
 * agent's or a critic's adapter) and a fully fine-tuned agent hold the tokenizer files of the model
 * they came from, byte for byte, so the folder loads alone (comlrl's `loadTokenizer`, and
 * transformers' `AutoTokenizer`, which reads the same files) and encodes as the original did.
 */
import { existsSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ToyCoordEnv, toyTrainTasks, toyWords } from '../envs/toy/index.js';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import { CRITIC_LAYOUT_WORDS } from '../src/critic/inputs.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { loadCausalLM } from '../src/model/load.js';
import { loraSectionSchema, loraSettings } from '../src/model/lora/config.js';
import { createTinyModel } from '../src/model/tiny.js';
import { TOKENIZER_FILE_NAMES } from '../src/tokenizer/files.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import type { Tokenizer } from '../src/tokenizer/types.js';
import { CoLLMCCTrainer } from '../trainers/collm/centralized.js';
import { writeFinalModel } from '../trainers/core/checkpoint.js';
import { agentDir } from '../trainers/core/save.js';
import { backendUnderTest } from './backend-under-test.js';
import { tempDir } from './cli-helpers.js';

const CONFIG = { num_turns: 2, num_generations: 1, max_new_tokens: 2, temperature: 1, top_p: 1, top_k: 0, num_train_epochs: 1, rollout_buffer_size: 3, eval_interval: 0, early_termination_threshold: null, seed: 3 };
const TEXTS = ['red blue green', 'the cat sat on the mat, twice!', 'zzz unknown wörds 42', '<|im_start|>user\nhi<|im_end|>'];

let root: string;
let cleanup: () => Promise<void>;
/** Agent 0 on a byte-level BPE base that also has slow-tokenizer files; agent 1 and the critic word-level. */
let bases: string[];
let criticBase: string;

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend(backendUnderTest('wasm'));
  ({ dir: root, cleanup } = await tempDir('saved-tokenizer'));
  bases = [join(root, 'bpe'), join(root, 'word')];
  await createTinyModel({ dir: bases[0], arch: 'qwen3', seed: 1, tokenizer: 'bpe', hiddenSize: 32, numLayers: 1 });
  await createTinyModel({ dir: bases[1], arch: 'qwen3', seed: 2, tokenizer: 'word', words: [...toyWords], hiddenSize: 32, numLayers: 1 });
  // A Hugging Face checkpoint usually has the slow tokenizer's vocab.json / merges.txt too: they travel along.
  const json = JSON.parse(readFileSync(join(bases[0], 'tokenizer.json'), 'utf8')) as { model: { vocab: Record<string, number>; merges: (string | string[])[] } };
  await writeFile(join(bases[0], 'vocab.json'), JSON.stringify(json.model.vocab));
  await writeFile(join(bases[0], 'merges.txt'), ['#version: 0.2', ...json.model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : m))].join('\n') + '\n');
  criticBase = join(root, 'critic');
  await createTinyModel({ dir: criticBase, arch: 'qwen3', seed: 3, tokenizer: 'word', words: [...new Set([...toyWords, ...CRITIC_LAYOUT_WORDS])], hiddenSize: 32, numLayers: 1 });
});
afterAll(async () => cleanup());

/** The tokenizer files of `dir`, by name. */
function tokenizerFiles(dir: string): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  for (const name of TOKENIZER_FILE_NAMES) if (existsSync(join(dir, name))) out.set(name, readFileSync(join(dir, name)));
  return out;
}

/** `saved` holds `source`'s tokenizer files byte for byte and, loaded from that folder alone, encodes as `source` does. */
async function expectSameTokenizer(saved: string, source: string): Promise<void> {
  const want = tokenizerFiles(source);
  expect([...tokenizerFiles(saved).keys()].sort(), saved).toEqual([...want.keys()].sort());
  for (const [name, bytes] of want) expect(readFileSync(join(saved, name)).equals(bytes), `${saved}/${name}`).toBe(true);
  const [a, b]: Tokenizer[] = [await loadTokenizer(source), await loadTokenizer(saved)];
  for (const t of TEXTS) expect(b.encode(t), t).toEqual(a.encode(t));
  for (const k of ['vocabSize', 'eosTokenId', 'padTokenId', 'bosTokenId'] as const) expect(b[k], k).toBe(a[k]);
}

async function ccTrainer(lora: boolean): Promise<{ trainer: CoLLMCCTrainer<unknown, unknown>; dispose: () => void }> {
  const section = loraSectionSchema.parse({ r: 2, lora_alpha: 4, target_modules: 'all-linear' });
  const options = (seed: string) => (lora ? { lora: { settings: loraSettings(section), seed } } : {});
  const agents: Agent[] = [];
  for (const i of [0, 1]) agents.push({ name: `agent_${i}`, model: await loadCausalLM(bases[i], options(`a${i}`)), tokenizer: await loadTokenizer(bases[i]), chat: false });
  const critic = { name: 'critic', model: await loadCausalLM(criticBase, options('c')), tokenizer: await loadTokenizer(criticBase) };
  const trainer = new CoLLMCCTrainer<unknown, unknown>({ agents, critic, env: new ToyCoordEnv({ numTurns: 2 }), trainTasks: toyTrainTasks.slice(0, 2), config: CONFIG });
  return {
    trainer,
    dispose: () => {
      trainer.dispose();
      for (const a of agents) a.model.dispose();
      critic.model.dispose();
    },
  };
}

describe('saved models carry their tokenizer', () => {
  test('merged/ of every LoRA agent and critic: the base tokenizer files byte for byte, the same token ids from that folder alone', async () => {
    const { trainer, dispose } = await ccTrainer(true);
    try {
      const dir = join(root, 'final-lora');
      await writeFinalModel(trainer, dir, { merged: { agents: true, critics: true } });
      for (const i of [0, 1]) await expectSameTokenizer(join(agentDir(dir, i), 'merged'), bases[i]);
      await expectSameTokenizer(join(dir, 'critic', 'merged'), criticBase);
      // The merged folder is a whole model: weights and tokenizer load from it alone.
      const merged = await loadCausalLM(join(agentDir(dir, 0), 'merged'));
      merged.dispose();
    } finally {
      dispose();
    }
  }, 120_000);

  test('fully fine-tuned agents and critic: agent_i/ and critic/ hold the tokenizer files byte for byte', async () => {
    const { trainer, dispose } = await ccTrainer(false);
    try {
      const dir = join(root, 'final-full');
      await trainer.save(dir);
      for (const i of [0, 1]) await expectSameTokenizer(agentDir(dir, i), bases[i]);
      await expectSameTokenizer(join(dir, 'critic'), criticBase);
    } finally {
      dispose();
    }
  }, 120_000);
});
