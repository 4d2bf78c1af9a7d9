/** `comlrl/trainers`: the trainers (magrpo/, reinforce/, centralized-magrpo/, madpo/, marlhf/, collm/), what every trainer shares (core/) and the trainer registry (the built-in trainers register as this loads). */
export * from './core/index.js';
export * from './magrpo/index.js';
export * from './reinforce/index.js';
export * from './centralized-magrpo/index.js';
export * from './madpo/index.js';
export * from './marlhf/index.js';
export * from './collm/index.js';
export * from './presets.js';
export * from './registry.js';
export * from './builtin.js';
