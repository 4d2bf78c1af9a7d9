/**
 * The hidden-cue task's centralized adapter (CentralizedMAGRPO on the single-turn, dense variant):
 * the joint policy sees both private cues, role 0's first (`cue red cue blue`, inside the task's
 * 9-word vocabulary), and its completion's first word is role 0's answer, its second role 1's.
 * Centralized, the partial observability the task is built on is gone: one policy knows both cues.
 */
import type { CentralizedAdapter } from '../../src/decpomdp/centralized.js';
import type { HiddenCueState } from './index.js';

/** See the module comment. */
export const hiddenCueCentralizedAdapter: CentralizedAdapter<HiddenCueState> = {
  buildPrompt: (_state, rolePrompts) => rolePrompts.join(' '),
  parseCompletion(completion, _state, numRoles) {
    const words = completion.split(/\s+/).filter((w) => w !== '');
    return Array.from({ length: numRoles }, (_, i) => words[i] ?? '');
  },
};
