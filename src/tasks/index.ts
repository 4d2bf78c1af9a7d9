export * from './spec.js';
export * from './registry.js';
export * from './metrics.js';
