#!/usr/bin/env node
// Sets up comlrl's `tensorflow` backend from the npm and Python registries only: tfjs-node 4.22.0
// (installed with its scripts off, so it downloads nothing) compiled from source against the C
// libraries and headers inside PyPI's tensorflow-cpu wheel. Everything lands in BASE/cpu (BASE:
// .tensorflow in a clone, <project>/.comlrl/tensorflow where comlrl is a dependency,
// $COMLRL_HOME/tensorflow when set; see src/backend/setup-home.ts), built in a staging folder and
// renamed into place at the end, so a failure or Ctrl-C leaves the previous state (installed or
// not) untouched.
//
//   npx comlrl setup tensorflow [--force] [--check]
//   node scripts/setup-tensorflow.mjs ... (the same; `npm run setup:tensorflow` in a clone)
//
// Exit codes: 0 ready, 1 failed (message says what to change), 2 bad arguments.
import { createHash } from 'node:crypto';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { backendBase, installStaged, runSetup, SetupError, shownPath } from './setup-common.mjs';

/** Everything this script fetches, pinned. The wheel's hash is PyPI's published sha256. */
export const PINS = Object.freeze({
  wheel: {
    project: 'tensorflow-cpu',
    version: '2.21.0',
    file: 'tensorflow_cpu-2.21.0-cp311-cp311-manylinux_2_27_x86_64.whl',
    sha256: '2b847d217b02ee7731ed91431daf3250daa0196c3c94614d23be27232e6e5b6c',
    platform: 'manylinux_2_27_x86_64',
    pythonVersion: '3.11',
    abi: 'cp311',
  },
  // The npm side is pinned by scripts/tensorflow-backend/package-lock.json (versions + sha512).
  tfjsNode: '4.22.0',
  tfjs: '4.22.0',
});

const here = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(here, '..');
// Set by main() from backendBase() before anything reads them.
let BASE = '';
let TARGET = '';
const TAG = '[setup:tensorflow]';
// Only these parts of the wheel are needed: the two libraries and the C API headers they include.
const LIBS = ['tensorflow/libtensorflow_cc.so.2', 'tensorflow/libtensorflow_framework.so.2'];
const HEADER_DIRS = ['tensorflow/c/', 'tensorflow/core/platform/', 'tsl/', 'xla/tsl/c/'];

const log = (line) => console.log(`${TAG} ${line}`);
const fail = (msg) => {
  throw new SetupError(msg);
};

function usage() {
  return [
    'usage: node scripts/setup-tensorflow.mjs [--force] [--check]',
    '',
    `Builds the 'tensorflow' backend (tfjs-node ${PINS.tfjsNode} over ${PINS.wheel.project} ${PINS.wheel.version}) into FOLDER/cpu,`,
    'where FOLDER is $COMLRL_HOME/tensorflow when COMLRL_HOME is set, else <project>/.comlrl/tensorflow',
    "when comlrl is a dependency of <project>, else (a clone of comlrl) the clone's .tensorflow.",
    '  --force   rebuild even when a working install is present',
    '  --check   only report whether the backend is installed and loads (exit 0 yes, 1 no)',
    '',
    'Needs: Linux x86-64, python3 with pip (reaches PyPI or your configured index), a C++ compiler',
    'and make, Node.js headers (found next to the node binary, or npm_config_nodedir).',
  ].join('\n');
}

function parseArgs(argv) {
  const opts = { force: false, check: false };
  for (const a of argv) {
    if (a === '--force') opts.force = true;
    else if (a === '--check') opts.check = true;
    else if (a === '--help' || a === '-h') {
      console.log(usage());
      process.exit(0);
    } else {
      console.error(`${TAG} unknown argument '${a}'\n${usage()}`);
      process.exit(2);
    }
  }
  return opts;
}

function run(cmd, args, opts = {}) {
  return spawnSync(cmd, args, { encoding: 'utf8', ...opts });
}

function firstLine(s) {
  return (s ?? '').trim().split('\n')[0] ?? '';
}

