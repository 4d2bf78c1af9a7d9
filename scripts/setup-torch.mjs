#!/usr/bin/env node
// Sets up comlrl's `torch` backend: compiles native/torch/comlrl_torch.cc (a small N-API addon)
// against a PyTorch install. Which torch: --python PATH (or COMLRL_TORCH_PYTHON), else python3's
// own when it imports torch, else the torch wheel installed with pip into the build folder. The
// build happens in a staging folder under the backend's folder (BASE: .torch in a clone,
// <project>/.comlrl/torch where comlrl is a dependency, $COMLRL_HOME/torch when set; see
// src/backend/setup-home.ts) and is renamed to BASE/build at the end, so a failure or Ctrl-C leaves
// the previous state (installed or not) untouched. A re-run keeps a working install (whatever its
// torch) unless --force is given or --python names another.
//
//   npx comlrl setup torch [--python PATH] [--device cpu|cuda] [--force] [--check]
//   node scripts/setup-torch.mjs ... (the same; `npm run setup:torch` in a clone)
//
// Exit codes: 0 ready, 1 failed (message says what to change), 2 bad arguments.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { backendBase, installStaged, runSetup, SetupError, shownPath } from './setup-common.mjs';

/** The pip fallback. Through /opt/wheels-style find-links or the PyTorch CPU index this is
 * 2.13.0+cpu; note that on the public PyPI the Linux `torch==2.13.0` is the CUDA build. */
export const PINS = Object.freeze({ torch: '2.13.0', pipFreeGb: 1.5 });

const here = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(here, '..');
// Set by main() from backendBase() before anything reads them.
let BASE = '';
let TARGET = '';
const SOURCE = path.join(ROOT, 'native', 'torch', 'comlrl_torch.cc');

/** The addon source's SHA-256: an install built from other source is rebuilt. */
function sourceHash() {
  return fs.existsSync(SOURCE) ? createHash('sha256').update(fs.readFileSync(SOURCE)).digest('hex') : null;
}
const ADDON = 'comlrl_torch.node';
const TORCH_BACKEND_JS = path.join(ROOT, 'dist', 'src', 'backend', 'torch', 'index.js');
const TAG = '[setup:torch]';

const log = (line) => console.log(`${TAG} ${line}`);
const fail = (msg) => {
  throw new SetupError(msg);
};

function usage() {
  return [
    'usage: node scripts/setup-torch.mjs [--python PATH] [--device cpu|cuda] [--force] [--check]',
    '',
    "Builds the 'torch' backend (an addon over libtorch) into FOLDER/build, where FOLDER is",
    '$COMLRL_HOME/torch when COMLRL_HOME is set, else <project>/.comlrl/torch when comlrl is a',
    "dependency of <project>, else (a clone of comlrl) the clone's .torch.",
    '  --python PATH    use the torch of this Python (default: env COMLRL_TORCH_PYTHON, else python3',
    `                   when it imports torch, else pip-installs torch==${PINS.torch} into FOLDER/build/site)`,
    '  --device D       cpu (default) or cuda: cuda also checks the addon on the GPU (env COMLRL_TORCH_DEVICE)',
    '  --force          rebuild even when a working install is present',
    '  --check          only report whether the backend is installed and works (exit 0 yes, 1 no)',
    '',
    'Needs: Linux, python3 (with pip unless it has torch), a C++17 compiler ($CXX or c++),',
    'Node.js headers (found next to the node binary, or npm_config_nodedir).',
  ].join('\n');
}

