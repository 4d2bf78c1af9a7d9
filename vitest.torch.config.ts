import { defineConfig } from 'vitest/config';
import { TENSORFLOW_SUITE } from './vitest.tensorflow.config.js';

/**
 * The backend-sensitive files, run a third time on the `torch` backend (`npm run setup:torch`),
 * plus the kernel conformance test that compares every torch kernel with tfjs's `cpu` backend.
 * As on tensorflow, every backend these files ask for becomes torch (test/backend-under-test.ts).
 */
export const TORCH_SUITE = [...TENSORFLOW_SUITE.filter((f) => f !== 'test/tensorflow-determinism.test.ts'), 'test/torch-kernels.test.ts', 'test/torch-backend.test.ts', 'test/sampling-device.test.ts'];

export default defineConfig({
  test: {
    include: TORCH_SUITE,
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: 2,
    // One intra-op thread per worker: two workers with torch's default of one thread per core
    // oversubscribe the 2 cores, and OpenMP's spinning made a MAGRPO learning test 13x slower.
    env: { COMLRL_BACKEND: 'torch', COMLRL_TEST_BACKEND: 'torch', COMLRL_TORCH_THREADS: process.env.COMLRL_TORCH_THREADS ?? '1' },
    reporters: ['default', 'json'],
    outputFile: { json: '.ci/out/vitest-torch.json' },
  },
});