/** Fails with what to install unless every tool the build needs is present. */
function preflight() {
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    fail(
      `this setup builds from the ${PINS.wheel.platform} wheel, which runs on Linux x86-64 only (this is ${process.platform}-${process.arch}). ` +
        `Install the prebuilt package instead: npm i @tensorflow/tfjs-node@${PINS.tfjsNode} (it downloads libtensorflow from storage.googleapis.com).`,
    );
  }
  // Resolved as comlrl resolves it (its own node_modules, or hoisted above it when it is a dependency).
  let tfjsPkg;
  try {
    tfjsPkg = createRequire(path.join(ROOT, 'package.json')).resolve('@tensorflow/tfjs/package.json');
  } catch {
    fail(`@tensorflow/tfjs is not installed next to ${ROOT}: run \`npm ci\` (or npm install) first.`);
  }
  const tfjsVersion = JSON.parse(fs.readFileSync(tfjsPkg, 'utf8')).version;
  if (tfjsVersion !== PINS.tfjs) fail(`@tensorflow/tfjs is ${tfjsVersion}, but tfjs-node ${PINS.tfjsNode} needs @tensorflow/tfjs ${PINS.tfjs}: run \`npm ci\`.`);
  // tfjs-node finds @tensorflow/tfjs by walking up from its own folder: it must reach comlrl's copy
  // (one engine), so BASE must lie inside the project that holds it.
  let fromBase = null;
  try {
    fromBase = fs.realpathSync(createRequire(path.join(BASE, 'cpu', 'index.js')).resolve('@tensorflow/tfjs/package.json'));
  } catch {
    fromBase = null;
  }
  if (fromBase !== fs.realpathSync(tfjsPkg)) {
    fail(
      `the backend folder ${BASE} is outside the project whose node_modules hold comlrl's @tensorflow/tfjs (${path.dirname(tfjsPkg)}): ` +
        `from there Node ${fromBase === null ? 'finds no @tensorflow/tfjs' : `finds another copy (${path.dirname(fromBase)})`}, so tfjs-node would not share comlrl's engine. ` +
        `${process.env.COMLRL_HOME ? 'Unset COMLRL_HOME, or set it to a folder inside that project.' : 'Install comlrl into the project you run it from.'}`,
    );
  }

  const python = process.env.COMLRL_PYTHON || 'python3';
  const py = run(python, ['--version']);
  if (py.error) fail(`'${python}' was not found: install Python 3 with pip (only used to download the ${PINS.wheel.project} wheel), or point COMLRL_PYTHON at one.`);
  const pip = run(python, ['-m', 'pip', '--version']);
  if (pip.status !== 0) fail(`'${python}' has no pip (${firstLine(pip.stderr)}): install pip (e.g. apt-get install python3-pip, or python3 -m ensurepip), or point COMLRL_PYTHON at a Python that has it.`);

  const cxx = process.env.CXX || 'c++';
  if (run(cxx, ['--version']).error) fail(`no C++ compiler ('${cxx}') found: install one (e.g. apt-get install g++ make), or set CXX.`);
  if (run('make', ['--version']).error) fail("'make' was not found: install it (e.g. apt-get install make).");

  const nodedir = process.env.npm_config_nodedir || path.resolve(path.dirname(process.execPath), '..');
  if (!fs.existsSync(path.join(nodedir, 'include', 'node', 'node_api.h'))) {
    fail(`Node.js headers not found in ${nodedir}/include/node (needed to compile the addon without downloading them): install your Node.js distribution's headers (e.g. the nodejs-dev / libnode-dev package) or set npm_config_nodedir to a folder with include/node.`);
  }
  const gypCandidates = [
    process.env.npm_config_node_gyp,
    path.resolve(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
  ].filter(Boolean);
  const nodeGyp = gypCandidates.find((p) => fs.existsSync(p));
  if (!nodeGyp) fail(`node-gyp was not found (looked at ${gypCandidates.join(', ')}): run this through \`npm run setup:tensorflow\`, which provides npm's own node-gyp.`);

  fs.mkdirSync(BASE, { recursive: true });
  const free = fs.statfsSync(BASE);
  const freeGb = (free.bavail * free.bsize) / 1e9;
  if (freeGb < 2) fail(`only ${freeGb.toFixed(1)} GB free under ${BASE}; the setup needs about 2 GB while it runs (1.2 GB when done).`);
  return { python, nodedir, nodeGyp, pythonLabel: firstLine(py.stdout || py.stderr) };
}