function parseArgs(argv) {
  const envDevice = process.env.COMLRL_TORCH_DEVICE ?? '';
  const opts = { python: process.env.COMLRL_TORCH_PYTHON || null, device: envDevice.startsWith('cuda') ? 'cuda' : 'cpu', force: false, check: false };
  const bad = (msg) => {
    console.error(`${TAG} ${msg}\n${usage()}`);
    process.exit(2);
  };
  for (let i = 0; i < argv.length; i++) {
    const [a, inline] = argv[i].startsWith('--') && argv[i].includes('=') ? argv[i].split(/=(.*)/s) : [argv[i], undefined];
    const value = () => inline ?? (i + 1 < argv.length ? argv[++i] : bad(`${a} needs a value`));
    if (a === '--force') opts.force = true;
    else if (a === '--check') opts.check = true;
    else if (a === '--python') opts.python = value();
    else if (a === '--device') {
      opts.device = value();
      if (opts.device !== 'cpu' && opts.device !== 'cuda') bad(`--device must be cpu or cuda, not '${opts.device}'`);
    } else if (a === '--help' || a === '-h') {
      console.log(usage());
      process.exit(0);
    } else bad(`unknown argument '${argv[i]}'`);
  }
  return opts;
}

function run(cmd, args, opts = {}) {
  return spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...opts });
}

const tail = (text, n) => (text ?? '').trim().split('\n').slice(-n).join('\n');

const PROBE_PY = `
import json, os, sys
import torch
print(json.dumps({"version": str(torch.__version__), "dir": os.path.dirname(os.path.abspath(torch.__file__)),
  "cuda": torch.version.cuda, "cxx11": bool(torch.compiled_with_cxx11_abi()),
  "cudaAvailable": bool(torch.cuda.is_available()), "python": sys.executable}))
`;

/** What `python` says about its torch: { info } or { error, notFound }. */
function probeTorch(python, env = process.env) {
  const r = run(python, ['-c', PROBE_PY], { env });
  if (r.error) return { notFound: r.error.code === 'ENOENT', error: r.error.code === 'ENOENT' ? 'not found' : r.error.message };
  if (r.status !== 0) return { error: tail(r.stderr || r.stdout || `exit ${r.status}`, 1) };
  try {
    return { info: JSON.parse(tail(r.stdout, 1)) };
  } catch {
    return { error: `unexpected output: ${tail(r.stdout, 1)}` };
  }
}

/** Version and CUDA of a torch package read from torch/version.py (no import needed). */
function torchFromVersionPy(dir) {
  const text = fs.readFileSync(path.join(dir, 'version.py'), 'utf8');
  const version = /^__version__\s*(?::[^=]*)?=\s*['"]([^'"]+)['"]/m.exec(text)?.[1];
  if (!version) fail(`could not read the version from ${dir}/version.py`);
  const cuda = /^cuda\s*(?::[^=]*)?=\s*['"]([^'"]+)['"]/m.exec(text)?.[1] ?? null;
  return { version, dir, cuda, cxx11: true, cudaAvailable: false };
}

function preflight(opts) {
  if (process.platform !== 'linux') fail(`the addon build (ELF shared library, -Wl,-rpath) is written for Linux; this is ${process.platform}-${process.arch}.`);
  if (!fs.existsSync(SOURCE)) fail(`the addon source ${SOURCE} is missing: reinstall comlrl.`);
  const cxx = process.env.CXX || 'c++';
  if (run(cxx, ['--version']).error) fail(`no C++ compiler ('${cxx}') found: install one (e.g. apt-get install g++), or set CXX.`);
  const nodedir = process.env.npm_config_nodedir || path.resolve(path.dirname(process.execPath), '..');
  if (!fs.existsSync(path.join(nodedir, 'include', 'node', 'node_api.h'))) {
    fail(`Node.js headers not found in ${nodedir}/include/node (node_api.h is needed to compile the addon): install your Node.js distribution's headers (e.g. the nodejs-dev / libnode-dev package) or set npm_config_nodedir to a folder with include/node.`);
  }
  return { cxx, nodedir, ...chooseTorch(opts) };
}

const CUDA_HINT = 'pass --python PATH with a Python whose torch is a CUDA build (torch.version.cuda set, e.g. installed from https://download.pytorch.org/whl/cu128)';

