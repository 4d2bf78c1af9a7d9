export * from './atomic.js';
export * from './state.js';
export * from './model-identity.js';
