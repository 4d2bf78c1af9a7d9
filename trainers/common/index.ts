/** Pieces every trainer shares (run bookkeeping, prompt encoding, generation, policy-gradient step, minibatches, eval, metrics, saving, resume state, config helpers). */
export * from './advantage.js';
export * from './config.js';
export * from './eval.js';
export * from './generation.js';
export * from './loss.js';
export * from './metrics.js';
export * from './minibatch.js';
export * from './save.js';
export * from './state.js';
export * from './trainer.js';
