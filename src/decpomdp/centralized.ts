/**
 * Centralized collaboration (CoMLRL 1.4's `CentralizedMAGRPOTrainer` and its adapter): one joint
 * policy writes every role's response in a single completion. A task supplies a
 * {@link CentralizedAdapter} — CoMLRL's `build_prompt` (the joint prompt from the roles' own
 * prompts) and `parse_completion` (the joint completion back into one response per role) — and
 * {@link CentralizedEnv} turns the task's n-role environment into a one-agent one: the policy
 * learns from the joint text, while rewards and metrics see the roles' responses as before.
 */
import type { GlobalFeatures, GlobalInfo, LLMDecPOMDP, StepResult } from './types.js';

/** How a task's roles fold into one joint completion and back. */
export interface CentralizedAdapter<S> {
  /**
   * CoMLRL's `build_prompt`: the joint policy's prompt for `state`, given each role's own prompt
   * (`rolePrompts[i]` = the env's observation of role i). Must be non-empty.
   */
  buildPrompt(state: S, rolePrompts: readonly string[]): string;
  /**
   * CoMLRL's `parse_completion`: the joint completion split into exactly `numRoles` responses, or
   * null when it does not parse (as CoMLRL's parse error: every role then responds with '').
   */
  parseCompletion(completion: string, state: S, numRoles: number): readonly string[] | null;
}

/** The `info` key under which {@link CentralizedEnv.step} records the roles' responses. */
export const CENTRALIZED_ROLES_KEY = 'centralized_roles';

/**
 * The roles' responses of a joint completion (a parse failure: every role says ''). Throws when
 * the adapter breaks its contract (a wrong count or non-strings), naming the adapter's task.
 */
export function splitJointCompletion<S>(adapter: CentralizedAdapter<S>, completion: string, state: S, numRoles: number, envName: string): string[] {
  const outputs = adapter.parseCompletion(completion, state, numRoles);
  if (outputs === null) return Array.from({ length: numRoles }, () => '');
  if (!Array.isArray(outputs) || outputs.length !== numRoles || !outputs.every((o) => typeof o === 'string')) {
    throw new Error(`centralized adapter of '${envName}': parseCompletion must return ${numRoles} strings (or null when the completion does not parse), got ${JSON.stringify(outputs)}`);
  }
  return [...outputs];
}

/**
 * A task's environment as one joint agent plays it: role i's observation goes into the adapter's
 * joint prompt, the joint completion is split into the roles' joint action, and the roles'
 * responses are recorded in the step's `info` (`centralized_roles`) for metrics.
 */
export class CentralizedEnv<T, S> implements LLMDecPOMDP<T, S> {
  readonly name: string;
  readonly numAgents = 1;
  readonly horizon: number;
  /** The task's roles (its environment's agents). */
  readonly numRoles: number;
  /** The task's numeric m_t, when it has one. */
  readonly globalFeatures?: GlobalFeatures<S>;

  constructor(
    /** The task's n-role environment. */
    readonly roles: LLMDecPOMDP<T, S>,
    readonly adapter: CentralizedAdapter<S>,
  ) {
    this.name = roles.name;
    this.horizon = roles.horizon;
    this.numRoles = roles.numAgents;
    if (roles.globalFeatures) this.globalFeatures = roles.globalFeatures;
  }

  initialState(task: T): S {
    return this.roles.initialState(task);
  }

  observe(state: S, agent: number): string {
    if (agent !== 0) throw new Error(`observe: the centralized '${this.name}' has one agent, got agent ${agent}`);
    const rolePrompts = Array.from({ length: this.numRoles }, (_, i) => this.roles.observe(state, i));
    const prompt = this.adapter.buildPrompt(state, rolePrompts);
    if (typeof prompt !== 'string' || prompt.trim() === '') throw new Error(`centralized adapter of '${this.name}': buildPrompt must return a non-empty prompt`);
    return prompt;
  }

  async step(state: S, jointAction: readonly string[]): Promise<StepResult<S>> {
    if (jointAction.length !== 1) throw new Error(`${this.name} (centralized): joint action has ${jointAction.length} completions for 1 joint agent`);
    const roles = splitJointCompletion(this.adapter, jointAction[0], state, this.numRoles, this.name);
    const result = await this.roles.step(state, roles);
    return { ...result, info: { ...result.info, [CENTRALIZED_ROLES_KEY]: roles } };
  }

