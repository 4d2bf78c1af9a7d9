/** MARLHF: a joint reward model fitted to preferences, then MAGRPO on its score. */
export * from './config.js';
export * from './env.js';
export * from './reward-model.js';
export * from './trainer.js';
