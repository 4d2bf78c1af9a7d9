import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { backendHome, setupHint } from './setup-home.js';

// Where the `tensorflow` backend comes from: the build `npx comlrl setup tensorflow` leaves in
// <backend home>/cpu (tfjs-node compiled against PyPI's libtensorflow; see setup-home.ts for where
// that is), else a regular `@tensorflow/tfjs-node` install.

const TFJS_NODE = '@tensorflow/tfjs-node';
const TFJS_NODE_VERSION = '4.22.0';

/** The folder `npx comlrl setup tensorflow` installs into (it may not exist). */
export function tensorflowSetupDir(): string | null {
  const home = backendHome('tensorflow');
  return home === null ? null : path.join(home.base, 'cpu');
}

function setupPackageDir(): string | null {
  const dir = tensorflowSetupDir();
  if (dir === null) return null;
  const pkg = path.join(dir, 'node_modules', '@tensorflow', 'tfjs-node');
  // setup.json is written last, so a present manifest means a finished, verified build.
  return fs.existsSync(path.join(dir, 'setup.json')) && fs.existsSync(path.join(pkg, 'package.json')) ? pkg : null;
}

function npmPackageResolvable(): boolean {
  try {
    createRequire(import.meta.url).resolve(TFJS_NODE);
    return true;
  } catch {
    return false;
  }
}

/** Whether the `tensorflow` backend is installed (by the setup script or as the npm package). */
export function tensorflowInstalled(): boolean {
  return setupPackageDir() !== null || npmPackageResolvable();
}

/**
 * Keeps TensorFlow's C++ start-up lines off stderr unless `COMLRL_TF_LOG=1` (a value the user set
 * is kept). Must run before the library loads.
 *
 * TF's oneDNN kernels stay on (TF's default; `TF_ENABLE_ONEDNN_OPTS=0` turns them off): without
 * them a matmul with a transposed second operand, which is how every Hugging Face [out, in] weight
 * is applied, copies that weight first. Measured here (2 cores, [4, 2048] · [6144, 2048]ᵀ): 47 ms
 * with the Eigen kernels, 1.6 ms with oneDNN's, as fast as the untransposed product. Their one
 * start-up line ignores the log level.
 */
export function quietTensorflowLogs(): void {
  const verbose = process.env.COMLRL_TF_LOG === '1';
  if (!verbose) process.env.TF_CPP_MIN_LOG_LEVEL ??= '2';
}

/** Imports tfjs-node (which registers the `tensorflow` kernel backend), preferring the setup build. */
export async function loadTensorflowPackage(): Promise<void> {
  const local = setupPackageDir();
  if (local !== null) {
    try {
      await import(pathToFileURL(path.join(local, 'dist', 'index.js')).href);
      return;
    } catch (err) {
      const cause = err instanceof Error ? err.message : String(err);
      throw new Error(`backend 'tensorflow': the build in ${path.dirname(path.dirname(path.dirname(local)))} failed to load (${cause}); rebuild it with \`${setupHint('tensorflow', '--force')}\``);
    }
  }
  try {
    await import(TFJS_NODE);
  } catch (err) {
    const cause = err instanceof Error ? err.message : String(err);
    throw new Error(
      `backend 'tensorflow' is not installed: run \`${setupHint('tensorflow')}\` (builds it from PyPI's tensorflow-cpu wheel) ` +
        `or \`npm i ${TFJS_NODE}@${TFJS_NODE_VERSION}\` (downloads libtensorflow from storage.googleapis.com) (${cause})`,
    );
  }
}
