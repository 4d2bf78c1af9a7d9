/** Training primitives: AdamW with torch semantics and global-norm gradient clipping. */
export { AdamW } from './adamw.js';
export type { AdamWRestorableState, AdamWState, Gradients, MomentValues, StoredMoment } from './adamw.js';
export { momentArray } from './adamw.js';
export { ADAMW_DEFAULTS, adamWConfigSchema, resolveAdamWConfig } from './config.js';
export type { AdamWConfig, AdamWOptions } from './config.js';
export { clipGradNorm, sumOfSquares } from './clip.js';
export type { ClippedGradients, ClipGradNormOptions } from './clip.js';