/** The addon's path once installed under `dir` (napi version chosen as tfjs-node's loader does). */
function tfjsNodeDir(dir) {
  return path.join(dir, 'node_modules', '@tensorflow', 'tfjs-node');
}

/**
 * Loads the backend from `dir` in a child process (as comlrl will: same tfjs instance, logs off)
 * and checks a matmul and a gradient. Returns null when it works, else the error text.
 */
function verify(dir) {
  const probe = `
    process.env.TF_CPP_MIN_LOG_LEVEL = '2';
    const path = require('node:path');
    const tfjsMain = require.resolve('@tensorflow/tfjs', { paths: [${JSON.stringify(ROOT)}] });
    const fromNode = require.resolve('@tensorflow/tfjs', { paths: [${JSON.stringify(tfjsNodeDir(dir))}] });
    if (tfjsMain !== fromNode) throw new Error('tfjs-node resolves a second copy of @tensorflow/tfjs at ' + fromNode);
    const tf = require(tfjsMain);
    require(${JSON.stringify(tfjsNodeDir(dir))});
    (async () => {
      if (!(await tf.setBackend('tensorflow'))) throw new Error('setBackend(tensorflow) returned false');
      const y = tf.matMul(tf.tensor2d([[1, 2], [3, 4]]), tf.tensor2d([[5, 6], [7, 8]])).arraySync();
      if (JSON.stringify(y) !== '[[19,22],[43,50]]') throw new Error('matmul gave ' + JSON.stringify(y));
      const g = tf.grad((x) => tf.sum(tf.square(x)))(tf.tensor1d([1, -2, 3])).arraySync();
      if (JSON.stringify(g) !== '[2,-4,6]') throw new Error('gradient gave ' + JSON.stringify(g));
      console.log('ok ' + tf.getBackend());
    })().catch((e) => { console.error(e && e.message ? e.message : String(e)); process.exit(1); });
  `;
  const r = run(process.execPath, ['-e', probe], { cwd: ROOT });
  if (r.status === 0 && r.stdout.includes('ok tensorflow')) return null;
  return (r.stderr || r.stdout || `exit ${r.status}`).trim().split('\n').slice(-6).join('\n');
}

function readManifest(dir) {
  try {
    return JSON.parse(fs.readFileSync(path.join(dir, 'setup.json'), 'utf8'));
  } catch {
    return null;
  }
}

function manifestMatches(m) {
  return m !== null && m.wheel?.sha256 === PINS.wheel.sha256 && m.tfjsNode === PINS.tfjsNode && m.node?.modules === process.versions.modules;
}

// The streaming child in flight, so an interrupt can stop it before the stage is removed.
let running = null;

/** Runs a command with its output streamed (for progress) and a heartbeat while it is quiet. */
function stream(cmd, args, opts, label) {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'inherit', 'inherit'] });
    running = child;
    const beat = setInterval(() => log(`${label}: still running (${Math.round((Date.now() - started) / 1000)} s)`), 20_000);
    child.on('error', (e) => {
      clearInterval(beat);
      reject(new SetupError(`${label}: could not start ${cmd}: ${e.message}`));
    });
    child.on('exit', (code, signal) => {
      clearInterval(beat);
      running = null;
      if (code === 0) resolve();
      else reject(new SetupError(`${label} failed (${signal ?? `exit ${code}`}); see the output above.`));
    });
  });
}

