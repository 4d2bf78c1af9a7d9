import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runSetupScript, snapshotFolder } from './setup-helpers.js';
import { tensorflowSetupDir } from '../src/backend/index.js';

// scripts/setup-tensorflow.mjs: the paths that must never leave anything half-done. (The full build,
// ~1 min and 1.2 GB, is what `.ci/run` runs before `npm test`.)

const setup = (args: string[], env: Record<string, string> = {}) => runSetupScript('setup-tensorflow.mjs', args, env);
const snapshot = (): string[] => snapshotFolder('.tensorflow');

describe('setup:tensorflow', () => {
  it('names what is missing (python3 / pip, C++ compiler) and changes nothing', () => {
    const before = snapshot();
    const noPython = setup(['--force'], { COMLRL_PYTHON: '/nonexistent/python3' });
    expect(noPython.status).toBe(1);
    expect(noPython.stderr).toContain("'/nonexistent/python3' was not found: install Python 3 with pip");
    expect(noPython.stderr).toContain('nothing was installed or changed');
    // /bin/false runs but fails `-m pip --version`: the "python without pip" case.
    const noPip = setup(['--force'], { COMLRL_PYTHON: '/bin/false' });
    expect(noPip.status).toBe(1);
    expect(noPip.stderr).toContain("'/bin/false' has no pip");
    const noCxx = setup(['--force'], { CXX: 'no-such-c++-compiler' });
    expect(noCxx.status).toBe(1);
    expect(noCxx.stderr).toContain("no C++ compiler ('no-such-c++-compiler') found");
    expect(snapshot()).toEqual(before);
  });

  it('rejects unknown arguments with usage (exit 2)', () => {
    const r = setup(['--gpu-please']);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("unknown argument '--gpu-please'");
    expect(r.stderr).toContain('usage: node scripts/setup-tensorflow.mjs');
  });

  it('--check agrees with what the loader sees', () => {
    const r = setup(['--check']);
    const installed = fs.existsSync(path.join(tensorflowSetupDir() ?? '', 'setup.json'));
    expect(r.status, r.stdout + r.stderr).toBe(installed ? 0 : 1);
    expect(r.stdout).toMatch(installed ? /installed and working: tfjs-node 4\.22\.0 over tensorflow-cpu 2\.21\.0/ : /not installed/);
  });
});
