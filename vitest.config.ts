import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // tfjs backends are process-global; forks keep each file's backend state isolated.
    pool: 'forks',
    maxWorkers: 2,
  },
});
