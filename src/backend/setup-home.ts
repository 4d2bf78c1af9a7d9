import path from 'node:path';
import { packageRoot } from './package-root.js';

/** A backend built by `comlrl setup` (scripts/setup-torch.mjs, scripts/setup-tensorflow.mjs). */
export type NativeBackendName = 'torch' | 'tensorflow';

/** Which rule chose a backend's folder (see {@link nativeBackendBase}). */
export type BackendHomeRule = 'COMLRL_HOME' | 'dependency' | 'clone';

/** Where a native backend is set up: `base` holds the install (`base/build` for torch, `base/cpu` for tensorflow). */
export interface BackendHome {
  base: string;
  rule: BackendHomeRule;
}

/** What the choice depends on; the defaults are this process's. */
export interface BackendHomeInputs {
  /** comlrl's own folder (the one with its package.json). */
  packageRoot: string;
  /** Read for COMLRL_HOME. */
  env: Readonly<Record<string, string | undefined>>;
  /** A relative COMLRL_HOME is taken from here. */
  cwd: string;
}

/**
 * The folder a native backend is built into and loaded from, by the first rule that applies:
 * 1. `COMLRL_HOME` is set: `$COMLRL_HOME/<backend>`.
 * 2. comlrl is installed as a dependency (its folder lies under a `node_modules` folder):
 *    `<project>/.comlrl/<backend>`, where `<project>` holds the outermost `node_modules`. Never
 *    inside node_modules/comlrl, which npm replaces on every install or update of comlrl.
 * 3. A clone of comlrl: `<clone>/.<backend>` (`.torch`, `.tensorflow`).
 * The tensorflow build resolves `@tensorflow/tfjs` upward from its folder, so it must lie inside
 * the project whose node_modules hold comlrl's tfjs (rules 2 and 3 do; a COMLRL_HOME elsewhere does
 * not, and the setup's check says so).
 */
export function nativeBackendBase(backend: NativeBackendName, inputs: BackendHomeInputs): BackendHome {
  const home = inputs.env.COMLRL_HOME;
  if (home !== undefined && home !== '') return { base: path.resolve(inputs.cwd, home, backend), rule: 'COMLRL_HOME' };
  const parts = path.resolve(inputs.packageRoot).split(path.sep);
  const nm = parts.indexOf('node_modules');
  if (nm > 0) return { base: path.join(parts.slice(0, nm).join(path.sep) || path.sep, '.comlrl', backend), rule: 'dependency' };
  return { base: path.join(path.resolve(inputs.packageRoot), `.${backend}`), rule: 'clone' };
}

/** {@link nativeBackendBase} for this process (null when comlrl's package.json cannot be found). */
export function backendHome(backend: NativeBackendName): BackendHome | null {
  const root = packageRoot();
  return root === null ? null : nativeBackendBase(backend, { packageRoot: root, env: process.env, cwd: process.cwd() });
}

/** The command that sets a backend up, as a user types it (works in a clone and in a project that depends on comlrl). */
export function setupHint(backend: NativeBackendName, args = ''): string {
  return `npx comlrl setup ${backend}${args === '' ? '' : ` ${args}`}`;
}
