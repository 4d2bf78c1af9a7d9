export * from './rng.js';
export * from './stats.js';
