/** Shared setup of the CLI, resume, eval and examples tests: tiny checkpoints and an in-process CLI. */
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { stringify } from 'yaml';
import { toyWords } from '../envs/toy/task.js';
import { main, type CommandContext } from '../cli/main.js';
import { initBackend, setBackendLogger, type BackendName } from '../src/backend/init.js';
import { readMetrics } from '../src/logging/metrics.js';
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

/** A CLI test file's temp root and tiny agent checkpoints; read the fields only once `beforeAll` ran. */
export interface CliWorkspace {
  readonly root: string;
  readonly agents: string[];
}

/**
 * The set-up every CLI test file shares: at module top level, registers a `beforeAll` that silences
 * the backend logger, starts `backend` (default wasm), makes a temp root and writes tiny checkpoints
 * named `agentNames` (default a0, a1) in it, and an `afterAll` that removes the root.
 */
export function useCliWorkspace(name: string, options: { backend?: BackendName; agentNames?: readonly string[] } = {}): CliWorkspace {
  let root: string | undefined;
  let agents: string[] | undefined;
  let cleanup: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    setBackendLogger(null);
    await initBackend(options.backend ?? 'wasm');
    const tmp = await tempDir(name);
    ({ dir: root, cleanup } = tmp);
    agents = await tinyModels(tmp.dir, options.agentNames ?? ['a0', 'a1']);
  });
  afterAll(async () => cleanup?.());
  // Getters: the values exist only once beforeAll ran, and a test file reads them inside its hooks and tests.
  const ready = <T>(v: T | undefined, field: string): T => {
    if (v === undefined) throw new Error(`useCliWorkspace('${name}'): ${field} read before beforeAll ran`);
    return v;
  };
  return {
    get root() {
      return ready(root, 'root');
    },
    get agents() {
      return ready(agents, 'agents');
    },
  };
}

/**
 * Writes the run config `configFor(<root>/<name>)` to `<root>/<name>.yaml` and runs `comlrl train`
 * on it with `extra` arguments; expects exit 0 and returns the run directory `<root>/<name>`.
 */
export async function trainRun(root: string, name: string, configFor: (out: string) => string, extra: readonly string[] = []): Promise<string> {
  const out = join(root, name);
  const file = join(root, `${name}.yaml`);
  await writeFile(file, configFor(out));
  const r = await cli(['train', '--config', file, ...extra]);
  expect(r.code, r.err).toBe(0);
  return out;
}

/** A run's metrics rows without timing and memory values (which differ run to run), to compare two runs. */
export function trainerRows(runDir: string): Record<string, unknown>[] {
  return readMetrics(join(runDir, 'metrics.jsonl'))
    .filter((r) => !('run/backend' in r))
    .map((r) => Object.fromEntries(Object.entries(r).filter(([k]) => !k.startsWith('perf/') && !k.startsWith('time/') && !k.endsWith('time_s'))));
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
    model: { agents: opts.agents, ...(opts.critics ? { critics: opts.critics } : {}), temperature: 1, top_p: 1, top_k: 0 },
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
