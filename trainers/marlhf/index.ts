/** MARLHF: a joint reward model fitted to preferences, then MAGRPO's or CoLLM's update on its score. */
export * from './config.js';
export * from './env.js';
export * from './reward-model.js';
export * from './phase1.js';
export * from './trainer.js';
export * from './actor-critic.js';
export * from './factory.js';
export * from './spec.js';
