#!/usr/bin/env node
// The passes of `npm test`, each run even when an earlier one failed (the exit code is the first
// failure's), so that one red pass never hides another's results:
//   wasm         the whole suite (vitest.config.ts)
//   tensorflow   the backend-sensitive files on tensorflow (vitest.tensorflow.config.ts)
//   torch        the same on torch, with the kernel conformance test (vitest.torch.config.ts)
// A native pass is skipped with a notice when its backend is not set up, unless
// COMLRL_REQUIRE_<NAME>=1 (.ci/run), where a missing backend is a failure.
//   node scripts/test-backend.mjs wasm tensorflow torch     (npm test)
//   node scripts/test-backend.mjs torch test/lora.test.ts   (one pass, one file)
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const BACKENDS = {
  wasm: { setup: null, config: 'vitest.config.ts', report: 'vitest.json' },
  tensorflow: { setup: path.join('.tensorflow', 'cpu', 'setup.json'), config: 'vitest.tensorflow.config.ts', report: 'vitest-tensorflow.json' },
  torch: { setup: path.join('.torch', 'build', 'setup.json'), config: 'vitest.torch.config.ts', report: 'vitest-torch.json' },
};

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// Backend names choose the passes; anything else goes to vitest (`npm test -- test/x.test.ts` runs
// that file in every pass that includes it).
const args = process.argv.slice(2).filter((a) => a !== '--');
const names = args.filter((a) => a in BACKENDS);
const filters = args.filter((a) => !(a in BACKENDS));
const extra = filters.length > 0 ? [...filters, '--passWithNoTests'] : [];
if (names.length === 0) {
  console.error(`usage: node scripts/test-backend.mjs ${Object.keys(BACKENDS).join('|')} [...] [vitest args]`);
  process.exit(2);
}

/** Runs one pass; returns its exit code. */
function pass(name) {
  const backend = BACKENDS[name];
  fs.rmSync(path.join(root, '.ci', 'out', backend.report), { force: true }); // never let .ci/run count an old pass
  if (backend.setup !== null && !fs.existsSync(path.join(root, backend.setup))) {
    const required = `COMLRL_REQUIRE_${name.toUpperCase()}`;
    if (process.env[required] === '1') {
      console.error(`[test] ${required}=1 but the ${name} backend is not set up: run \`npm run setup:${name}\` first.`);
      return 1;
    }
    console.error(`[test] ${name} backend not set up: skipped its pass (run \`npm run setup:${name}\` to add it).`);
    return 0;
  }
  if (name !== 'wasm') console.error(`[test] backend-sensitive files on the ${name} backend (${backend.config})`);
  const vitest = path.join(root, 'node_modules', 'vitest', 'vitest.mjs');
  const r = spawnSync(process.execPath, [vitest, 'run', '--config', backend.config, ...extra], { cwd: root, stdio: 'inherit' });
  return r.status ?? 1;
}

let status = 0;
for (const name of names) {
  const code = pass(name);
  if (status === 0) status = code;
}
process.exit(status);
