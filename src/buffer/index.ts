export * from './replay.js';
export * from './targets.js';
