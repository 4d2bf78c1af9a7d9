/**
 * MARLHF's phase 1 through `comlrl train`: it shows its progress (a bar per phase: candidates,
 * fit), logs each fit step at its own x (`reward_model/step`), answers Ctrl-C within a second at
 * its next step (no checkpoint: the run starts over with --resume), and names its reward model by
 * a path resolved like every model path, so that a run stopped in phase 1 restarts from another
 * working directory and its checkpoints record the reward model by content.
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { beforeAll, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { CRITIC_LAYOUT_WORDS } from '../src/critic/inputs.js';
import { readMetrics } from '../src/logging/metrics.js';
import { createTinyModel } from '../src/model/tiny.js';
import { toyWords } from '../envs/toy/index.js';
import { handleInterrupts } from '../cli/interrupt.js';
import { main, type CommandContext } from '../cli/main.js';
import { cli, useCliWorkspace } from './cli-helpers.js';

const ws = useCliWorkspace('marlhf-cli');
let rewardModel: string;

beforeAll(async () => {
  rewardModel = join(ws.root, 'rm');
  await createTinyModel({ dir: rewardModel, arch: 'qwen3', seed: 9, tokenizer: 'word', words: [...new Set([...toyWords, ...CRITIC_LAYOUT_WORDS])], hiddenSize: 32, numLayers: 1 });
});

/** A toy-task MARLHF run: 5 training tasks, 4 candidates each, a fit of 2 epochs in batches of 2. */
function config(out: string, marlhf: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    model: { agents: ws.agents, temperature: 1, top_p: 1, top_k: null },
    dataset: { task: 'toy-coord', train_split: '[:5]', eval_split: '[:4]' },
    marlhf: {
      num_generations: 3,
      max_new_tokens: 2,
      num_train_epochs: 1,
      agent_learning_rate: 0.01,
      logging_steps: 1,
      eval_interval: 0,
      rollout_buffer_size: 3,
      preference_num_candidates: 4,
      preference_pairs_per_sample: 3,
      reward_learning_rate: 0.01,
      reward_train_batch_size: 2,
      reward_num_train_epochs: 2,
      reward_model_name: rewardModel,
      ...marlhf,
    },
    output: { dir: out, save_steps: 2, eval_before_after: false },
    seed: 3,
  };
}

/** A CLI context capturing every line; progress writes go to `onProgress` too, message lines to `onErr`. */
function context(onProgress: (line: string) => void = () => {}, onErr: (line: string) => void = () => {}): { ctx: CommandContext; err: string[] } {
  const err: string[] = [];
  const ctx: CommandContext = {
    out: () => {},
    err: (l) => {
      err.push(l);
      onErr(l);
    },
    progress: {
      isTTY: false,
      write: (s: string) => {
        err.push(s.trimEnd());
        onProgress(s);
      },
    },
  };
  return { ctx, err };
}

test('phase 1 shows a progress bar per phase and logs each fit step at its own step', async () => {
  const out = join(ws.root, 'progress');
  const file = join(ws.root, 'progress.yaml');
  await writeFile(file, stringify(config(out)));
  const { ctx, err } = context();
  expect(await main(['train', '--config', file], ctx), err.join('\n')).toBe(0);
  const text = err.join('\n');
  // 5 tasks of candidates, then the fit's steps (its total is only known once the pairs are).
  expect(text).toMatch(/^marlhf reward model candidates 1\/5 20%/m);
  expect(text).toMatch(/^marlhf reward model candidates 5\/5 100%/m);
  const fitTotal = /^marlhf reward model fit \d+\/(\d+) 100%/m.exec(text);
  expect(fitTotal, text).not.toBeNull();
  // Phase 1 comes before the first item's line.
  expect(text.indexOf('reward model fit')).toBeLessThan(text.indexOf('marlhf 1/5'));
  const rows = readMetrics(join(out, 'metrics.jsonl'));
  const pairs = rows.find((r) => 'reward_model/num_pairs' in r)?.['reward_model/num_pairs'];
  expect(typeof pairs).toBe('number');
  const fits = rows.filter((r) => 'reward_model/loss' in r);
  // 2 epochs of ⌈pairs / 2⌉ steps, each row at its own step 1..F.
  const steps = 2 * Math.ceil((pairs as number) / 2);
  expect(fits.map((r) => r['reward_model/step'])).toEqual(Array.from({ length: steps }, (_, i) => i + 1));
  expect(Number(fitTotal?.[1])).toBe(steps);
});

