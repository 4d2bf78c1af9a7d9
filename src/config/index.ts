export * from './hash.js';
export * from './schema.js';
export * from './load.js';
export * from './trainers.js';
export * from './roles.js';
export * from './devices.js';
export * from './paths.js';
