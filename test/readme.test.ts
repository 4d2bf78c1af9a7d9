/**
 * The README's library example is examples/readme.ts verbatim; this test checks they agree and
 * runs the compiled example (npm test builds first) the way a user would, through the package's
 * own entry points (`comlrl`, `comlrl/trainers`, `comlrl/envs`).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadCausalLM } from '../src/model/load.js';
import { initBackend } from '../src/backend/index.js';

const root = resolve(__dirname, '..');

describe('README library example', () => {
  it('is examples/readme.ts, verbatim', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const example = readFileSync(join(root, 'examples/readme.ts'), 'utf8').trimEnd();
    expect(readme).toContain('```ts\n' + example + '\n```');
  });

  it('runs, learns the toy task and saves loadable agents', async () => {
    const script = join(root, 'dist/examples/readme.js');
    expect(existsSync(script), 'dist/examples/readme.js: run `npm run build` (npm test does it first)').toBe(true);
    const out = mkdtempSync(join(tmpdir(), 'comlrl-readme-'));
    try {
      const run = spawnSync(process.execPath, [script], {
        env: { ...process.env, COMLRL_README_OUT: out, COMLRL_BACKEND: 'wasm' },
        encoding: 'utf8',
        timeout: 120_000,
      });
      expect(run.status, run.stderr).toBe(0);
      const before = Number(/before (\S+)/.exec(run.stdout)?.[1]);
      const after = Number(/after (\S+)/.exec(run.stdout)?.[1]);
      // A uniform policy scores 16/225 ≈ 0.071 on this task (envs/toy); the seeded run must clear
      // its start value by a margin a random policy does not reach.
      expect(after).toBeGreaterThanOrEqual(before + 0.25);
      await initBackend('wasm');
      const model = await loadCausalLM(join(out, 'final', 'agent_0'));
      expect(model.architecture).toBe('qwen3');
      model.dispose();
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
