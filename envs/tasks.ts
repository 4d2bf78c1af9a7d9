/**
 * Task folders: each task is one folder whose `spec.ts` (compiled: `spec.js`) exports `taskSpec`
 * (see `defineTask` in comlrl). The built-in tasks are the folders next to this module
 * (`envs/<task>/`), registered when this module loads; `COMLRL_TASK_PATH` (directories separated by
 * the platform's path delimiter, ':' on Linux and macOS) adds the task folders under each of its
 * directories, and {@link loadTaskFolders} does the same from code.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { registerTask } from '../src/tasks/registry.js';
import type { AnyTaskSpec } from '../src/tasks/spec.js';

/** The module a task folder must have (compiled JavaScript first, TypeScript where run from source). */
const SPEC_FILES = ['spec.js', 'spec.mjs', 'spec.ts'] as const;

function isTaskSpec(value: unknown): value is AnyTaskSpec {
  if (value === null || typeof value !== 'object') return false;
  const v = value as { name?: unknown; setup?: unknown; externalModes?: unknown; externalOptions?: unknown };
  return typeof v.name === 'string' && typeof v.setup === 'function' && Array.isArray(v.externalModes) && Array.isArray(v.externalOptions);
}

/** The spec module of a task folder, or undefined when the folder has none. */
export function taskSpecFile(folder: string): string | undefined {
  for (const f of SPEC_FILES) {
    const p = join(folder, f);
    if (existsSync(p)) return p;
  }
  return undefined;
}

/**
 * Loads and registers the task of one folder (its spec module's `taskSpec` export).
 * @throws Error naming the folder when it has no spec module or the module exports no task spec.
 */
export async function loadTaskFolder(folder: string): Promise<AnyTaskSpec> {
  const abs = resolve(folder);
  const file = taskSpecFile(abs);
  if (file === undefined) throw new Error(`task folder ${abs} has no ${SPEC_FILES.join(' / ')}`);
  const mod: unknown = await import(pathToFileURL(file).href);
  const spec = mod !== null && typeof mod === 'object' ? (mod as { taskSpec?: unknown }).taskSpec : undefined;
  if (!isTaskSpec(spec)) throw new Error(`${file} does not export a task spec as \`taskSpec\` (see docs/adding-a-task.md)`);
  registerTask(spec);
  return spec;
}

/**
 * Loads every task folder directly under `root` (folders without a spec module are skipped), in
 * name order; returns the specs registered.
 */
export async function loadTaskFolders(root: string): Promise<AnyTaskSpec[]> {
  const abs = resolve(root);
  if (!existsSync(abs) || !statSync(abs).isDirectory()) throw new Error(`task directory ${abs} not found`);
  const specs: AnyTaskSpec[] = [];
  for (const name of readdirSync(abs).sort()) {
    const folder = join(abs, name);
    if (name.startsWith('.') || !statSync(folder).isDirectory() || taskSpecFile(folder) === undefined) continue;
    specs.push(await loadTaskFolder(folder));
  }
  return specs;
}

/** The built-in tasks' folders (this module's siblings). */
export const BUILTIN_TASKS_DIR: string = dirname(fileURLToPath(import.meta.url));

/** The paper tasks first (as the docs list them), then the toy task and any other built-in folder. */
const BUILTIN_ORDER = ['tldr', 'coophe', 'housebuild', 'toy'];
for (const name of [...BUILTIN_ORDER, ...readdirSync(BUILTIN_TASKS_DIR).sort().filter((n) => !BUILTIN_ORDER.includes(n))]) {
  const folder = join(BUILTIN_TASKS_DIR, name);
  if (existsSync(folder) && statSync(folder).isDirectory() && taskSpecFile(folder) !== undefined) await loadTaskFolder(folder);
}
for (const root of (process.env.COMLRL_TASK_PATH ?? '').split(delimiter).filter((p) => p.trim() !== '')) {
  await loadTaskFolders(root);
}
