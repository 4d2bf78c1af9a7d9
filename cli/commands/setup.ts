/**
 * `comlrl setup torch|tensorflow`: builds a native backend with the package's own setup script
 * (scripts/setup-<backend>.mjs, which parses the remaining options), into the folder the library
 * loads it from (src/backend/setup-home.ts). The same from a clone and from a project that
 * depends on comlrl, through `npx comlrl setup ...`.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../src/backend/package-root.js';
import { backendHome, type NativeBackendName } from '../../src/backend/setup-home.js';
import { UsageError } from '../args.js';
import type { CommandContext } from '../context.js';

const BACKENDS: readonly NativeBackendName[] = ['torch', 'tensorflow'];

export const SETUP_USAGE = [
  'usage: comlrl setup torch|tensorflow [--force] [--check] [torch: --python PATH --device cpu|cuda]',
  '',
  "Builds a native backend for comlrl: 'torch' (a small addon compiled against your PyTorch, or the",
  "CPU wheel pip installs) or 'tensorflow' (tfjs-node compiled against PyPI's tensorflow-cpu wheel).",
  'Needs Linux, python3 with pip, a C++ compiler and the Node.js headers; takes 1-3 minutes.',
  '',
  'It installs into, by the first rule that applies:',
  '  $COMLRL_HOME/<backend>        when COMLRL_HOME is set',
  '  <project>/.comlrl/<backend>   when comlrl is installed in <project>/node_modules',
  "  <clone>/.<backend>            in a clone of comlrl (what `npm run setup:<backend>` builds)",
  'and the library loads it from there. Add .comlrl/ to your .gitignore.',
  '',
  '  --check   only report whether the backend is installed and works (exit 0 yes, 1 no)',
  '  --force   rebuild even when a working install is present',
  '`npx comlrl setup <backend> --help` lists all of its options.',
].join('\n');

/** `comlrl setup`. Returns the setup script's exit code. */
export async function setupCommand(argv: readonly string[], ctx: CommandContext): Promise<number> {
  const [backend, ...rest] = argv;
  if (backend === '--help' || backend === '-h') {
    ctx.out(SETUP_USAGE);
    for (const name of BACKENDS) ctx.out(`${name.padEnd(10)} here: ${backendHome(name)?.base ?? '(comlrl package.json not found)'}`);
    return 0;
  }
  if (backend === undefined) throw new UsageError('name the backend to set up: torch or tensorflow', 'setup');
  if (!isBackend(backend)) throw new UsageError(`unknown backend '${backend}': comlrl sets up torch or tensorflow (wasm needs no setup)`, 'setup');
  const root = packageRoot();
  const script = root === null ? null : path.join(root, 'scripts', `setup-${backend}.mjs`);
  if (script === null || !existsSync(script)) throw new Error(`the setup script ${script ?? `scripts/setup-${backend}.mjs`} is missing from the comlrl package: reinstall comlrl`);
  return runScript(script, rest);
}

function isBackend(name: string): name is NativeBackendName {
  return (BACKENDS as readonly string[]).includes(name);
}

/** Runs the script with the terminal attached (its progress streams live); signals are passed on so it can remove its partial build. */
function runScript(script: string, args: readonly string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], { stdio: 'inherit' });
    const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
    const forward = (sig: NodeJS.Signals) => () => child.kill(sig);
    const handlers = signals.map((sig) => [sig, forward(sig)] as const);
    for (const [sig, h] of handlers) process.on(sig, h);
    const done = () => {
      for (const [sig, h] of handlers) process.off(sig, h);
    };
    child.on('error', (err) => {
      done();
      reject(err);
    });
    child.on('close', (code, signal) => {
      done();
      resolve(code ?? 128 + (signal === 'SIGINT' ? 2 : signal === 'SIGHUP' ? 1 : 15));
    });
  });
}
