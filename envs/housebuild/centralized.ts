/**
 * HouseBuild's centralized adapter (CentralizedMAGRPO, single-turn): one policy writes both
 * builders' `/fill` command lists. The joint prompt gives each builder's own turn-1 prompt (its
 * block list differs) and asks for each list inside CoMLRL's indexed role tags, `<agent_0>` …
 * `</agent_0>` for Agent 1 and `<agent_1>` … `</agent_1>` for Agent 2; the completion is split as
 * CoMLRL's tagged adapter splits it (parseIndexedRoleSections): a builder without its section
 * issues no commands, and a completion with neither section does not parse (both issue none).
 */
import type { HouseBuildTask } from '../../src/data/schemas.js';
import { indexedRoleTags, parseIndexedRoleSections, type CentralizedAdapter } from '../../src/decpomdp/centralized.js';
import type { CoMLRLState } from '../../src/decpomdp/comlrl-adapter.js';

/** See the module comment. */
export const houseBuildCentralizedAdapter: CentralizedAdapter<CoMLRLState<HouseBuildTask>> = {
  buildPrompt(_state, rolePrompts) {
    if (rolePrompts.length !== 2) throw new Error(`housebuild centralized adapter: the team has 2 builders, got ${rolePrompts.length} prompts`);
    const sections = rolePrompts.map((p, i) => `Agent ${i + 1}'s own instructions:\n${p}`);
    const format = rolePrompts.map((_, i) => {
      const { open, close } = indexedRoleTags(i);
      return `${open}\nAgent ${i + 1}'s commands, one per line\n${close}`;
    });
    return [
      'You plan for both agents of a 2-person Minecraft building team at once: write the commands each agent will run, so that together they build the structure.',
      "Each agent may use only the blocks its own instructions list. Apart from the tags below, follow each agent's instructions as written.",
      ...sections,
      `Return exactly one section per agent, in this format and nothing outside it:\n${format.join('\n')}`,
    ].join('\n\n');
  },
  parseCompletion(completion, _state, numRoles) {
    return parseIndexedRoleSections(completion, numRoles);
  },
};
