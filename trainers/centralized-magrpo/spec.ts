/** CentralizedMAGRPO's registry entry: one joint agent over the task's roles, registered by ../builtin.ts. */
import { CentralizedEnv, roleEpisode, type CentralizedAdapter } from '../../src/decpomdp/centralized.js';
import { trainerInputsOf, type PlayedTask, type TrainerSpec } from '../registry.js';
import { centralizedMAGRPOConfigSchema, type CentralizedMAGRPOConfig } from './config.js';
import { CentralizedMAGRPOTrainer, roleCallbacks } from './trainer.js';

/** A task's centralized adapter. @throws Error naming the env when the task has none. */
function adapterOf(centralized: CentralizedAdapter<unknown> | undefined, envName: string): CentralizedAdapter<unknown> {
  if (centralized === undefined) throw new Error(`CentralizedMAGRPO: task '${envName}' has no centralized adapter (its setup's \`centralized\`: build_prompt / parse_completion); the toy-coord and tldr tasks have one`);
  return centralized;
}

/** CentralizedMAGRPO: one joint policy (one agent model) over the task's roles, through the task's centralized adapter. */
export const CENTRALIZED_MAGRPO_TRAINER: TrainerSpec<CentralizedMAGRPOConfig> = {
  name: 'centralized-magrpo',
  label: 'CentralizedMAGRPO',
  section: 'centralized_magrpo',
  schema: centralizedMAGRPOConfigSchema,
  roles: { agents: { count: () => 1, hint: "one joint policy over the task's roles" }, reference: 'kl' },
  evalEarlyTermination: () => null,
  playTask: (_config, task): PlayedTask => {
    const adapter = adapterOf(task.centralized, task.env.name);
    return {
      env: new CentralizedEnv(task.env, adapter),
      evalCallbacks: roleCallbacks(task.evalCallbacks),
      paperMetrics: (samples, ks) => task.paperMetrics(samples.map((eps) => eps.map(roleEpisode)), ks),
      centralized: adapter,
    };
  },
  build: (inputs) =>
    new CentralizedMAGRPOTrainer<unknown, unknown>({ ...trainerInputsOf(inputs), config: inputs.config, centralizedAdapter: adapterOf(inputs.centralized, inputs.env.name) }),
};
