export * from './init.js';
export * from './ops.js';
export * from './wasm-kernels.js';
export * from './tensorflow.js';
