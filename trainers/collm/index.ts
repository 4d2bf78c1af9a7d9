/** CoLLM's actor-critic trainers: one trainer (Algorithm 1) over a critic set, the critic sets of CoLLM-DC and CoLLM-CC, and the pieces they share. */
export * from './config.js';
export * from './critic-set.js';
export * from './diagnostics.js';
export * from './layout.js';
export * from './metrics.js';
export * from './rollout.js';
export * from './run.js';
export * from './steps.js';
export * from './trainer.js';
export * from './decentralized.js';
export * from './centralized.js';
export * from './spec.js';
