export * from './atomic.js';
export * from './state.js';
