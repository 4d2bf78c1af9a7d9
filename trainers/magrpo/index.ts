/** MAGRPO: the trainer, its config and its group-relative advantages. */
export * from './config.js';
export * from './advantage.js';
export * from './trainer.js';
export * from './spec.js';