  globalInfo(state: S): GlobalInfo {
    return this.roles.globalInfo(state);
  }
}

/** What {@link roleEpisode} reads of an episode: its completions and each step's `info`. */
export interface JointEpisodeFields {
  readonly completions: readonly (readonly string[])[];
  readonly infos: readonly Readonly<Record<string, unknown>>[];
}

/**
 * An episode played through a {@link CentralizedEnv} with its completions split into the roles'
 * responses (`completions[turn][role]`), as the task's metrics read them; everything else as it was.
 * @throws Error when a step's info lacks the roles (the episode was not played centralized).
 */
export function roleEpisode<E extends JointEpisodeFields>(episode: E): E & { completions: string[][] } {
  const completions = episode.infos.map((info, turn) => {
    const roles = info[CENTRALIZED_ROLES_KEY];
    if (!Array.isArray(roles) || !roles.every((r): r is string => typeof r === 'string')) throw new Error(`roleEpisode: turn ${turn + 1} has no '${CENTRALIZED_ROLES_KEY}' in its info (not a centralized episode)`);
    return roles;
  });
  return { ...episode, completions };
}

/** Options of {@link taggedRolesAdapter}. */
export interface TaggedRolesOptions {
  /** The roles' names, in role order (default 'Agent 1', 'Agent 2', ...). */
  readonly roleNames?: readonly string[];
  /** The line before the roles' prompts (default: what to write and how). */
  readonly instruction?: string;
}

/**
 * A general adapter for text tasks: the joint prompt lists each role's own prompt under its name
 * and asks for every response after a `[name]` tag, in order; the completion is cut at the tags.
 * A completion missing a tag (or with them out of order) does not parse.
 */
export function taggedRolesAdapter<S>(options: TaggedRolesOptions = {}): CentralizedAdapter<S> {
  const name = (i: number) => options.roleNames?.[i] ?? `Agent ${i + 1}`;
  return {
    buildPrompt(_state, rolePrompts) {
      const tags = rolePrompts.map((_, i) => `[${name(i)}]`).join(', ');
      const head = options.instruction ?? `You write the responses of ${rolePrompts.length} collaborators. Answer each one's task after its tag, in order: ${tags}.`;
      return [head, ...rolePrompts.map((p, i) => `### ${name(i)}\n${p}`)].join('\n\n');
    },
    parseCompletion(completion, _state, numRoles) {
      const out: string[] = [];
      let from = 0;
      const starts: number[] = [];
      for (let i = 0; i < numRoles; i++) {
        const tag = `[${name(i)}]`;
        const at = completion.indexOf(tag, from);
        if (at < 0) return null;
        starts.push(at);
        from = at + tag.length;
      }
      for (let i = 0; i < numRoles; i++) {
        const begin = starts[i] + `[${name(i)}]`.length;
        const end = i + 1 < numRoles ? starts[i + 1] : completion.length;
        out.push(completion.slice(begin, end).trim());
      }
      return out;
    },
  };
}

/** The tags of role i in CoMLRL's generic centralized protocol: `<agent_i>` … `</agent_i>` (0-based). */
export function indexedRoleTags(role: number): { open: string; close: string } {
  return { open: `<agent_${role}>`, close: `</agent_${role}>` };
}

/**
 * CoMLRL's generic centralized parse (its tagged adapter): role i's response is the text between
 * the first `<agent_i>` and the next `</agent_i>` after it (tags matched case-insensitively, with
 * spaces allowed inside the brackets), trimmed; a role without its section gets ''. A completion
 * with no role's section at all does not parse (null: every role then responds with '').
 */
export function parseIndexedRoleSections(completion: string, numRoles: number): string[] | null {
  const out: string[] = [];
  let found = false;
  for (let i = 0; i < numRoles; i++) {
    const section = new RegExp(`<\\s*agent_${i}\\s*>([\\s\\S]*?)<\\s*/\\s*agent_${i}\\s*>`, 'i').exec(completion);
    if (section !== null) found = true;
    out.push(section !== null ? section[1].trim() : '');
  }
  return found ? out : null;
}
