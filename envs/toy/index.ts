export * from './task.js';
export * from './env.js';
export * from './centralized.js';
