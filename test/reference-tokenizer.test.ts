/**
 * A reference model scores the agent's token ids, so it must share the agent's tokenizer:
 * - `comlrl train` refuses `model.reference_model` with another tokenizer at load — the Qwen3
 *   tokenizer, a word vocabulary of the same size with other ids, a 9-token vocabulary smaller than
 *   the agent's — naming both folders and what differs, and leaves no run directory; a reference
 *   with the agent's tokenizer (other weights) trains;
 * - in the library, a trainer refuses an `Agent.reference` with fewer ids than the agent's
 *   tokenizer, and one whose `referenceTokenizer` differs from the agent's.
 */
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { stringify } from 'yaml';
import { toyTasks, toyTrainTasks, toyWords, ToyCoordEnv } from '../envs/toy/index.js';
import { loadAgent } from '../src/decpomdp/load-agent.js';
import { loadCausalLM } from '../src/model/load.js';
import { createTinyModel } from '../src/model/tiny.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { MADPOTrainer } from '../trainers/madpo/trainer.js';
import { MAGRPOTrainer } from '../trainers/magrpo/trainer.js';
import { cli, useCliWorkspace } from './cli-helpers.js';

const ws = useCliWorkspace('reference-tokenizer');

/** A tiny model with a word tokenizer over `words`. */
async function wordModel(name: string, words: readonly string[], seed = 7): Promise<string> {
  const dir = join(ws.root, name);
  await createTinyModel({ dir, arch: 'qwen3', seed, tokenizer: 'word', words: [...words], hiddenSize: 32, numLayers: 1 });
  return dir;
}

/** `comlrl train` of `trainer` on the toy task with `reference` as model.reference_model. */
async function train(name: string, trainer: 'madpo' | 'magrpo', reference: string): Promise<{ code: number; err: string; out: string }> {
  const out = join(ws.root, `${name}-run`);
  const file = join(ws.root, `${name}.yaml`);
  const common = { num_generations: 3, max_new_tokens: 2, num_train_epochs: 1, agent_learning_rate: 0.01, logging_steps: 1, eval_interval: 0 };
  const section = trainer === 'madpo' ? { ...common, train_batch_size: 2 } : { ...common, reference_kl_enabled: true };
  await writeFile(
    file,
    stringify({
      model: { agents: ws.agents, reference_model: reference, temperature: 1, top_p: 1, top_k: null },
      dataset: { task: 'toy-coord', train_split: '[:3]', eval_split: '[:2]' },
      [trainer]: section,
      output: { dir: out, save_steps: 10, plots: false, eval_before_after: false },
      seed: 3,
    }),
  );
  const r = await cli(['train', '--config', file]);
  return { code: r.code, err: r.err, out };
}

test('a reference with the Qwen3 tokenizer is refused at load naming both folders; no run directory is left', async () => {
  const qwen = join(ws.root, 'qwen3-ref');
  await createTinyModel({ dir: qwen, arch: 'qwen3', seed: 5, tokenizer: 'qwen3', hiddenSize: 16, numLayers: 1, numHeads: 2, numKvHeads: 1, intermediateSize: 32 });
  const agentVocab = (await loadTokenizer(ws.agents[0])).vocabSize;
  const qwenVocab = (await loadTokenizer(qwen)).vocabSize;
  const r = await train('qwen3', 'magrpo', qwen);
  expect(r.code).toBe(1);
  expect(r.err).toContain(`model.reference_model ${qwen} has another tokenizer than agent 0 (${ws.agents[0]}): their vocabularies have ${agentVocab} and ${qwenVocab} token ids`);
  expect(r.err).toContain('set model.reference_model to a model with the agent\'s tokenizer, or leave it unset');
  expect(existsSync(r.out)).toBe(false);
});

