export * from './heads.js';
export * from './value-model.js';
export * from './inputs.js';
export * from './losses.js';