/** Runs a command quietly into a log file; on failure the error quotes its tail. */
function quiet(cmd, args, opts, label, logFile) {
  const r = run(cmd, args, { ...opts, maxBuffer: 64 * 1024 * 1024 });
  fs.writeFileSync(logFile, `${r.stdout ?? ''}\n${r.stderr ?? ''}`);
  if (r.error) throw new SetupError(`${label}: could not start ${cmd}: ${r.error.message}`);
  if (r.status !== 0) {
    const tail = `${r.stdout ?? ''}\n${r.stderr ?? ''}`.trim().split('\n').slice(-25).join('\n');
    throw new SetupError(`${label} failed (exit ${r.status}):\n${tail}`);
  }
}

async function sha256(file) {
  const h = createHash('sha256');
  for await (const chunk of fs.createReadStream(file)) h.update(chunk);
  return h.digest('hex');
}

// Extracts the libraries and headers with Python's zipfile (no unzip needed), printing progress.
const EXTRACT_PY = `
import sys, zipfile, os, shutil
wheel, dest = sys.argv[1], sys.argv[2]
libs = sys.argv[3].split(',')
dirs = ['tensorflow/include/' + d for d in sys.argv[4].split(',')]
z = zipfile.ZipFile(wheel)
names = [n for n in z.namelist() if n in libs or (any(n.startswith(d) for d in dirs) and not n.endswith('/'))]
missing = [l for l in libs if l not in names]
if missing: sys.exit('the wheel lacks ' + ', '.join(missing))
total = sum(z.getinfo(n).file_size for n in names)
done, shown = 0, -1
for n in names:
    rel = os.path.basename(n) if n in libs else os.path.join('include', n[len('tensorflow/include/'):])
    out = os.path.join(dest, 'lib' if n in libs else '', rel)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with z.open(n) as src, open(out, 'wb') as dst:
        while True:
            b = src.read(1 << 22)
            if not b: break
            dst.write(b)
            done += len(b)
            pct = int(100 * done / total) // 10 * 10
            if pct != shown:
                shown = pct
                print('%s extracting %d%% of %.0f MB' % (sys.argv[5], pct, total / 1e6), flush=True)
print('%s extracted %d files' % (sys.argv[5], len(names)), flush=True)
`;

