/** What every trainer shares: run bookkeeping and the training loop (trainer.ts) with its callbacks (callbacks.ts; TensorBoard logging: tensorboard.ts), prompt encoding and generation, the policy-gradient step, the reference KL, eval, metrics, the saved layout, checkpoints and resume, config helpers. The algorithms live in ../magrpo/ and ../collm/. */
export * from './callbacks.js';
export * from './checkpoint.js';
export * from './config.js';
export * from './devices.js';
export * from './eval.js';
export * from './generation.js';
export * from './joint-step.js';
export * from './loss.js';
export * from './metrics.js';
export * from './reference-kl.js';
export * from './save.js';
export * from './state.js';
export * from './tensorboard.js';
export * from './trace.js';
export * from './trainer.js';
