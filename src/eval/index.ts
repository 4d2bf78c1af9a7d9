export * from './passk.js';
