#!/usr/bin/env node
// Later passes of `npm test`: the backend-sensitive files on a native backend.
//   node scripts/test-backend.mjs tensorflow   (vitest.tensorflow.config.ts)
//   node scripts/test-backend.mjs torch        (vitest.torch.config.ts, with the kernel conformance test)
// Skipped with a notice when that backend is not set up, unless COMLRL_REQUIRE_<NAME>=1 (.ci/run),
// where a missing backend is a failure.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const BACKENDS = {
  tensorflow: { setup: path.join('.tensorflow', 'cpu', 'setup.json'), config: 'vitest.tensorflow.config.ts' },
  torch: { setup: path.join('.torch', 'build', 'setup.json'), config: 'vitest.torch.config.ts' },
};

const name = process.argv[2];
const backend = BACKENDS[name];
if (backend === undefined) {
  console.error(`usage: node scripts/test-backend.mjs ${Object.keys(BACKENDS).join('|')}`);
  process.exit(2);
}
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const report = path.join(root, '.ci', 'out', `vitest-${name}.json`);
fs.rmSync(report, { force: true }); // never let .ci/run count an old pass

const required = `COMLRL_REQUIRE_${name.toUpperCase()}`;
if (!fs.existsSync(path.join(root, backend.setup))) {
  if (process.env[required] === '1') {
    console.error(`[test] ${required}=1 but the ${name} backend is not set up: run \`npm run setup:${name}\` first.`);
    process.exit(1);
  }
  console.error(`[test] ${name} backend not set up: skipped its pass (run \`npm run setup:${name}\` to add it).`);
  process.exit(0);
}
console.error(`[test] backend-sensitive files on the ${name} backend (${backend.config})`);
const vitest = path.join(root, 'node_modules', 'vitest', 'vitest.mjs');
const r = spawnSync(process.execPath, [vitest, 'run', '--config', backend.config, ...process.argv.slice(3)], { cwd: root, stdio: 'inherit' });
process.exit(r.status ?? 1);
