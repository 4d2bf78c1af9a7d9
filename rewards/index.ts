/** `comlrl/rewards`: the task rewards, their breakdowns, prompts and feedback texts. */
export * from './tldr/index.js';
export * from './housebuild/index.js';
export * from './coophe/index.js';
