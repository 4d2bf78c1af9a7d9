/**
 * Checkpoints and exact resume from a script, through the library alone (no CLI): the compiled
 * examples/resume.ts (docs/library.md's example, built by `npm test`) trains MAGRPO with
 * `checkpointEvery` / `checkpointWriter`; a real process of it is killed with SIGKILL after its
 * first checkpoint, run again (it resumes with `latestCheckpoint` / `resumeTrainer`), and must end
 * with final weights byte-identical to an uninterrupted run's. In this process: CoLLM-DC with a
 * critic LM per agent, stopped after a checkpoint and rebuilt from the checkpoint's layout, ends
 * with the uninterrupted run's agents, critics and heads; `writeFinalModel` writes the agents in
 * the asked dtype with merged LoRA models beside agents and critics.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ToyCoordEnv, toyEvalTasks, toyTrainTasks, toyWords } from '../envs/toy/index.js';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import { verifyCheckpoint } from '../src/checkpoint/atomic.js';
import { loadCriticHead } from '../src/critic/heads.js';
import type { CriticLM } from '../src/critic/value-model.js';
import type { Agent } from '../src/decpomdp/agent.js';
import { loadAgent } from '../src/decpomdp/load-agent.js';
import { loadCausalLM } from '../src/model/load.js';
import { loraSettings, loraSectionSchema } from '../src/model/lora/config.js';
import { readSafetensorsHeader } from '../src/model/safetensors.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { createRng } from '../src/util/rng.js';
import { CoLLMCCTrainer } from '../trainers/collm/centralized.js';
import { CoLLMDCTrainer } from '../trainers/collm/decentralized.js';
import { separateCriticsLayout } from '../trainers/collm/layout.js';
import { checkpointEvery, checkpointWriter, latestCheckpoint, resumeTrainer, writeFinalModel } from '../trainers/core/checkpoint.js';
import { agentDir, agentDirs } from '../trainers/core/save.js';
import { backendUnderTest } from './backend-under-test.js';
import { tempDir, tinyModels } from './cli-helpers.js';
import { tinyCritic } from './collm-helpers.js';

const ROOT = resolve(import.meta.dirname, '..');
const SCRIPT = join(ROOT, 'dist', 'examples', 'resume.js');

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  setBackendLogger(null);
  await initBackend(backendUnderTest('wasm'));
  ({ dir: root, cleanup } = await tempDir('library-resume'));
});
afterAll(async () => cleanup());

/** Runs the example into `out`; with `killAfter`, SIGKILLs it as soon as a stdout line matches. */
function runExample(out: string, killAfter?: RegExp): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
  if (!existsSync(SCRIPT)) throw new Error(`${SCRIPT} is missing: run npm run build (npm test does) first`);
  const proc = spawn(process.execPath, [SCRIPT], { env: { ...process.env, COMLRL_RESUME_OUT: out, COMLRL_BACKEND: 'wasm' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  proc.stdout.on('data', (d: Buffer) => {
    stdout += d.toString();
    if (killAfter?.test(stdout)) proc.kill('SIGKILL');
  });
  proc.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  return new Promise((res) => proc.on('exit', (code, signal) => res({ code, signal, stdout, stderr })));
}

function finalHashes(out: string): string[] {
  return [0, 1].map((i) => createHash('sha256').update(readFileSync(join(out, 'final', `agent_${i}`, 'model.safetensors'))).digest('hex'));
}

test("docs/library.md's example is examples/resume.ts, with the package's entry points for its relative imports", () => {
  const readme = readFileSync(join(ROOT, 'docs', 'library.md'), 'utf8');
  const example = readFileSync(join(ROOT, 'examples', 'resume.ts'), 'utf8')
    .trimEnd()
    .replace("'../src/index.js'", "'comlrl'")
    .replace("'../trainers/index.js'", "'comlrl/trainers'")
    .replace("'../envs/index.js'", "'comlrl/envs'");
  expect(readme).toContain('```ts\n' + example + '\n```');
});

test('a script killed after a checkpoint resumes through the library to the bytes of an uninterrupted run', async () => {
  const straight = join(root, 'straight');
  const s = await runExample(straight);
  expect(s.code, s.stderr).toBe(0);
  expect(s.stdout).not.toMatch(/resuming/);
  // Every 4th of the 32 steps, the newest two kept.
  expect((await readdir(join(straight, 'checkpoints'))).sort()).toEqual(['step-000028', 'step-000032']);

  const killed = join(root, 'killed');
  const k = await runExample(killed, /checkpoint \S+step-000004/);
  expect(k.signal, k.stdout + k.stderr).toBe('SIGKILL');
  expect(existsSync(join(killed, 'final'))).toBe(false);

  const r = await runExample(killed);
  expect(r.code, r.stderr).toBe(0);
  const at = Number(/resuming at step (\d+)/.exec(r.stdout)?.[1]);
  // The kill landed after step 4's checkpoint and before the run's end.
  expect(at).toBeGreaterThanOrEqual(4);
  expect(at).toBeLessThan(32);
  expect(at % 4).toBe(0);
  expect(finalHashes(killed)).toEqual(finalHashes(straight));
}, 300_000);

describe('in this process', () => {
  let bases: string[];
  let criticBases: string[];

  beforeAll(async () => {
    bases = await tinyModels(root, ['a0', 'a1']);
    criticBases = [];
    for (const [i, name] of ['c0', 'c1'].entries()) {
      const c = await tinyCritic(root, name, 7 + i, toyWords);
      c.model.dispose();
      criticBases.push(join(root, name));
    }
  });

  const CONFIG = { num_turns: 2, num_generations: 1, max_new_tokens: 2, temperature: 1, top_p: 1, top_k: 0, num_train_epochs: 2, rollout_buffer_size: 3, agent_learning_rate: 0.01, critic_learning_rate: 0.01, eval_interval: 0, early_termination_threshold: null, seed: 3 };
  const loadCritic = async (dir: string, name: string): Promise<CriticLM> => ({ name, model: await loadCausalLM(dir), tokenizer: await loadTokenizer(dir) });

  /** A CoLLM-DC trainer on 4 toy items over agents and critics from `agents` / `critics`, with heads from `heads` when given. */
  async function build(agents: readonly string[], critics: readonly string[], heads?: readonly string[]) {
    const loaded: Agent[] = await Promise.all(agents.map((d, i) => loadAgent(d, { name: `agent_${i}` })));
    const criticLMs = await Promise.all(critics.map((d, i) => loadCritic(d, `critic_${i}`)));
    const criticHeads = heads ? await Promise.all(heads.map((d) => loadCriticHead(d, createRng('unused')))) : undefined;
    const trainer = new CoLLMDCTrainer<unknown, unknown>({
      agents: loaded, critics: criticLMs, ...(criticHeads ? { criticHeads } : {}),
      env: new ToyCoordEnv({ numTurns: 2 }), trainTasks: toyTrainTasks.slice(0, 4), evalTasks: toyEvalTasks, config: CONFIG,
    });
    const dispose = () => {
      trainer.dispose();
      for (const a of loaded) a.model.dispose();
      for (const c of criticLMs) c.model.dispose();
    };
    return { trainer, dispose };
  }

  const FILES = ['agent_0/model.safetensors', 'agent_1/model.safetensors', 'agent_0/critic/model.safetensors', 'agent_1/critic/value_head.safetensors'];

  test('CoLLM-DC stopped after a checkpoint and rebuilt from its layout ends with the bytes of an uninterrupted run', async () => {
    const straight = await build(bases, criticBases);
    await straight.trainer.train();
    await straight.trainer.save(join(root, 'dc-straight'));
    straight.dispose();

    const ckpts = join(root, 'dc-stopped', 'checkpoints');
    const first = await build(bases, criticBases);
    // Stops right after the checkpoint of step 2.
    await first.trainer.train({
      callbacks: [checkpointEvery(2), { onSave: (_, control) => void (control.stop = true) }],
      saveCheckpoint: checkpointWriter(first.trainer, ckpts),
    });
    first.dispose();
    const ckpt = await latestCheckpoint(ckpts);
    expect(ckpt).toBe(join(ckpts, 'step-000002'));
    if (ckpt === undefined) return;
    // Transitions wait in the replay buffer there: the resume must restore them.
    const state = JSON.parse(readFileSync(join(ckpt, 'trainer_state.json'), 'utf8')) as { extra: { buffer: unknown[] } };
    expect(state.extra.buffer.length).toBeGreaterThan(0);
    const layout = separateCriticsLayout(ckpt, 2);
    const again = await build(agentDirs(ckpt, 2), layout.critics, layout.heads);
    expect(await resumeTrainer(again.trainer, ckpt)).toBe(2);
    await again.trainer.train();
    await again.trainer.save(join(root, 'dc-resumed'));
    again.dispose();
    for (const f of FILES) {
      const a = readFileSync(join(root, 'dc-straight', f));
      const b = readFileSync(join(root, 'dc-resumed', f));
      expect(b.equals(a), f).toBe(true);
    }
  }, 120_000);

  test('writeFinalModel: agents in the dtype, critics in float32, merged LoRA models beside both, a manifest', async () => {
    const section = loraSectionSchema.parse({ r: 2, lora_alpha: 4, target_modules: 'all-linear' });
    const lora = (seed: string) => ({ lora: { settings: loraSettings(section), seed } });
    const agents: Agent[] = [];
    for (const i of [0, 1]) agents.push({ name: `agent_${i}`, model: await loadCausalLM(bases[i], lora(`a${i}`)), tokenizer: await loadTokenizer(bases[i]), chat: false });
    const critic = { name: 'critic', model: await loadCausalLM(criticBases[0], lora('c')), tokenizer: await loadTokenizer(criticBases[0]) };
    const trainer = new CoLLMCCTrainer<unknown, unknown>({ agents, critic, env: new ToyCoordEnv({ numTurns: 2 }), trainTasks: toyTrainTasks.slice(0, 2), config: CONFIG });
    try {
      const dir = join(root, 'final-lora');
      await writeFinalModel(trainer, dir, { dtype: 'bfloat16', merged: { agents: true, critics: true } });
      const manifest = await verifyCheckpoint(dir);
      expect(manifest.step).toBe(0);
      const dtypes = (file: string) => [...new Set([...readSafetensorsHeader(join(dir, file)).entries.values()].map((e) => e.dtype))];
      expect(dtypes('agent_1/adapter_model.safetensors')).toEqual(['BF16']);
      expect(dtypes('agent_1/merged/model.safetensors')).toEqual(['BF16']);
      expect(dtypes('critic/adapter_model.safetensors')).toEqual(['F32']);
      expect(dtypes('critic/merged/model.safetensors')).toEqual(['BF16']);
      expect(dtypes('critic/value_head.safetensors')).toEqual(['F32']);
      expect(existsSync(join(agentDir(dir, 0), 'tokenizer.json'))).toBe(true);
    } finally {
      trainer.dispose();
      for (const a of agents) a.model.dispose();
      critic.model.dispose();
    }
  }, 120_000);
});
