/**
 * CentralizedMAGRPO (CoMLRL 1.4's `CentralizedMAGRPOTrainer`): one joint policy writes every
 * role's response in one completion; the task's centralized adapter builds its prompt from the
 * roles' prompts and splits its completion into the roles' responses, which the task's reward and
 * metrics score as they score n agents. Learning is MAGRPO's with one agent and one turn: per task
 * K joint completions, the group-relative advantages of their joint rewards, and
 *   loss = mean_k [ −A_k · Σ_t log π(token_t of joint completion k) ]
 * over every token of the joint completion (earlier roles' text is context for later roles').
 *
 * Eval episodes keep the joint completion (`completions[0][0]`, the one agent's); each step's
 * `info.centralized_roles` holds the roles' responses, and the eval callbacks get the episodes
 * with `completions[turn][role]` (see `roleEpisode`), as CoMLRL splits them for its metrics.
 */
import { CentralizedEnv, roleEpisode, type CentralizedAdapter } from '../../src/decpomdp/centralized.js';
import type { LLMDecPOMDP } from '../../src/decpomdp/types.js';
import type { EvalCallback } from '../core/eval.js';
import type { TrainerInputs } from '../core/trainer.js';
import { MAGRPOTrainer } from '../magrpo/trainer.js';
import { parseCentralizedMAGRPOConfig, type CentralizedMAGRPOConfig, type CentralizedMAGRPOConfigInput } from './config.js';

/** Constructor arguments of {@link CentralizedMAGRPOTrainer}. */
export interface CentralizedMAGRPOTrainerOptions<T, S> extends TrainerInputs<T, S> {
  /** CoMLRL `CentralizedMAGRPOConfig` fields (snake_case); `num_agents` counts the roles. */
  config?: CentralizedMAGRPOConfigInput;
  /** CoMLRL's `centralized_adapter`: how the joint policy's prompt and completion map to the roles. */
  centralizedAdapter: CentralizedAdapter<S>;
}

/** The eval callbacks of the task, each given the episodes split into the roles' responses. */
export function roleCallbacks<T, S>(callbacks: readonly EvalCallback<T, S>[]): EvalCallback<T, S>[] {
  return callbacks.map((cb) => (episodes) => cb(episodes.map(roleEpisode)));
}

/**
 * Trains one joint policy (`agents` holds exactly one agent) over a task's n roles.
 *
 * ```ts
 * const trainer = new CentralizedMAGRPOTrainer({ agents: [policy], env, trainTasks, centralizedAdapter: taggedRolesAdapter() });
 * ```
 */
export class CentralizedMAGRPOTrainer<T, S> extends MAGRPOTrainer<T, S> {
  /** The task's roles (its environment's agents); the config's `num_agents`. */
  readonly numRoles: number;
  /** The task's n-role environment (the trainer plays it through a one-agent {@link CentralizedEnv}). */
  readonly roleEnv: LLMDecPOMDP<T, S>;
  /** The validated config as given (`num_agents`: the roles). */
  readonly centralizedConfig: CentralizedMAGRPOConfig;

  constructor(options: CentralizedMAGRPOTrainerOptions<T, S>) {
    const { centralizedAdapter, env, agents } = options;
    const config = parseCentralizedMAGRPOConfig(options.config ?? {});
    if (agents.length !== 1) throw new Error(`CentralizedMAGRPOTrainer: centralized collaboration trains one joint policy: agents must hold exactly 1 agent, got ${agents.length}`);
    const roles = config.num_agents ?? env.numAgents;
    if (roles !== env.numAgents) throw new Error(`CentralizedMAGRPOTrainer: config num_agents (the roles) is ${roles} but env '${env.name}' has ${env.numAgents} agents`);
    for (const name of ['buildPrompt', 'parseCompletion'] as const) {
      if (typeof centralizedAdapter?.[name] !== 'function') throw new Error(`CentralizedMAGRPOTrainer: centralizedAdapter.${name} must be a function`);
    }
    super(
      { ...options, env: new CentralizedEnv(env, centralizedAdapter), evalCallbacks: roleCallbacks(options.evalCallbacks ?? []) },
      {
        names: { className: 'CentralizedMAGRPOTrainer', label: 'CentralizedMAGRPO', stateTag: 'centralized-magrpo' },
        // The run logic counts agents (one policy); the roles stay in centralizedConfig.
        parse: () => ({ ...config, num_agents: undefined }),
      },
    );
    this.numRoles = roles;
    this.roleEnv = env;
    this.centralizedConfig = config;
  }
}
