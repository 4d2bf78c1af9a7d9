/** MARLHF's registry entry: its section, schema and roles (a trained joint reward model, then maac / iac critics), registered by ../builtin.ts. */
import { magrpoEvalEarlyTermination } from '../magrpo/config.js';
import { trainerInputsOf, type CriticModelDefaults, type TrainerSpec } from '../registry.js';
import { marlhfActorCriticLayout, MARLHFActorCriticTrainer } from './actor-critic.js';
import { isActorCriticAlgorithm, marlhfConfigSchema, type MARLHFConfig } from './config.js';
import { marlhfLayout } from './phase1.js';
import { MARLHFTrainer } from './trainer.js';

/** Critic LMs of a MARLHF run besides the reward model: maac's centralized critic, iac's separate critic per agent. */
function marlhfCritics(config: MARLHFConfig, numAgents: number): number {
  if (config.rl_algorithm === 'maac') return 1;
  return config.rl_algorithm === 'iac' && config.use_separate_critic ? numAgents : 0;
}

/**
 * MARLHF's value models: the reward model (`reward_model_name`, else `model.critic_model`, else
 * agent 0's model, as CoMLRL), then maac / iac's critics (`critic_model_name`, else
 * `model.critic_model`, else the agent's own model); `model.critics` lists them all in that order.
 */
function marlhfModels(config: MARLHFConfig, models: CriticModelDefaults): readonly string[] | null {
  const extra = marlhfCritics(config, models.agents.length);
  if (extra === 0) return config.reward_model_name === null ? null : [config.reward_model_name];
  const count = 1 + extra;
  if (models.critics && models.critics.length !== count) {
    throw new Error(`model.critics has ${models.critics.length} entries; marlhf with rl_algorithm ${config.rl_algorithm} needs ${count}: the reward model, then ${extra === 1 ? 'the centralized critic' : 'one critic per agent'}`);
  }
  const reward = config.reward_model_name ?? models.critics?.[0] ?? models.criticModel ?? models.agents[0];
  const critics = Array.from({ length: extra }, (_, j) => config.critic_model_name ?? models.critics?.[1 + j] ?? models.criticModel ?? models.agents[j]);
  return [reward, ...critics];
}

/** MARLHF: a joint reward model (saved as `reward_model/`) fitted to preferences, then MAGRPO's (magrpo family) or CoLLM's (maac, iac) update on its score. */
export const MARLHF_TRAINER: TrainerSpec<MARLHFConfig> = {
  name: 'marlhf',
  label: 'MARLHF',
  section: 'marlhf',
  schema: marlhfConfigSchema,
  roles: {
    rewardModel: { hint: 'one joint reward model', modelField: 'reward_model_name' },
    critics: { count: marlhfCritics, hint: 'maac: one centralized critic, iac: one critic per agent', modelField: 'critic_model_name' },
    reference: 'kl',
    models: marlhfModels,
    layout: (config, dir, n) => (isActorCriticAlgorithm(config.rl_algorithm) ? marlhfActorCriticLayout(config, dir, n) : marlhfLayout(dir, n)),
  },
  evalEarlyTermination: (config) => (isActorCriticAlgorithm(config.rl_algorithm) ? config.early_termination_threshold : magrpoEvalEarlyTermination(config)),
  build: (inputs) => {
    const { config } = inputs;
    const count = 1 + marlhfCritics(config, inputs.agents.length);
    if (inputs.critics.length !== count) throw new Error(`marlhf needs ${count} critic LMs (the reward model first), got ${inputs.critics.length}`);
    const [rewardModel, ...critics] = inputs.critics;
    const [rewardHead, ...criticHeads] = inputs.heads;
    const reward = { ...trainerInputsOf(inputs), config, rewardModel, ...(rewardHead ? { rewardHead } : {}) };
    if (config.rl_algorithm === 'maac') return new MARLHFActorCriticTrainer<unknown, unknown>({ ...reward, critic: critics[0], ...(criticHeads.length > 0 ? { criticHead: criticHeads[0] } : {}) });
    if (config.rl_algorithm === 'iac') return new MARLHFActorCriticTrainer<unknown, unknown>({ ...reward, ...(critics.length > 0 ? { critics } : {}), ...(criticHeads.length > 0 ? { criticHeads } : {}) });
    return new MARLHFTrainer<unknown, unknown>(reward);
  },
};
