import type { RunConfig } from '../src/config/schema.js';
import type { TaskSetup } from './tasks.js';

/** CoopHE wiring (pending the CoopHE environment). */
export async function setupCoopHE(_config: RunConfig): Promise<TaskSetup> {
  throw new Error('task coophe: the CoopHE environment is not available in this build yet');
}
