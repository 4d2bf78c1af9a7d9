/** comlrl/envs — LLM Dec-POMDP environments: small toy tasks, TLDR, CoopHE and HouseBuild. */
export * from './toy/index.js';
export * from './tldr/index.js';
export * from './housebuild/index.js';
export * from './coophe/index.js';
