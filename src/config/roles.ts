/**
 * A trainer's model roles, declared once next to its schema: the agents, its critic LMs, a
 * reward model and the frozen references — how many of each a run loads given its parsed section
 * and number of agents, which model each starts from (and so which share a base), and which
 * train. Config parsing (which `model.*` keys are allowed or ignored), the CLI's loading,
 * save/resume layouts, `comlrl eval` and the generated config reference all read this one
 * declaration (the trainer registry, trainers/registry.ts, adds the parts that need the trainer
 * code: where a saved run keeps each role).
 *
 * Sharing rules every trainer follows (so a declaration does not repeat them): agents on one
 * model folder share one frozen base under LoRA, each with its own adapter; a critic or reward
 * model with no folder of its own starts from its agent's model (CoMLRL's default), as a separate
 * copy; a reference is frozen, and under LoRA without `model.reference_model` it is the agent's
 * own base with the adapter off (no extra model).
 */
import type { TrainerSectionFields } from './section-fields.js';

/** Why a section trains no critic model of its own this run (CoLLM-DC's `use_separate_critic: false`). */
export interface CriticModelsOff {
  /** The section field that says so, e.g. `use_separate_critic`. */
  readonly field: string;
  /** What its value means, e.g. 'is false (a value head on each actor)'. */
  readonly means: string;
}

/** The agents: the policies a trainer trains (always trained). */
export interface AgentRole<C> {
  /**
   * How many agent models it trains on a task whose env has `envAgents` agents. Default: the
   * section's `num_agents`, else `envAgents`; CentralizedMAGRPO: 1 (one joint policy).
   */
  count?(config: C, envAgents: number): number;
  /** What `count` gives, for the docs (e.g. 'one joint policy over the task's roles'). */
  readonly hint?: string;
}

/** Critic LMs: trained value models (an LM with a value head), loaded after any reward model. */
export interface CriticRole<C> {
  /** How many with `numAgents` agents (0: none this run, e.g. value heads on the actors instead). */
  count(config: C, numAgents: number): number;
  /** What they are, for messages, e.g. 'one per agent'. */
  readonly hint: string;
  /**
   * When the parsed section trains no critic model of its own: the field that says so and what it
   * means; the critic keys of `model` are then errors naming that field. Undefined: it has some.
   */
  off?(config: C): CriticModelsOff | undefined;
  /** A section field naming the critics' model folder (MARLHF's `critic_model_name`), before `model.critics` / `model.critic_model`. */
  readonly modelField?: string;
  /** Whether the section places them with `critic_devices` (CoMLRL's IAC / MAAC; src/config/devices.ts). */
  readonly placedByCriticDevices?: boolean;
}

/** A trained reward model scoring joint actions (MARLHF's, fitted to preferences before the policy update). */
export interface RewardModelRole {
  /** What it is, for messages, e.g. 'one joint reward model'. */
  readonly hint: string;
  /** A section field naming its model folder (MARLHF's `reward_model_name`), before `model.critics[0]` / `model.critic_model`. */
  readonly modelField?: string;
}

/** When a trainer loads each agent's frozen reference. */
export type ReferenceUse =
  /** Only with `reference_kl_enabled: true` (the reference KL every trainer offers). */
  | 'kl'
  /** Always: its loss scores against the reference (MADPO's DPO loss). */
  | 'always';

/** The model roles of a trainer (see the module comment). */
export interface TrainerRoles<C = TrainerSectionFields> {
  /** The agents (default: `num_agents`, else the env's agents). */
  readonly agents?: AgentRole<C>;
  /** A trained reward model, first of the trainer's value models. */
  readonly rewardModel?: RewardModelRole;
  /** Critic LMs, after the reward model. */
  readonly critics?: CriticRole<C>;
  /** When the frozen references are loaded. */
  readonly reference: ReferenceUse;
}

/**
 * Whether a trainer with these roles takes the critic keys of `model` (`critics`, `critic_model`,
 * `critic_lora`): it has critics or a reward model (whose folder they may name).
 */
export function takesCriticKeys(roles: TrainerRoles<never>): boolean {
  return roles.critics !== undefined || roles.rewardModel !== undefined;
}

/** The section fields that name a model folder of a role (made absolute like `model.*` paths). */
export function roleModelFields(roles: TrainerRoles<never>): string[] {
  return [roles.rewardModel?.modelField, roles.critics?.modelField].filter((f): f is string => f !== undefined);
}

/** What the value models (reward model, then critics) are, for messages; undefined without any. */
export function valueModelsHint(roles: TrainerRoles<never>): string | undefined {
  const parts = [roles.rewardModel?.hint, roles.critics?.hint].filter((h): h is string => h !== undefined);
  return parts.length === 0 ? undefined : parts.join(', then ');
}

/** Whether a run of a trainer with these roles loads references, given its section. */
export function referencesNeeded(roles: TrainerRoles<never>, section: TrainerSectionFields): boolean {
  return roles.reference === 'always' || section.reference_kl_enabled === true;
}

/**
 * The roles in words, one line per role, for the generated config reference: what a run of the
 * trainer loads, how many, what each starts from and whether it trains.
 */
export function describeRoles(roles: TrainerRoles<never>, section: string): string[] {
  const count = roles.agents?.hint ?? `\`${section}.num_agents\`, else the task's agents`;
  const lines = [`agents: ${count}; trained; agents on one folder share one frozen base under LoRA`];
  if (roles.rewardModel) {
    const from = roles.rewardModel.modelField ? `\`${section}.${roles.rewardModel.modelField}\`, else ` : '';
    lines.push(`reward model: ${roles.rewardModel.hint}; from ${from}\`model.critics[0]\` / \`model.critic_model\`, else agent 0's model; trained`);
  }
  if (roles.critics) {
    const from = roles.critics.modelField ? `\`${section}.${roles.critics.modelField}\`, else ` : '';
    const off = roles.critics.off ? ' (none when the section turns them off)' : '';
    lines.push(`critics: ${roles.critics.hint}${off}; from ${from}\`model.critics\` / \`model.critic_model\`, else their agent's model; trained`);
  }
  lines.push(
    `reference: ${roles.reference === 'always' ? 'always' : `with \`${section}.reference_kl_enabled\``}, one per agent; frozen; \`model.reference_model\`, else the agent's starting model (under LoRA: its base with the adapter off)`,
  );
  return lines;
}
