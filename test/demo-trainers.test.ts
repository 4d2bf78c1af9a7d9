/**
 * `comlrl demo --trainer NAME` runs every registered trainer end to end (2 training items each):
 * its demo config parses, the models it names load, and the run directory records that trainer.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { setBackendLogger } from '../src/backend/init.js';
import { trainerNames } from '../trainers/registry.js';
import '../trainers/builtin.js';
import { cli, tempDir } from './cli-helpers.js';

let root: string;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  setBackendLogger(null);
  ({ dir: root, cleanup } = await tempDir('demo-trainers'));
});
afterAll(async () => cleanup());

describe('comlrl demo --trainer', () => {
  for (const name of trainerNames()) {
    test(`${name} trains 2 items and evaluates before and after`, async () => {
      const out = join(root, name);
      const r = await cli(['demo', '--trainer', name, '--steps', '2', '--out', out, '--cache', join(root, 'cache'), '--backend', 'wasm']);
      expect(r.code, r.err).toBe(0);
      expect(r.out).toMatch(/demo: evaluated reward [\d.e-]+ → [\d.e-]+/);
      const run = JSON.parse(readFileSync(join(out, 'run.json'), 'utf8')) as { trainer?: string };
      expect(run.trainer).toBe(name);
    }, 120_000);
  }
});
