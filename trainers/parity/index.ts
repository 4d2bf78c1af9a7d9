/** The CoMLRL parity check (scripts/comlrl-parity.mjs): one trainer update against CoMLRL's recorded one. */
export * from './case.js';
export * from './compare.js';
export * from './vector.js';
export * from './recording.js';
