/**
 * Prompts must leave room in the model's context for the completion: prompt tokens +
 * max_new_tokens ≤ config.json max_position_embeddings.
 * - `comlrl train` refuses, before training and before writing anything, a data row whose prompt
 *   does not fit, naming the item, the file and its row, the agent and the lengths (a prompt a few
 *   times the context, and a 1 MB one, which used to fail for memory naming no row);
 * - in the library, a trainer's rollout refuses a prompt that does not fit, naming the item.
 */
import { existsSync, readFileSync } from 'node:fs';
import { cp, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { stringify } from 'yaml';
import { toyTasks, toyTrainTasks, ToyCoordEnv } from '../envs/toy/index.js';
import { tldrElaborationPrompt, tldrSummaryPrompt } from '../rewards/tldr/prompts.js';
import { loadAgent } from '../src/decpomdp/load-agent.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { MAGRPOTrainer } from '../trainers/magrpo/trainer.js';
import { cli, useCliWorkspace } from './cli-helpers.js';

const ws = useCliWorkspace('prompt-context');
const CONTEXT = 256;

/** Copies of the workspace's agents whose config.json says a context of `context` tokens. */
async function shortContextAgents(name: string, context: number): Promise<string[]> {
  return Promise.all(
    ws.agents.map(async (src, i) => {
      const dir = join(ws.root, `${name}-${i}`);
      if (!existsSync(dir)) {
        await cp(src, dir, { recursive: true });
        const cfgFile = join(dir, 'config.json');
        await writeFile(cfgFile, JSON.stringify({ ...(JSON.parse(readFileSync(cfgFile, 'utf8')) as object), max_position_embeddings: context }, null, 2));
      }
      return dir;
    }),
  );
}

/** A TLDR JSONL file of `prompts`, and a magrpo run config on it; returns the files and the run directory. */
async function tldrRun(name: string, prompts: readonly string[], splits: { train: string; eval: string }): Promise<{ data: string; config: string; out: string }> {
  const agents = await shortContextAgents('ctx', CONTEXT);
  const data = join(ws.root, `${name}.jsonl`);
  await writeFile(data, prompts.map((prompt) => `${JSON.stringify({ prompt })}\n`).join(''));
  const out = join(ws.root, `${name}-run`);
  const config = join(ws.root, `${name}.yaml`);
  await writeFile(
    config,
    stringify({
      model: { agents, temperature: 1, top_p: 1, top_k: null },
      dataset: { task: 'tldr', path: data, train_split: splits.train, eval_split: splits.eval },
      magrpo: { num_turns: 1, num_generations: 2, max_new_tokens: 8, num_train_epochs: 1, logging_steps: 1, eval_interval: 0, eval_num_samples: 2, eval_batch_size: 2 },
      output: { dir: out, plots: false },
      seed: 3,
    }),
  );
  return { data, config, out };
}

const short = ['alpha beta', 'gamma delta', 'epsilon zeta'];

test('a row whose prompt is longer than the context is refused before training, naming the item, file, row, agent and lengths; nothing is written', async () => {
  // 3 × the context in words: the word tokenizer gives each word (known or not) one token.
  const long = Array.from({ length: 3 * CONTEXT }, (_, i) => `w${i}`).join(' ');
  const { data, config, out } = await tldrRun('long', [...short, long, 'eta theta'], { train: '[:4]', eval: '[4:]' });
  const r = await cli(['train', '--config', config]);
  expect(r.code).toBe(1);
  // Agent 0's prompt is the summary template around the post: at least the post's 768 words.
  const m = /train item 3 \((.+), row 4\): the prompt of agent 'agent_0' has (\d+) tokens; with magrpo\.max_new_tokens 8 it needs (\d+) positions, more than the model's context of 256 \(config\.json max_position_embeddings\); the prompt alone fills the context: shorten that text or leave the row out/.exec(r.err);
  expect(m, r.err).not.toBeNull();
  expect(m![1]).toBe(data);
  const tokens = Number(m![2]);
  expect(tokens).toBeGreaterThanOrEqual(3 * CONTEXT);
  expect(tokens).toBeLessThan(3 * CONTEXT + tldrSummaryPrompt('x').split(/\s+/).length + 8);
  expect(Number(m![3])).toBe(tokens + 8);
  expect(existsSync(out)).toBe(false);
});

test('a prompt that fits alone but not with max_new_tokens is told the largest max_new_tokens that fits', async () => {
  // The summary template has some 30 words; with a post of CONTEXT − 40 words the prompt fits, the 8 new tokens may not.
  const agents = await shortContextAgents('ctx', CONTEXT);
  const post = Array.from({ length: CONTEXT - 40 }, (_, i) => `u${i}`).join(' ');
  // Agent 0 is checked first; agent 1's (elaboration) prompt bounds what trains.
  const promptTokens = (await loadTokenizer(agents[0])).encode(tldrSummaryPrompt(post)).length;
  const longest = Math.max(promptTokens, (await loadTokenizer(agents[1])).encode(tldrElaborationPrompt(post)).length);
  expect(longest).toBeLessThan(CONTEXT);
  const { config } = await tldrRun('edge', [...short, post], { train: '[:4]', eval: '[4:]' });
  const r = await cli(['train', '--config', config, '--set', `magrpo.max_new_tokens=${CONTEXT - promptTokens + 1}`]);
  expect(r.code).toBe(1);
  expect(r.err).toContain(`train item 3 (`);
  expect(r.err).toContain(`has ${promptTokens} tokens; with magrpo.max_new_tokens ${CONTEXT - promptTokens + 1} it needs ${CONTEXT + 1} positions, more than the model's context of ${CONTEXT}`);
  expect(r.err).toContain(`lower magrpo.max_new_tokens to at most ${CONTEXT - promptTokens}`);
  // At the limit of the longer prompt it trains.
  const ok = await cli(['train', '--config', config, '--set', `magrpo.max_new_tokens=${CONTEXT - longest}`, '--set', `output.dir=${join(ws.root, 'edge-ok')}`]);
  expect(ok.code, ok.err).toBe(0);
});

test('a 1 MB prompt is refused by name before any rollout (not an out-of-memory error), and leaves no run directory', async () => {
  const huge = 'lorem '.repeat(1 << 18).trim(); // 1.5 MB, 262,144 words
  const { data, config, out } = await tldrRun('huge', [huge, ...short], { train: '[:3]', eval: '[3:]' });
  const r = await cli(['train', '--config', config]);
  expect(r.code).toBe(1);
  expect(r.err).toContain(`train item 0 (${data}, row 1): the prompt of agent 'agent_0' has `);
  expect(r.err).not.toMatch(/memory/i);
  expect(existsSync(out)).toBe(false);
});

test('every row that does not fit is counted; an eval row is named as one', async () => {
  const long = Array.from({ length: 2 * CONTEXT }, (_, i) => `v${i}`).join(' ');
  const { data, config } = await tldrRun('eval-long', [...short, long, long], { train: '[:3]', eval: '[3:]' });
  const r = await cli(['train', '--config', config]);
  expect(r.code).toBe(1);
  expect(r.err).toContain(`eval item 0 (${data}, row 4): the prompt of agent 'agent_0' has `);
  expect(r.err).toContain('(1 more item does not fit either)');
});

test('library: the rollout refuses a prompt beyond the context, naming the training item', async () => {
  // The toy prompts are a handful of tokens: a 3-token context holds none of them with 2 new tokens.
  const dirs = await shortContextAgents('tiny-ctx', 3);
  const agents = await Promise.all(dirs.map((d, i) => loadAgent(d, { name: `agent_${i}` })));
  const trainer = new MAGRPOTrainer({ agents, env: new ToyCoordEnv({ numTurns: 1 }), trainTasks: toyTrainTasks.slice(0, 2), evalTasks: toyTasks(2, 'e'), config: { num_turns: 1, num_generations: 2, max_new_tokens: 2, eval_interval: 0 } });
  try {
    const promptTokens = agents[0].tokenizer.encode(new ToyCoordEnv({ numTurns: 1 }).observe(new ToyCoordEnv({ numTurns: 1 }).initialState(toyTrainTasks[0]), 0)).length;
    await expect(trainer.train()).rejects.toThrow(`train item 0: the prompt of agent 'agent_0' has ${promptTokens} tokens; with max_new_tokens 2 it needs ${promptTokens + 2} positions, more than the model's context of 3`);
  } finally {
    trainer.dispose();
    for (const a of agents) a.model.dispose();
  }
});
