/** Shared setup of the CLI, resume, eval and examples tests: tiny checkpoints and an in-process CLI. */
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { toyWords } from '../envs/toy/task.js';
import { main, type CommandContext } from '../cli/main.js';
import { createTinyModel } from '../src/model/tiny.js';

/** A temp dir and its remover. */
export async function tempDir(prefix: string): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), `comlrl-${prefix}-`));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** Writes tiny word-level qwen3 checkpoints over the toy vocabulary (hidden 32, 1 layer). */
export async function tinyModels(root: string, names: readonly string[], seed0 = 1): Promise<string[]> {
  const dirs: string[] = [];
  for (const [i, name] of names.entries()) {
    const dir = join(root, name);
    await createTinyModel({ dir, arch: 'qwen3', seed: seed0 + i, tokenizer: 'word', words: [...toyWords], hiddenSize: 32, numLayers: 1 });
    dirs.push(dir);
  }
  return dirs;
}

/** Output of one in-process CLI call. */
export interface CliRun {
  code: number;
  out: string;
  err: string;
}

/** Runs the CLI in this process, capturing stdout/stderr lines and the progress bar. */
export async function cli(argv: readonly string[]): Promise<CliRun> {
  const out: string[] = [];
  const err: string[] = [];
  const ctx: CommandContext = {
    out: (l) => out.push(l),
    err: (l) => err.push(l),
    progress: { write: (s: string) => err.push(s.trimEnd()), isTTY: false },
  };
  const code = await main(argv, ctx);
  return { code, out: out.join('\n'), err: err.join('\n') };
}

/** A small toy-task run config (YAML text) training two tiny agents. */
export function toyConfigYaml(opts: {
  agents: string[];
  critics?: string[];
  trainer?: 'magrpo' | 'collm_dc' | 'collm_cc';
  out: string;
  section?: Record<string, unknown>;
  output?: Record<string, unknown>;
  trainItems?: number;
  seed?: number;
}): string {
  const trainer = opts.trainer ?? 'magrpo';
  const base: Record<string, unknown> =
    trainer === 'magrpo'
      ? { num_turns: 1, num_generations: 2, max_new_tokens: 2, num_train_epochs: 2, agent_learning_rate: 0.01, logging_steps: 1, eval_interval: 2, eval_num_samples: 4, eval_batch_size: 4, rollout_buffer_size: 2 }
      : { num_turns: 2, num_generations: 1, max_new_tokens: 2, num_train_epochs: 2, agent_learning_rate: 0.01, critic_learning_rate: 0.01, logging_steps: 1, eval_interval: 2, eval_num_samples: 4, eval_batch_size: 4, rollout_buffer_size: 3, early_termination_threshold: null };
  const doc = {
    model: { agents: opts.agents, ...(opts.critics ? { critics: opts.critics } : {}), temperature: 1, top_p: 1, top_k: null },
    dataset: { task: 'toy-coord', train_split: `[:${opts.trainItems ?? 3}]`, eval_split: '[:4]' },
    [trainer]: { ...base, ...opts.section },
    output: { dir: opts.out, save_steps: 2, ...opts.output },
    seed: opts.seed ?? 3,
  };
  return stringify(doc);
}

/** Every file under `dir` with its size, SHA-256 and modification time (to prove nothing changed). */
export async function snapshot(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (rel: string): Promise<void> => {
    for (const e of await readdir(join(dir, rel), { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) await walk(r);
      else {
        const p = join(dir, r);
        const st = await stat(p);
        out[r] = `${st.size}:${st.mtimeMs}:${createHash('sha256').update(await readFile(p)).digest('hex')}`;
      }
    }
  };
  await walk('');
  return out;
}