test('a reference whose vocabulary has the same size but other ids is refused, naming the first id that differs (MADPO)', async () => {
  // The toy words in reverse order: as many ids, each (past the special tokens) another word.
  const reversed = await wordModel('reversed', [...toyWords].reverse());
  const agentTok = await loadTokenizer(ws.agents[0]);
  const refTok = await loadTokenizer(reversed);
  expect(refTok.vocabSize).toBe(agentTok.vocabSize);
  let id = 0;
  while (agentTok.idToToken(id) === refTok.idToToken(id)) id++;
  const r = await train('reversed', 'madpo', reversed);
  expect(r.code).toBe(1);
  expect(r.err).toContain(`model.reference_model ${reversed} has another tokenizer than agent 0 (${ws.agents[0]}): token id ${id} is ${JSON.stringify(agentTok.idToToken(id))} in one and ${JSON.stringify(refTok.idToToken(id))} in the other`);
  expect(existsSync(r.out)).toBe(false);
});

test('a reference with a smaller vocabulary is refused at load, not at the first out-of-range id', async () => {
  const small = await wordModel('small', toyWords.slice(0, 4));
  const r = await train('small', 'madpo', small);
  expect(r.code).toBe(1);
  expect(r.err).toMatch(/model\.reference_model .*small has another tokenizer than agent 0 .*: their vocabularies have \d+ and \d+ token ids/);
  expect(r.err).not.toContain('outside');
  expect(existsSync(r.out)).toBe(false);
});

test("a reference with the agent's tokenizer and other weights trains", async () => {
  const same = await wordModel('same-tok', toyWords, 11);
  const [a, b] = [await loadTokenizer(same), await loadTokenizer(ws.agents[0])];
  expect(a.vocabSize).toBe(b.vocabSize);
  for (let id = 0; id < a.vocabSize; id++) expect(a.idToToken(id)).toBe(b.idToToken(id));
  const r = await train('same', 'madpo', same);
  expect(r.code, r.err).toBe(0);
  expect(existsSync(join(r.out, 'final'))).toBe(true);
});

test('library: a trainer refuses an Agent.reference with fewer ids than the agent, or with another referenceTokenizer', async () => {
  const small = await wordModel('lib-small', toyWords.slice(0, 4));
  const reversed = await wordModel('lib-reversed', [...toyWords].reverse());
  const agents = await Promise.all(ws.agents.map((d, i) => loadAgent(d, { name: `agent_${i}` })));
  const smallModel = await loadCausalLM(small);
  const reversedModel = await loadCausalLM(reversed);
  const reversedTok = await loadTokenizer(reversed);
  const env = new ToyCoordEnv({ numTurns: 1 });
  const inputs = (a0: (typeof agents)[0]) => ({ agents: [a0, agents[1]], env, trainTasks: toyTrainTasks.slice(0, 2), evalTasks: toyTasks(2, 'e') });
  try {
    const n = agents[0].tokenizer.vocabSize;
    expect(() => new MADPOTrainer({ ...inputs({ ...agents[0], reference: smallModel }), config: { num_generations: 2, max_new_tokens: 1 } })).toThrow(
      `agent 'agent_0': its reference model has ${smallModel.vocabSize} token ids (config.json vocab_size) but the agent's tokenizer has ${n}`,
    );
    expect(() => new MAGRPOTrainer({ ...inputs({ ...agents[0], reference: reversedModel, referenceTokenizer: reversedTok }), config: { num_turns: 1, num_generations: 2, max_new_tokens: 1, reference_kl_enabled: true } })).toThrow(
      /agent 'agent_0': its reference model has another tokenizer than the agent \(token id \d+ is/,
    );
    // The same reference with no tokenizer to compare passes the id-range check (the CLI always gives one).
    const t = new MAGRPOTrainer({ ...inputs({ ...agents[0], reference: reversedModel }), config: { num_turns: 1, num_generations: 2, max_new_tokens: 1, reference_kl_enabled: true } });
    t.dispose();
  } finally {
    smallModel.dispose();
    reversedModel.dispose();
    for (const a of agents) a.model.dispose();
  }
});
