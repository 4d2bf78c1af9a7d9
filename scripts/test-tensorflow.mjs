#!/usr/bin/env node
// Second pass of `npm test`: the backend-sensitive files on the `tensorflow` backend.
// Skipped with a notice when the backend is not set up, unless COMLRL_REQUIRE_TENSORFLOW=1 (.ci/run),
// where a missing backend is a failure.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const report = path.join(root, '.ci', 'out', 'vitest-tensorflow.json');
fs.rmSync(report, { force: true }); // never let .ci/run count an old pass

const installed = fs.existsSync(path.join(root, '.tensorflow', 'cpu', 'setup.json'));
if (!installed) {
  if (process.env.COMLRL_REQUIRE_TENSORFLOW === '1') {
    console.error('[test] COMLRL_REQUIRE_TENSORFLOW=1 but the tensorflow backend is not set up: run `npm run setup:tensorflow` first.');
    process.exit(1);
  }
  console.error('[test] tensorflow backend not set up: skipped its pass (run `npm run setup:tensorflow` to add it).');
  process.exit(0);
}
console.error('[test] backend-sensitive files on the tensorflow backend (vitest.tensorflow.config.ts)');
const vitest = path.join(root, 'node_modules', 'vitest', 'vitest.mjs');
const r = spawnSync(process.execPath, [vitest, 'run', '--config', 'vitest.tensorflow.config.ts'], { cwd: root, stdio: 'inherit' });
process.exit(r.status ?? 1);
