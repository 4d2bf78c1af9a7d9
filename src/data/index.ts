export * from './errors.js';
export * from './split.js';
export * from './utf8.js';
export * from './read.js';
export * from './schemas.js';
export * from './load.js';
export * from './tasks.js';
export { describeItem, rowOriginOf } from './row-origin.js';
