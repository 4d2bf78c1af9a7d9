/**
 * The toy task's centralized adapter (CentralizedMAGRPO): one joint policy answers for both roles.
 * Both roles see the same cue on the single turn, so the joint prompt is that observation (inside
 * the toy vocabulary, which tiny word-level models need); the joint completion's first word is
 * role 0's answer and its second word role 1's.
 */
import type { CentralizedAdapter } from '../../src/decpomdp/centralized.js';
import type { ToyState } from './env.js';

/** See the module comment. */
export const toyCentralizedAdapter: CentralizedAdapter<ToyState> = {
  buildPrompt(_state, rolePrompts) {
    // Distinct role prompts (not on the single turn) are kept in role order, space-separated.
    return [...new Set(rolePrompts)].join(' ');
  },
  parseCompletion(completion, _state, numRoles) {
    const words = completion.split(/\s+/).filter((w) => w !== '');
    return Array.from({ length: numRoles }, (_, i) => words[i] ?? '');
  },
};
