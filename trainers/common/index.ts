/** Pieces every trainer shares (run bookkeeping, prompt encoding, generation, policy-gradient step, eval, metrics, saving, resume state, config helpers). The actor-critic family's own files are ac-*.ts / actor-critic.ts here; MAGRPO's are trainers/magrpo-*.ts. */
export * from './config.js';
export * from './eval.js';
export * from './generation.js';
export * from './loss.js';
export * from './metrics.js';
export * from './save.js';
export * from './state.js';
export * from './trainer.js';
