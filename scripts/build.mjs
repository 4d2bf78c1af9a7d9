#!/usr/bin/env node
// Builds the library into dist/ with tsc (dist/ removed first, so nothing stale is packed), and
// records a hash of what the build read in dist/.build-inputs.
//
//   node scripts/build.mjs               always builds (`npm run build`, `prepack`)
//   node scripts/build.mjs --if-changed  builds only when the sources changed since the last build
//                                        (`prepare`: npm runs it on `npm ci`/`npm install` in a clone,
//                                        and twice when installing comlrl from a git URL)
//   node scripts/build.mjs --check       exit 0 when dist/ is up to date with the sources, else 1
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DIST = path.join(ROOT, 'dist');
const STAMP = path.join(DIST, '.build-inputs');
const TAG = '[build]';

/** The files tsc reads: tsconfig.json's `include` folders, tsconfig.json, package.json and tsc's version. */
function inputsHash(tscPackage) {
  const tsconfig = JSON.parse(fs.readFileSync(path.join(ROOT, 'tsconfig.json'), 'utf8'));
  const files = ['tsconfig.json', 'package.json'];
  const walk = (rel) => {
    const abs = path.join(ROOT, rel);
    if (!fs.existsSync(abs)) return;
    for (const entry of fs.readdirSync(abs, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const child = path.join(rel, entry.name);
      if (entry.isDirectory()) walk(child);
      else if (/\.(m|c)?ts$|\.json$/.test(entry.name)) files.push(child);
    }
  };
  for (const dir of tsconfig.include ?? []) walk(dir);
  const h = createHash('sha256');
  h.update(`typescript ${JSON.parse(fs.readFileSync(tscPackage, 'utf8')).version}\n`);
  for (const f of files) h.update(`${f}\n`).update(fs.readFileSync(path.join(ROOT, f))).update('\n');
  return h.digest('hex');
}

function main() {
  const ifChanged = process.argv.includes('--if-changed');
  const check = process.argv.includes('--check');
  let tscPackage;
  try {
    tscPackage = createRequire(path.join(ROOT, 'package.json')).resolve('typescript/package.json');
  } catch {
    console.error(`${TAG} typescript is not installed next to ${ROOT}: run \`npm install\` with dev dependencies (not --omit=dev) before building.`);
    return 1;
  }
  const hash = inputsHash(tscPackage);
  const fresh = fs.existsSync(STAMP) && fs.readFileSync(STAMP, 'utf8').trim() === hash;
  if (check) {
    console.log(fresh ? `${TAG} dist/ is up to date with the sources` : `${TAG} dist/ is missing or older than the sources: run \`npm run build\``);
    return fresh ? 0 : 1;
  }
  if (ifChanged && fresh) {
    console.log(`${TAG} dist/ is up to date with the sources`);
    return 0;
  }
  fs.rmSync(DIST, { recursive: true, force: true });
  const tsc = path.join(path.dirname(tscPackage), 'bin', 'tsc');
  const r = spawnSync(process.execPath, [tsc, '-p', path.join(ROOT, 'tsconfig.json')], { cwd: ROOT, stdio: 'inherit' });
  if (r.status !== 0) {
    console.error(`${TAG} tsc failed (${r.signal ?? `exit ${r.status}`}); dist/ is incomplete`);
    return 1;
  }
  fs.writeFileSync(STAMP, `${hash}\n`);
  return 0;
}

process.exitCode = main();