/** Picks the torch to build against; a pip plan is checked for pip, platform and disk space. */
function chooseTorch(opts) {
  if (opts.python) {
    const p = probeTorch(opts.python);
    if (p.notFound) fail(`Python '${opts.python}' (from ${process.env.COMLRL_TORCH_PYTHON === opts.python ? 'COMLRL_TORCH_PYTHON' : '--python'}) was not found.`);
    if (p.error) fail(`Python '${opts.python}' cannot import torch (${p.error}): install PyTorch into it, or drop --python (and COMLRL_TORCH_PYTHON) to let this script pip-install torch ${PINS.torch} (CPU) into ${shownPath(path.join(TARGET, 'site'))}.`);
    log(`using torch ${p.info.version} of ${opts.python} (${p.info.dir})`);
    return { source: 'python', info: p.info };
  }
  const p = probeTorch('python3');
  if (p.notFound) fail("'python3' was not found: install Python 3 with pip (used to install the torch wheel), or pass --python PATH with a Python that has torch.");
  if (p.info) {
    log(`using torch ${p.info.version} of python3 (${p.info.python}, torch in ${p.info.dir}); --python PATH picks another`);
    return { source: 'python', info: p.info };
  }
  if (opts.device === 'cuda') fail(`--device cuda: python3 has no torch (${p.error}), and the wheel this script would install (torch ${PINS.torch} for CPU) has no CUDA: ${CUDA_HINT}.`);
  if (!['x64', 'arm64'].includes(process.arch)) fail(`no torch wheel for linux-${process.arch}: install PyTorch yourself and pass --python PATH.`);
  const pip = run('python3', ['-c', 'import sys, pip; print(sys.executable)']);
  if (pip.status !== 0) fail(`python3 has no torch and no pip (${tail(pip.stderr, 1)}): install pip (e.g. apt-get install python3-pip, or python3 -m ensurepip), or pass --python PATH with a Python that has torch.`);
  fs.mkdirSync(BASE, { recursive: true });
  const st = fs.statfsSync(BASE);
  const freeGb = (st.bavail * st.bsize) / 1e9;
  if (freeGb < PINS.pipFreeGb) fail(`only ${freeGb.toFixed(1)} GB free under ${BASE}; installing torch with pip needs about ${PINS.pipFreeGb} GB. Free some space, or pass --python PATH with a Python that has torch.`);
  log(`python3 has no torch (${p.error}): installing torch==${PINS.torch} with pip into the build folder`);
  return { source: 'pip', python: 'python3', pythonExe: tail(pip.stdout, 1) };
}

function checkCuda(info, opts) {
  if (opts.device !== 'cuda') return;
  if (!info.cuda) fail(`--device cuda: torch ${info.version} (${info.dir}) has no CUDA (torch.version.cuda is None): ${CUDA_HINT}.`);
  if (!info.cudaAvailable) fail(`--device cuda: torch ${info.version} is built for CUDA ${info.cuda} but sees no GPU (torch.cuda.is_available() is False): check the NVIDIA driver and CUDA_VISIBLE_DEVICES.`);
}

// The child process in flight, so an interrupt can stop it before the stage is removed.
let running = null;

/** Runs a command (output streamed, or captured when `capture`) with a heartbeat. */
function stream(cmd, args, opts, label, { capture = false, beatSeconds = 20 } = {}) {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    // Own process group: an interrupt kills all of it (python3 may be a wrapper, e.g. a pyenv shim).
    const child = spawn(cmd, args, { ...opts, detached: true, stdio: ['ignore', capture ? 'pipe' : 'inherit', capture ? 'pipe' : 'inherit'] });
    running = child;
    let out = '';
    child.stdout?.on('data', (d) => (out += d));
    child.stderr?.on('data', (d) => (out += d));
    const beat = setInterval(() => log(`${label}: still running (${Math.round((Date.now() - started) / 1000)} s)`), beatSeconds * 1000);
    const done = (err) => {
      clearInterval(beat);
      running = null;
      if (err) reject(new SetupError(err));
      else resolve(out);
    };
    child.on('error', (e) => done(`${label}: could not start ${cmd}: ${e.message}`));
    child.on('close', (code, signal) => done(code === 0 ? null : `${label} failed (${signal ?? `exit ${code}`})${capture ? `:\n${tail(out, 30)}` : '; see the output above.'}`));
  });
}