async function build(tools, stage) {
  const t0 = Date.now();
  const wheelDir = path.join(stage, 'wheel');
  const w = PINS.wheel;
  log(`downloading ${w.project}==${w.version} (${w.file}, 274 MB) with pip from your configured index`);
  await stream(
    tools.python,
    ['-m', 'pip', 'download', '--no-deps', '--only-binary=:all:', '--platform', w.platform, '--python-version', w.pythonVersion, '--implementation', 'cp', '--abi', w.abi, '--progress-bar', 'on', '--dest', wheelDir, `${w.project}==${w.version}`],
    { cwd: stage, env: { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: '1' } },
    'pip download',
  );
  const wheel = path.join(wheelDir, w.file);
  if (!fs.existsSync(wheel)) fail(`pip did not produce ${w.file} in ${wheelDir} (got: ${fs.readdirSync(wheelDir).join(', ') || 'nothing'}).`);
  const digest = await sha256(wheel);
  if (digest !== w.sha256) fail(`${w.file} has sha256 ${digest}, expected ${w.sha256}: your package index serves a different file; nothing was installed.`);
  log(`sha256 ok (${digest.slice(0, 16)}…)`);

  const extracted = path.join(stage, 'extract');
  await stream(tools.python, ['-c', EXTRACT_PY, wheel, extracted, LIBS.join(','), HEADER_DIRS.join(','), TAG], { cwd: stage }, 'extract');
  fs.rmSync(wheelDir, { recursive: true, force: true });

  log(`installing @tensorflow/tfjs-node@${PINS.tfjsNode} and its dependencies (npm ci, install scripts off)`);
  for (const f of ['package.json', 'package-lock.json']) fs.copyFileSync(path.join(here, 'tensorflow-backend', f), path.join(stage, f));
  const npmCli = process.env.npm_execpath && /npm-cli\.js$/.test(process.env.npm_execpath) ? [process.execPath, [process.env.npm_execpath]] : ['npm', []];
  quiet(npmCli[0], [...npmCli[1], 'ci', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: stage }, 'npm ci', path.join(stage, 'npm.log'));

  const pkg = tfjsNodeDir(stage);
  // tfjs-node must share comlrl's @tensorflow/tfjs (one engine, one Tensor class): drop the copies
  // npm put beside it so Node resolves upward to the project's.
  for (const name of fs.readdirSync(path.join(stage, 'node_modules', '@tensorflow'))) {
    if (name !== 'tfjs-node') fs.rmSync(path.join(stage, 'node_modules', '@tensorflow', name), { recursive: true, force: true });
  }
  // tfjs-node's binding.gyp links -ltensorflow -ltensorflow_framework from deps/lib, rpath $ORIGIN/../../deps/lib.
  const deps = path.join(pkg, 'deps');
  fs.mkdirSync(deps, { recursive: true });
  fs.renameSync(path.join(extracted, 'lib'), path.join(deps, 'lib'));
  fs.renameSync(path.join(extracted, 'include'), path.join(deps, 'include'));
  fs.symlinkSync('libtensorflow_cc.so.2', path.join(deps, 'lib', 'libtensorflow.so'));
  fs.symlinkSync('libtensorflow_framework.so.2', path.join(deps, 'lib', 'libtensorflow_framework.so'));
  fs.rmSync(extracted, { recursive: true, force: true });

  log('compiling the tfjs-node addon against the wheel\'s libtensorflow (node-gyp, local Node headers)');
  const gypEnv = { ...process.env, npm_config_node_gyp: tools.nodeGyp, npm_config_nodedir: tools.nodedir };
  quiet(
    process.execPath,
    [path.join(stage, 'node_modules', '@mapbox', 'node-pre-gyp', 'bin', 'node-pre-gyp'), 'install', '--build-from-source', `--nodedir=${tools.nodedir}`],
    { cwd: pkg, env: gypEnv },
    'compiling the addon',
    path.join(stage, 'build.log'),
  );
  fs.rmSync(path.join(pkg, 'build'), { recursive: true, force: true });

  log('checking that the backend loads and computes');
  const problem = verify(stage);
  if (problem !== null) fail(`the built backend does not work:\n${problem}`);

  const manifest = {
    backend: 'tensorflow',
    wheel: { project: w.project, version: w.version, file: w.file, sha256: w.sha256 },
    tfjsNode: PINS.tfjsNode,
    node: { version: process.version, modules: process.versions.modules, napi: process.versions.napi },
    python: tools.pythonLabel,
    builtAt: new Date().toISOString(),
    setupSeconds: Math.round((Date.now() - t0) / 1000),
  };
  fs.writeFileSync(path.join(stage, 'setup.json'), `${JSON.stringify(manifest, null, 2)}\n`);
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const t0 = Date.now();
  BASE = (await backendBase(ROOT, 'tensorflow', log)).base;
  TARGET = path.join(BASE, 'cpu');
  if (opts.check) {
    const m = readManifest(TARGET);
    if (!manifestMatches(m)) {
      console.log(`${TAG} not installed in ${shownPath(TARGET)} (run npx comlrl setup tensorflow)`);
      process.exit(1);
    }
    const problem = verify(TARGET);
    console.log(problem === null ? `${TAG} installed and working: tfjs-node ${m.tfjsNode} over ${m.wheel.project} ${m.wheel.version}` : `${TAG} installed but broken:\n${problem}`);
    process.exit(problem === null ? 0 : 1);
  }
  if (!opts.force && manifestMatches(readManifest(TARGET)) && verify(TARGET) === null) {
    log(`already set up in ${shownPath(TARGET)} (use --force to rebuild)`);
    return;
  }
  const tools = preflight();
  await installStaged({ base: BASE, target: TARGET, tag: TAG, build: (stage) => build(tools, stage), stopChild: () => running?.kill('SIGKILL') });
  log(`done in ${Math.round((Date.now() - t0) / 1000)} s: backend 'tensorflow' installed in ${shownPath(TARGET)}`);
  log("use it with COMLRL_BACKEND=tensorflow (or backend: tensorflow in a config; 'auto', the default, now picks it)");
}

runSetup(TAG, main);