test('Ctrl-C in phase 1 is answered within 1 s, at its next step; the run stops without a checkpoint and --resume starts it over', async () => {
  const out = join(ws.root, 'sigint');
  const file = join(ws.root, 'sigint.yaml');
  await writeFile(file, stringify(config(out)));
  let sentAt = 0;
  let answeredAt = 0;
  const { ctx, err } = context(
    (s) => {
      if (sentAt === 0 && /^marlhf reward model candidates 1\/5/.test(s)) {
        sentAt = performance.now();
        // Delivered as the OS delivers a signal: when the event loop next runs.
        setImmediate(() => process.emit('SIGINT'));
      }
    },
    (l) => {
      if (answeredAt === 0 && /interrupt: /.test(l)) answeredAt = performance.now();
    },
  );
  const code = await main(['train', '--config', file], ctx);
  const text = err.join('\n');
  expect(code, text).toBe(130);
  expect(sentAt).toBeGreaterThan(0);
  expect(answeredAt - sentAt, text).toBeLessThan(1000);
  // Stopped at the next phase step: no fit, no item, no checkpoint; the summary says how to start again.
  expect(text).not.toMatch(/candidates 3\/5/);
  const rows = readMetrics(join(out, 'metrics.jsonl'));
  expect(rows.some((r) => 'reward_model/loss' in r)).toBe(false);
  expect(existsSync(join(out, 'checkpoints', 'step-000000'))).toBe(false);
  expect(text).toMatch(/stopped at step 0\/5 before its first checkpoint; start it again with: npx comlrl train --resume /);
  expect(text).not.toMatch(/checkpoint written/);
});

test('a second Ctrl-C quits at once and prints the command that continues the run', () => {
  const lines: string[] = [];
  const codes: number[] = [];
  const h = handleInterrupts((l) => lines.push(l), 'stopping', (c) => codes.push(c), undefined, () => 'comlrl train --resume runs/x');
  process.emit('SIGINT');
  process.emit('SIGINT');
  h.dispose();
  expect(codes).toEqual([130]);
  expect(lines.at(-1)).toBe('[comlrl] interrupt again: quitting now; continue with: comlrl train --resume runs/x');
});

test('marlhf.reward_model_name is resolved like every model path: a run stopped in phase 1 restarts from another working directory; checkpoints record it', async () => {
  // The config file names the reward model relative to its own folder.
  const sub = join(ws.root, 'configs');
  await mkdir(sub, { recursive: true });
  const out = join(ws.root, 'moved');
  const file = join(sub, 'moved.yaml');
  await writeFile(file, stringify(config(out, { reward_model_name: relative(sub, rewardModel), num_train_epochs: 1 })));
  let sent = false;
  const { ctx } = context((s) => {
    if (!sent && /^marlhf reward model candidates 1\/5/.test(s)) {
      sent = true;
      setImmediate(() => process.emit('SIGINT'));
    }
  });
  expect(await main(['train', '--config', file], ctx)).toBe(130);
  // The run's own config.yaml holds the absolute path.
  expect(await readFile(join(out, 'config.yaml'), 'utf8')).toContain(`reward_model_name: ${rewardModel}`);
  const elsewhere = join(ws.root, 'elsewhere');
  await mkdir(elsewhere, { recursive: true });
  const cwd = process.cwd();
  process.chdir(elsewhere);
  try {
    const r = await cli(['train', '--resume', out]);
    expect(r.code, r.err).toBe(0);
    expect(r.err).toMatch(/has no checkpoint yet .* starting it again from step 0/);
  } finally {
    process.chdir(cwd);
  }
  const runState = JSON.parse(await readFile(join(out, 'checkpoints', 'step-000002', 'run_state.json'), 'utf8')) as { models: Record<string, { path: string; identity: unknown }> };
  expect(runState.models['marlhf.reward_model_name']?.path).toBe(rewardModel);
  expect(runState.models['marlhf.reward_model_name']?.identity).not.toBeNull();
});
