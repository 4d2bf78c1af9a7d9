export * from './config.js';
export * from './adapter.js';
export * from './base.js';
export * from './peft-io.js';
export * from './frozen-linear.js';
export * from './joint.js';
