export * from './errors.js';
export * from './estimate.js';
export * from './machine.js';
export * from './plan.js';
export * from './settings.js';
