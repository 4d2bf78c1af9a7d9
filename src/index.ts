/**
 * comlrl — multi-agent reinforcement learning for LLM collaboration.
 * Each concern lives in its own folder; this file only re-exports their public surfaces.
 */
export * from './backend/index.js';
export * from './model/index.js';
export * from './tokenizer/index.js';
export * from './sampling/index.js';
export * from './optim/index.js';
export * from './critic/index.js';
export * from './buffer/index.js';
export * from './decpomdp/index.js';
export * from './data/index.js';
export * from './config/index.js';
export * from './logging/index.js';
export * from './checkpoint/index.js';
export * from './eval/index.js';
export * from './util/index.js';
export * from './tasks/index.js';
