/**
 * The task registry: every task the run config accepts (`dataset.task`). The built-in tasks are
 * the folders under `envs/` (registered when `comlrl/envs` or the CLI loads); `registerTask` adds
 * one from user code, `loadTaskFolders` (comlrl/envs) every `<folder>/spec.js` under a directory.
 */
import type { AnyTaskSpec } from './spec.js';

const tasks = new Map<string, AnyTaskSpec>();

/**
 * Registers a task (see `defineTask`). Registering the same spec object twice is a no-op; another
 * spec under a taken name is an error naming it.
 * @throws Error when the name is taken by another spec or is not a plain name.
 */
export function registerTask(spec: AnyTaskSpec): void {
  if (!/^[a-z0-9][a-z0-9_-]*$/.test(spec.name)) throw new Error(`task name '${spec.name}' must be lowercase letters, digits, '-' or '_'`);
  const known = tasks.get(spec.name);
  if (known !== undefined && known !== spec) throw new Error(`task '${spec.name}' is already registered (by another spec)`);
  tasks.set(spec.name, spec);
}

/** The spec of a registered task, or undefined. */
export function findTask(name: string): AnyTaskSpec | undefined {
  return tasks.get(name);
}

/**
 * The spec of a registered task.
 * @throws Error listing the registered tasks.
 */
export function getTask(name: string): AnyTaskSpec {
  const spec = tasks.get(name);
  if (spec === undefined) throw new Error(`unknown task '${name}' (registered: ${taskNames().join(', ') || 'none'})`);
  return spec;
}

/** Names of the registered tasks, in registration order. */
export function taskNames(): string[] {
  return [...tasks.keys()];
}

/** Every registered spec, in registration order. */
export function registeredTasks(): AnyTaskSpec[] {
  return [...tasks.values()];
}
