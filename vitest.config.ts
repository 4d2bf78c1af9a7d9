import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The torch backend's own files run in the torch pass only (vitest.torch.config.ts).
    exclude: ['test/torch-*.test.ts', '**/node_modules/**'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // tfjs backends are process-global; forks keep each file's backend state isolated.
    pool: 'forks',
    maxWorkers: 2,
    // This pass is the wasm one: without it, `auto` would pick tensorflow wherever it is set up.
    // The backend-sensitive files run again on tensorflow (vitest.tensorflow.config.ts).
    env: { COMLRL_BACKEND: process.env.COMLRL_BACKEND ?? 'wasm' },
    // The JSON report gives .ci/run its "N passed, N failed" line.
    reporters: ['default', 'json'],
    outputFile: { json: '.ci/out/vitest.json' },
  },
});
