import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { nativeBackendBase } from '../src/backend/setup-home.js';
import { resumeCommandFor } from '../cli/training/run-dir.js';

// Where `npx comlrl setup` installs a backend and the library looks for it (src/backend/setup-home.ts).
describe('native backend folder', () => {
  const env = {};
  it('a clone keeps .torch and .tensorflow at its root', () => {
    expect(nativeBackendBase('torch', { packageRoot: '/src/comlrl', env, cwd: '/x' })).toEqual({ base: '/src/comlrl/.torch', rule: 'clone' });
    expect(nativeBackendBase('tensorflow', { packageRoot: '/src/comlrl', env, cwd: '/x' }).base).toBe('/src/comlrl/.tensorflow');
  });
  it('a dependency installs into <project>/.comlrl, never inside node_modules (npm, nested, pnpm)', () => {
    expect(nativeBackendBase('torch', { packageRoot: '/home/u/proj/node_modules/comlrl', env, cwd: '/x' })).toEqual({ base: '/home/u/proj/.comlrl/torch', rule: 'dependency' });
    expect(nativeBackendBase('torch', { packageRoot: '/p/node_modules/a/node_modules/comlrl', env, cwd: '/x' }).base).toBe('/p/.comlrl/torch');
    expect(nativeBackendBase('tensorflow', { packageRoot: '/p/node_modules/.pnpm/comlrl@0.1.0/node_modules/comlrl', env, cwd: '/x' }).base).toBe('/p/.comlrl/tensorflow');
  });
  it('COMLRL_HOME wins, a relative one taken from the working directory', () => {
    expect(nativeBackendBase('torch', { packageRoot: '/p/node_modules/comlrl', env: { COMLRL_HOME: 'cache' }, cwd: '/w' })).toEqual({ base: path.resolve('/w/cache/torch'), rule: 'COMLRL_HOME' });
    expect(nativeBackendBase('torch', { packageRoot: '/src/comlrl', env: { COMLRL_HOME: '' }, cwd: '/w' }).rule).toBe('clone');
  });
});

describe('hints', () => {
  it('print the resume command that works in a clone and a project: npx comlrl', () => {
    expect(resumeCommandFor(path.join('runs', 'r1', 'checkpoints', 'step-4'))).toMatch(/^npx comlrl train --resume /);
  });
});
