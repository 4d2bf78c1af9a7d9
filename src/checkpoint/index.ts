export * from './atomic.js';
