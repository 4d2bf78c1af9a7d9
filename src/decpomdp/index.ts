export * from './types.js';
export * from './agent.js';
export * from './history.js';
export * from './staged.js';
export * from './batch.js';
export * from './reward-processor.js';
export * from './comlrl-adapter.js';
export * from './load-agent.js';
