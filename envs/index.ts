/** comlrl/envs — LLM Dec-POMDP environments: small toy tasks, TLDR, CoopHE and HouseBuild; task folders. */
export * from './toy/index.js';
export * from './tldr/index.js';
export * from './housebuild/index.js';
export * from './coophe/index.js';
export * from './tasks.js';
export { coopHEMetrics, coopHEPassed, coopHEOptionsSchema, COOPHE_FEEDBACK_MODES } from './coophe/spec.js';
export { houseBuildOptionsSchema, type HouseBuildOptions } from './housebuild/spec.js';
