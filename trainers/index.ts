/** `comlrl/trainers`: the trainers and the pieces they share. */
export * from './common/index.js';
export * from './magrpo-config.js';
export * from './magrpo-advantage.js';
export * from './magrpo-minibatch.js';
export * from './magrpo.js';
export * from './common/actor-critic.js';
export * from './common/ac-run.js';
export * from './common/ac-rollout.js';
export * from './common/ac-metrics.js';
export * from './actor-critic-config.js';
export * from './presets.js';
export * from './collm-dc.js';
export * from './collm-cc.js';
