export * from './task.js';
export * from './env.js';
