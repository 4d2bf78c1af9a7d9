/** Training primitives: AdamW with torch semantics, global-norm gradient clipping and learning-rate schedules. */
export { AdamW } from './adamw.js';
export type { AdamWRestorableState, AdamWState, Gradients, MomentValues, StoredMoment } from './adamw.js';
export { momentArray } from './adamw.js';
export { ADAMW_DEFAULTS, adamWConfigSchema, resolveAdamWConfig } from './config.js';
export type { AdamWConfig, AdamWOptions } from './config.js';
export { clipGradNorm, sumOfSquares } from './clip.js';
export type { ClippedGradients, ClipGradNormOptions } from './clip.js';
export { LR_SCHEDULER_TYPES, lrFactor, lrScheduleIssues, resolveWarmupSteps, scheduledLr } from './schedule.js';
export type { LrSchedule, LrScheduleIssue, LrSchedulerType } from './schedule.js';
