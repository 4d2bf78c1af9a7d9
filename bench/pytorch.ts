/**
 * Which PyTorch the benchmarks compare with, and how to run it: the baseline script
 * (../shared/reference/torch_bench.py) and the Python that runs it.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { torchSetupDir } from '../src/backend/index.js';

export type TorchDtype = 'float32' | 'bfloat16';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The PyTorch baseline script: $COMLRL_TORCH_BENCH, else ../shared/reference/torch_bench.py. */
export function torchBenchScript(): string {
  return process.env.COMLRL_TORCH_BENCH ?? path.resolve(repoRoot, '../shared/reference/torch_bench.py');
}

/** A Python that imports torch, how to run it, and what it has. */
export interface TorchPython {
  python: string;
  env: NodeJS.ProcessEnv;
  /** Where it came from, for the header. */
  source: string;
  version: string;
  /** The BLAS torch was built with (torch.__config__'s BLAS_INFO) and its version line, when given. */
  blas: string;
}

/** What `npm run setup:torch` records about the torch it used (the fields read here). */
interface SetupTorch {
  torch?: { version?: string; source?: string; python?: string | null; pythonPath?: string | null };
}

const PROBE = [
  'import json, torch',
  'cfg = torch.__config__.show()',
  "blas = cfg.split('BLAS_INFO=', 1)[1].split(',')[0].strip() if 'BLAS_INFO=' in cfg else 'unknown'",
  "lib = next((l.strip(' -') for l in cfg.splitlines() if 'Math Kernel Library' in l or 'OpenBLAS' in l), '')",
  "print(json.dumps({'version': torch.__version__, 'blas': blas, 'lib': lib}))",
].join('\n');

function probe(python: string, env: NodeJS.ProcessEnv, source: string): TorchPython | null {
  const r = spawnSync(python, ['-c', PROBE], { encoding: 'utf8', env });
  if (r.status !== 0) return null;
  try {
    const p = JSON.parse(r.stdout.trim().split('\n').pop() ?? '') as { version: string; blas: string; lib: string };
    // "Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build ..." → "MKL 2024.2".
    const lib = p.lib.replace(/^.*Math Kernel Library Version ([0-9.]+).*$/, 'MKL $1');
    return { python, env, source, version: p.version, blas: lib ? `${p.blas}: ${lib}` : p.blas };
  } catch {
    return null;
  }
}

/** The Python of `npm run setup:torch`'s torch (its pip install dir on PYTHONPATH, or the Python it took torch from). */
function setupPython(): { python: string; env: NodeJS.ProcessEnv; source: string } | null {
  const dir = torchSetupDir();
  const file = dir === null ? null : path.join(dir, 'setup.json');
  if (dir === null || file === null || !fs.existsSync(file)) return null;
  let m: SetupTorch;
  try {
    m = JSON.parse(fs.readFileSync(file, 'utf8')) as SetupTorch;
  } catch {
    return null;
  }
  const python = m.torch?.python && fs.existsSync(m.torch.python) ? m.torch.python : 'python3';
  const site = m.torch?.pythonPath;
  if (site) {
    // A pip install: relative to the build folder.
    const abs = path.resolve(dir, site);
    const rel = path.relative(repoRoot, abs);
    return { python, env: { ...process.env, PYTHONPATH: [abs, process.env.PYTHONPATH].filter(Boolean).join(path.delimiter) }, source: `${python} with PYTHONPATH=${rel.startsWith('..') ? abs : rel} (npm run setup:torch)` };
  }
  return m.torch?.python ? { python: m.torch.python, env: process.env, source: `${m.torch.python} (npm run setup:torch)` } : null;
}

let resolvedPython: TorchPython | null | undefined;

/**
 * The PyTorch the baseline runs on, the first that imports torch of: `$COMLRL_TORCH_PYTHON`, the
 * torch of `npm run setup:torch` (a newer torch than a distribution's), `/usr/bin/python3`.
 */
export function torchPython(): TorchPython | null {
  if (resolvedPython !== undefined) return resolvedPython;
  const candidates: { python: string; env: NodeJS.ProcessEnv; source: string }[] = [];
  const own = process.env.COMLRL_TORCH_PYTHON;
  if (own) candidates.push({ python: own, env: process.env, source: `COMLRL_TORCH_PYTHON=${own}` });
  const setup = setupPython();
  if (setup) candidates.push(setup);
  candidates.push({ python: '/usr/bin/python3', env: process.env, source: '/usr/bin/python3' });
  resolvedPython = null;
  for (const c of candidates) {
    const found = probe(c.python, c.env, c.source);
    if (found) {
      resolvedPython = found;
      break;
    }
  }
  return resolvedPython;
}