/** pip-installs torch (with its dependencies when the index has them) into <stage>/site. */
async function pipInstall({ python, pythonExe }, stage) {
  const site = path.join(stage, 'site');
  const tmp = path.join(stage, 'tmp'); // pip's temporary files, removed with the stage on Ctrl-C
  fs.mkdirSync(tmp, { recursive: true });
  const env = { ...process.env, TMPDIR: tmp, PIP_DISABLE_PIP_VERSION_CHECK: '1' };
  const args = ['-m', 'pip', 'install', '--only-binary=:all:', '--no-compile', '--target', site, `torch==${PINS.torch}`];
  try {
    await stream(python, args, { cwd: stage, env }, 'pip install');
  } catch (err) {
    if (!(err instanceof SetupError)) throw err;
    log(`pip could not install torch with its dependencies (${err.message}); retrying with --no-deps (the addon needs only torch's C++ libraries; Python may then fail to import this torch)`);
    fs.rmSync(site, { recursive: true, force: true });
    await stream(python, [...args, '--no-deps'], { cwd: stage, env }, 'pip install --no-deps');
  }
  fs.rmSync(tmp, { recursive: true, force: true });
  const dir = path.join(site, 'torch');
  if (!fs.existsSync(path.join(dir, 'lib', 'libtorch_cpu.so'))) fail(`pip finished but ${dir}/lib/libtorch_cpu.so is missing (got: ${fs.readdirSync(site).join(', ')}).`);
  const p = probeTorch(python, { ...process.env, PYTHONPATH: site });
  if (p.info) return { ...p.info, importable: true };
  log(`python3 cannot import the installed torch (${p.error}); reading its version from torch/version.py`);
  return { ...torchFromVersionPy(dir), python: pythonExe, importable: false };
}

/** Compiles the addon into <stage>/comlrl_torch.node. */
async function compile(tools, torchDir, cxx11, rpath, out) {
  const lib = path.join(torchDir, 'lib');
  for (const need of [path.join(torchDir, 'include', 'torch', 'csrc', 'api', 'include'), path.join(lib, 'libtorch_cpu.so')]) {
    if (!fs.existsSync(need)) fail(`this torch has no C++ development files (${need} is missing): use a PyTorch wheel (pip) or libtorch build that ships include/ and lib/.`);
  }
  const cudaLib = fs.existsSync(path.join(lib, 'libtorch_cuda.so')) ? ['-Wl,--no-as-needed', '-ltorch_cuda', '-Wl,--as-needed'] : [];
  const args = [
    '-O2', '-std=c++17', '-shared', '-fPIC', '-w', '-DNODE_GYP_MODULE_NAME=comlrl_torch', `-D_GLIBCXX_USE_CXX11_ABI=${cxx11 ? 1 : 0}`,
    `-I${path.join(tools.nodedir, 'include', 'node')}`, `-I${path.join(torchDir, 'include')}`, `-I${path.join(torchDir, 'include', 'torch', 'csrc', 'api', 'include')}`,
    SOURCE, `-L${lib}`, '-ltorch', '-ltorch_cpu', '-lc10', ...cudaLib, `-Wl,-rpath,${rpath}`, '-o', out,
  ];
  log(`compiling ${path.relative(ROOT, SOURCE)} with ${tools.cxx}${cudaLib.length ? ' (with libtorch_cuda)' : ''} (about 35 s)`);
  await stream(tools.cxx, args, { cwd: ROOT }, 'compiling the addon', { capture: true, beatSeconds: 10 });
}

/**
 * Loads `addon` in child processes: an mm on cpu (and on cuda when asked), then, when the library
 * is built with its torch backend, a tfjs gradient through it. Returns { problem, gradient }.
 */
