#!/usr/bin/env node
// CoMLRL parity: runs each vector file's one training update through comlrl's matching trainer
// (CoMLRL-compatible settings, the case's fixed completions and table reward) and compares every
// quantity CoMLRL recorded. Prints a table per case and `N/N cases within tolerance`; exit 0 only
// when every case is. Needs `npm run build` first.
//
//   node scripts/comlrl-parity.mjs [--backend cpu|wasm|tensorflow|torch] [--work DIR] [--defaults] FILE...
//
// --defaults runs comlrl's own defaults instead of the CoMLRL-compatible switches (docs: differences
// from CoMLRL), to show which quantities each differing default changes.
// The vectors' format is ../shared/vectors/comlrl-trainers/README.md (`comlrl-trainer-vector/1`).
// Checkpoints are rebuilt with comlrl's tiny-model writer into DIR (default: a folder under the OS
// temp dir, kept between runs) and checked against each case's sha256.
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const usage = 'usage: node scripts/comlrl-parity.mjs [--backend NAME] [--work DIR] [--defaults] FILE...';
const args = process.argv.slice(2);
let backend = process.env.COMLRL_BACKEND || 'cpu';
let workDir = path.join(os.tmpdir(), 'comlrl-parity');
let settings = 'comlrl-compatible';
const files = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--backend') backend = args[++i];
  else if (args[i] === '--work') workDir = path.resolve(args[++i]);
  else if (args[i] === '--defaults') settings = 'comlrl-defaults';
  else if (args[i] === '--help' || args[i] === '-h') {
    console.log(usage);
    process.exit(0);
  } else files.push(args[i]);
}
if (files.length === 0 || !backend || !workDir) {
  console.error(usage);
  process.exit(2);
}
let lib;
try {
  lib = {
    ...(await import(pathToFileURL(path.join(root, 'dist', 'src', 'index.js')).href)),
    ...(await import(pathToFileURL(path.join(root, 'dist', 'trainers', 'parity', 'index.js')).href)),
  };
} catch (err) {
  console.error(`comlrl-parity: the built library was not found (${err.message}); run \`npm run build\` first`);
  process.exit(2);
}
await lib.initBackend(backend);
if (settings !== 'comlrl-compatible') console.log(`settings: ${settings} (comlrl's own defaults, not the CoMLRL-compatible switches)`);
let passed = 0;
for (const file of files) {
  try {
    const vector = await lib.readTrainerVector(file);
    const t0 = performance.now();
    const result = await lib.runParityCase(vector, workDir, settings);
    console.log(lib.formatResults(`${result.case} (${result.trainer}, ${file}, ${((performance.now() - t0) / 1000).toFixed(1)} s)`, result.results));
    for (const r of result.results) for (const p of r.problems.slice(1, 6)) console.log(`  ${r.quantity}: ${p}`);
    console.log(result.ok ? 'within tolerance\n' : 'OUTSIDE tolerance\n');
    if (result.ok) passed++;
  } catch (err) {
    console.log(`case ${file}: FAILED to run: ${err.message}\n`);
  }
}
console.log(`${passed}/${files.length} cases within tolerance`);
process.exit(passed === files.length ? 0 : 1);
