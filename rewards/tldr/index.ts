/**
 * TLDR (LLM_Collab_Writing): the coordination reward with its per-level breakdown, the eval logger
 * metrics and means, the word lists, and the agent prompts. The Python-semantics helpers live in
 * `src/util/python-text.ts` and are imported by module path where needed.
 */
export * from './constants.js';
export * from './logger.js';
export * from './prompts.js';
export * from './reward.js';
export { findTransitions, type TransitionMatches } from './text.js';