function verify(addon, device) {
  // Each check runs in its own child; a failure prints only its message.
  const child = (body, flags = [], env = process.env) => {
    const code = `(async () => {${body}})().catch((e) => { console.error(e?.message ?? String(e)); process.exit(1); });`;
    const r = run(process.execPath, [...flags, '-e', code], { cwd: ROOT, env });
    return r.status === 0 && r.stdout.includes('ok') ? null : tail(r.stderr || r.stdout || `exit ${r.status}`, 8);
  };
  const problem = child(`
    const t = require(${JSON.stringify(addon)});
    const mm = t.resolve('aten::mm', '');
    for (const d of ${JSON.stringify(device === 'cuda' ? ['cpu', 'cuda'] : ['cpu'])}) {
      const a = t.upload(new Float32Array([1, 2, 3, 4]), [2, 2], d), b = t.upload(new Float32Array([5, 6, 7, 8]), [2, 2], d);
      const y = Array.from(t.download(t.call(mm, [a, b])));
      if (JSON.stringify(y) !== '[19,22,43,50]') throw new Error('mm on ' + d + ' gave ' + JSON.stringify(y));
    }
    console.log('ok');`);
  if (problem !== null) return { problem };
  if (!fs.existsSync(TORCH_BACKEND_JS)) return { problem: null, gradient: 'skipped' };
  const grad = child(`
    const tf = await import('@tensorflow/tfjs');
    const lib = await import(${JSON.stringify(pathToFileURL(path.join(ROOT, 'dist', 'src', 'index.js')).href)});
    lib.setBackendLogger?.(null);
    const name = await lib.initBackend('torch');
    if (name !== 'torch') throw new Error('initBackend gave ' + name);
    const g = tf.grad((x) => tf.sum(tf.square(x)))(tf.tensor1d([1, -2, 3])).arraySync();
    if (JSON.stringify(g) !== '[2,-4,6]') throw new Error('gradient gave ' + JSON.stringify(g));
    console.log('ok');`, ['--input-type=module'], { ...process.env, COMLRL_TORCH_ADDON: addon });
  return { problem: grad === null ? null : `the tfjs gradient through the torch backend failed:\n${grad}`, gradient: 'checked' };
}

function verified(addon, device) {
  const v = verify(addon, device);
  if (v.gradient === 'skipped') log("gradient check skipped: the library is not built with its torch backend (dist/src/backend/torch is missing; `npm test` builds it)");
  return v.problem;
}

function readManifest(dir) {
  try {
    const m = JSON.parse(fs.readFileSync(path.join(dir, 'setup.json'), 'utf8'));
    return m?.backend === 'torch' && typeof m.addon === 'string' && fs.existsSync(path.join(dir, m.addon)) ? m : null;
  } catch {
    return null;
  }
}

/** Whether the install `m` is what these options ask for (without --python any working torch is). */
function manifestMatches(m, opts) {
  if (m === null || m.node?.modules !== process.versions.modules) return false;
  if (m.addonSource !== sourceHash()) {
    log(`the addon's source changed since ${m.addon} was built: rebuilding`);
    return false;
  }
  if (opts.device === 'cuda' && !m.torch?.cuda) return false;
  if (!opts.python) return true;
  if (m.torch?.source !== 'python') return false;
  const realpath = (p) => (p && fs.existsSync(p) ? fs.realpathSync(p) : null);
  if (opts.python.includes('/') && realpath(opts.python) === realpath(m.torch.python)) return true;
  // Otherwise (a bare name, a wrapper, a shim) ask it: the same torch package is the same install.
  return probeTorch(opts.python).info?.dir === m.torch.dir;
}

