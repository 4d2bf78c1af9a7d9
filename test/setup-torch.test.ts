import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runSetupScript, snapshotFolder } from './setup-helpers.js';
import { torchSetupDir } from '../src/backend/index.js';

// scripts/setup-torch.mjs: the paths that must never leave anything half-done. (The full build,
// ~2 min and 0.75 GB, is what `.ci/run` runs before `npm test`.)

const setup = (args: string[], env: Record<string, string> = {}) => runSetupScript('setup-torch.mjs', args, { COMLRL_TORCH_PYTHON: '', ...env });
const snapshot = (): string[] => snapshotFolder('.torch');

describe('setup:torch', () => {
  it('names the Python at fault (missing, or without torch) and changes nothing', () => {
    const before = snapshot();
    const missing = setup(['--force', '--python', '/nonexistent/python3']);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain("Python '/nonexistent/python3' (from --python) was not found");
    expect(missing.stderr).toContain('nothing was installed or changed');
    // /bin/false runs but cannot import torch.
    const noTorch = setup(['--force'], { COMLRL_TORCH_PYTHON: '/bin/false' });
    expect(noTorch.status).toBe(1);
    expect(noTorch.stderr).toContain("Python '/bin/false' cannot import torch");
    expect(noTorch.stderr).toContain('pip-install torch 2.13.0 (CPU) into .torch/build/site');
    expect(snapshot()).toEqual(before);
  });

  it('rejects a bad device and unknown arguments with usage (exit 2)', () => {
    const device = setup(['--device', 'tpu']);
    expect(device.status).toBe(2);
    expect(device.stderr).toContain("--device must be cpu or cuda, not 'tpu'");
    const unknown = setup(['--gpu-please']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain('usage: node scripts/setup-torch.mjs');
  });

  it('--check agrees with what the loader sees', () => {
    const r = setup(['--check']);
    const installed = fs.existsSync(path.join(torchSetupDir() ?? '', 'setup.json'));
    expect(r.status, r.stdout + r.stderr).toBe(installed ? 0 : 1);
    expect(r.stdout + r.stderr).toMatch(installed ? /installed and working: torch \d+\.\d+\.\d+/ : /not installed/);
  });

  it('--check reports an addon built from older source (a later run rebuilds it)', () => {
    const file = path.join(torchSetupDir() ?? '', 'setup.json');
    if (!fs.existsSync(file)) return;
    const original = fs.readFileSync(file, 'utf8');
    try {
      fs.writeFileSync(file, JSON.stringify({ ...JSON.parse(original), addonSource: 'an older source' }));
      const r = setup(['--check']);
      expect(r.status).toBe(1);
      expect(r.stdout).toContain('its addon was built from older source: run npx comlrl setup torch');
    } finally {
      fs.writeFileSync(file, original);
    }
    expect(setup(['--check']).status).toBe(0);
  });
});
