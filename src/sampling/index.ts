/** Next-token selection with Hugging Face sampling semantics (temperature → top-k → top-p). */
export { resolveNextTokenOptions } from './options.js';
export type { NextTokenOptions, ResolvedNextTokenOptions } from './options.js';
export { processRow, processRowResolved, processLogits } from './process.js';
export type { CandidateDistribution } from './process.js';
export { kthLargest } from './topk.js';
export { sampleNextTokens, sampleFromDistribution, greedyToken } from './sample.js';
export type { NextTokens } from './sample.js';
export { sampleNextTokensOnDevice } from './device.js';
export { TRANSFORMERS_SAMPLING_DEFAULTS, parseGenerationSampling, resolveSampling, describeSampling } from './defaults.js';
export type { CheckpointSampling, RequestedSampling, ResolvedSampling, SamplingSource } from './defaults.js';
