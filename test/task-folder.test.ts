/**
 * A new task is one folder: the test writes a task folder (its spec module only) into a temporary
 * directory that is nothing but a list of task folders, and trains on it with `comlrl train`,
 * touching no file of the package. Two ways in: `COMLRL_TASK_PATH` for a real `comlrl` process
 * (node dist/cli/main.js, built by `npm test`'s pretest), and `loadTaskFolders` from code for the
 * in-process CLI. The folder's module is plain JavaScript so it loads in both.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { loadTaskFolders } from '../envs/tasks.js';
import { findTask, taskNames } from '../src/tasks/registry.js';
import { cli, tempDir, tinyModels } from './cli-helpers.js';

const MAIN = resolve('dist/cli/main.js');

// A two-agent task: both see `cue <colour>`; the joint reward is 1 when their first words agree.
const SPEC = `
const cues = ['red', 'blue', 'green', 'gold'];
const firstWord = (text) => (text.trim().split(/\\s+/)[0] ?? '').toLowerCase();

function makeEnv(scale, shift) {
  return {
    name: 'echo-pair',
    numAgents: 2,
    horizon: 1,
    initialState: (task) => Object.freeze({ task, turn: 0, lastReward: null }),
    observe: (state) => 'cue ' + state.task.cue,
    async step(state, joint) {
      const [a, b] = joint.map(firstWord);
      const raw = a !== '' && a === b ? 1 : 0;
      const reward = raw * scale + shift;
      return { reward, next: Object.freeze({ ...state, turn: 1, lastReward: reward }), done: true, info: { rawReward: raw, words: [a, b] } };
    },
    globalInfo: (state) => ({ turn: state.turn, numTurns: 1, lastReward: state.lastReward, maxReward: scale + shift }),
  };
}

export const taskSpec = {
  name: 'echo-pair',
  label: 'EchoPair',
  metricsSummary: 'echo/agree_rate',
  externalModes: [],
  externalOptions: [],
  data: 'builtin',
  evalRepeatsTrain: true,
  async setup(ctx) {
    const items = cues.map((cue, i) => ({ id: 'echo-' + i, cue }));
    const agree = (eps) => ({ 'echo/agree_rate': eps.length === 0 ? NaN : eps.filter((e) => e.infos[e.infos.length - 1].rawReward === 1).length / eps.length });
    return {
      env: makeEnv(ctx.reward.scale, ctx.reward.shift),
      trainTasks: items.slice(0, 3),
      evalTasks: items,
      evalCallbacks: [agree],
      paperMetrics: (samples) => agree(samples.flat()),
      close: async () => {},
    };
  },
};
`;

let root: string;
let cleanup: () => Promise<void>;
let agents: string[];
let tasksDir: string;

beforeAll(async () => {
  ({ dir: root, cleanup } = await tempDir('task-folder'));
  agents = await tinyModels(root, ['a', 'b']);
  tasksDir = join(root, 'my-tasks');
  mkdirSync(join(tasksDir, 'echo-pair'), { recursive: true });
  writeFileSync(join(tasksDir, 'echo-pair', 'spec.mjs'), SPEC);
});
afterAll(async () => cleanup());

function configFile(out: string): string {
  const file = join(root, `${out}.yaml`);
  const doc = {
    model: { agents, temperature: 1, top_p: 1, top_k: 0 },
    dataset: { task: 'echo-pair' },
    magrpo: { num_turns: 1, num_generations: 2, max_new_tokens: 2, num_train_epochs: 1, agent_learning_rate: 0.01, logging_steps: 1, eval_interval: 0, eval_num_samples: 4, eval_batch_size: 4, rollout_buffer_size: 2 },
    output: { dir: join(root, out), save_steps: 0 },
    seed: 5,
  };
  writeFileSync(file, stringify(doc));
  return file;
}

describe('a task added as one folder', () => {
  test('comlrl train (a real process) finds it through COMLRL_TASK_PATH and trains on it', () => {
    if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run npm run build (npm test does) first`);
    const r = spawnSync(process.execPath, [MAIN, 'train', '--config', configFile('run-env')], {
      env: { ...process.env, COMLRL_BACKEND: 'wasm', COMLRL_TASK_PATH: tasksDir },
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/training magrpo on echo-pair: 3 steps/);
    const evals = JSON.parse(readFileSync(join(root, 'run-env', 'eval.json'), 'utf8')) as { after: { episodes: number; metrics: Record<string, number> } };
    expect(evals.after.episodes).toBe(4);
    // The task's own metric reached the trainer's eval log through the spec's callbacks.
    expect(evals.after.metrics['eval/echo/agree_rate']).toBeGreaterThanOrEqual(0);
    // Without the path the task is unknown, and the error lists the tasks there are.
    const bare = spawnSync(process.execPath, [MAIN, 'train', '--config', configFile('run-bare')], {
      env: { ...process.env, COMLRL_BACKEND: 'wasm', COMLRL_TASK_PATH: '' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(bare.status).toBe(1);
    expect(bare.stderr).toMatch(/dataset\.task: dataset\.task must be one of 'tldr', 'coophe', 'housebuild', 'toy-coord' \(got "echo-pair"\)/);
  });

  test('loadTaskFolders registers it for the in-process CLI (train and eval)', async () => {
    expect(taskNames()).not.toContain('echo-pair');
    const specs = await loadTaskFolders(tasksDir);
    expect(specs.map((s) => s.name)).toEqual(['echo-pair']);
    expect(findTask('echo-pair')?.label).toBe('EchoPair');
    const file = configFile('run-api');
    const train = await cli(['train', '--config', file]);
    expect(train.code, train.err).toBe(0);
    expect(existsSync(join(root, 'run-api', 'final', 'agent_1', 'model.safetensors'))).toBe(true);
    const evalRun = await cli(['eval', '--config', file, '--checkpoint', join(root, 'run-api')]);
    expect(evalRun.code, evalRun.err).toBe(0);
    expect(evalRun.out).toMatch(/echo\/agree_rate\s+\d/);
  });
});
