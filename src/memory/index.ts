export * from './errors.js';
export * from './estimate.js';
export * from './plan.js';
export * from './settings.js';