async function build(tools, opts, stage, t0) {
  let info;
  let importable = true;
  if (tools.source === 'pip') {
    info = await pipInstall(tools, stage);
    importable = info.importable;
    log(`installed torch ${info.version} (${importable ? 'importable' : 'not importable'} with PYTHONPATH=${shownPath(path.join(TARGET, 'site'))})`);
  } else info = tools.info;
  checkCuda(info, opts);
  const out = path.join(stage, ADDON);
  // The stage is renamed after the build, so a pip-installed torch is found relative to the addon.
  const rpath = tools.source === 'pip' ? '$ORIGIN/site/torch/lib' : path.join(info.dir, 'lib');
  await compile(tools, info.dir, info.cxx11, rpath, out);

  log(`checking that the addon loads and computes${opts.device === 'cuda' ? ' (cpu and cuda)' : ''}`);
  const problem = verified(out, opts.device);
  if (problem !== null) fail(`the built addon does not work:\n${problem}`);

  // For a pip install `dir` and `pythonPath` are relative to the build folder (it is renamed into
  // place after the build); for a Python-provided torch they are absolute.
  const pip = tools.source === 'pip';
  const manifest = {
    backend: 'torch',
    torch: {
      version: info.version,
      cuda: info.cuda ?? null,
      dir: pip ? path.relative(stage, info.dir) : info.dir,
      source: tools.source,
      python: info.python,
      importable,
      pythonPath: pip ? 'site' : null,
    },
    addon: ADDON,
    addonSource: sourceHash(),
    node: { version: process.version, modules: process.versions.modules, napi: process.versions.napi },
    builtAt: new Date().toISOString(),
    setupSeconds: Math.round((Date.now() - t0) / 1000),
  };
  fs.writeFileSync(path.join(stage, 'setup.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const t0 = Date.now();
  BASE = (await backendBase(ROOT, 'torch', log)).base;
  TARGET = path.join(BASE, 'build');
  const shown = shownPath(TARGET);
  if (opts.check) {
    const m = readManifest(TARGET);
    if (m === null || m.node?.modules !== process.versions.modules) {
      console.log(`${TAG} not installed in ${shown}${m ? ` for this Node.js (built for modules ${m.node?.modules}, this is ${process.versions.modules})` : ''} (run npx comlrl setup torch)`);
      process.exit(1);
    }
    if (m.addonSource !== sourceHash()) {
      console.log(`${TAG} installed, but its addon was built from older source: run npx comlrl setup torch`);
      process.exit(1);
    }
    if (opts.device === 'cuda' && !m.torch.cuda) {
      console.log(`${TAG} installed, but torch ${m.torch.version} has no CUDA (--device cuda): rebuild with --python PATH naming a Python whose torch is a CUDA build`);
      process.exit(1);
    }
    const problem = verified(path.join(TARGET, m.addon), opts.device);
    console.log(problem === null ? `${TAG} installed and working: torch ${m.torch.version} (${m.torch.source}${m.torch.cuda ? `, CUDA ${m.torch.cuda}` : ', CPU'})` : `${TAG} installed but broken:\n${problem}`);
    process.exit(problem === null ? 0 : 1);
  }
  const current = readManifest(TARGET);
  if (!opts.force && manifestMatches(current, opts) && verify(path.join(TARGET, current.addon), opts.device).problem === null) {
    log(`already set up in ${shown}: torch ${current.torch.version} (${current.torch.source}) (use --force to rebuild)`);
    return;
  }
  const tools = preflight(opts);
  if (tools.source === 'python') checkCuda(tools.info, opts);
  const built = await installStaged({
    base: BASE,
    target: TARGET,
    tag: TAG,
    build: (stage) => build(tools, opts, stage, t0),
    stopChild: () => {
      // The child's whole process group (python3 may be a wrapper, e.g. a pyenv shim).
      try {
        if (running) process.kill(-running.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    },
  });
  log(`done in ${Math.round((Date.now() - t0) / 1000)} s: backend 'torch' installed in ${shown}`);
  if (built.torch.source === 'pip' && built.torch.importable) log(`Python can use this torch with PYTHONPATH=${path.join(TARGET, 'site')}`);
  log("use it with COMLRL_BACKEND=torch (or backend: torch in a config)");
}

runSetup(TAG, main);
