export * from './types.js';
export * from './agent.js';
