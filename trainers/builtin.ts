/**
 * The built-in trainers' registry entries (see ./registry.ts), registered as this module loads:
 * MAGRPO (`magrpo:`), CoLLM-DC (`collm_dc:`, CoMLRL's `iac:`) and CoLLM-CC (`collm_cc:`, `maac:`),
 * then the REINFORCE family (`mareinforce:`, `maremax:`, `marloo:`) and CentralizedMAGRPO
 * (`centralized_magrpo:`), and MADPO (`madpo:`) and MARLHF (`marlhf:`).
 */
import { centralizedCriticLayout, separateCriticsLayout, sharedHeadsLayout } from './collm/layout.js';
import { CoLLMCCTrainer } from './collm/centralized.js';
import { collmCCConfigSchema, collmDCConfigSchema, type CoLLMCCConfig, type CoLLMDCConfig } from './collm/config.js';
import { CoLLMDCTrainer } from './collm/decentralized.js';
import { CentralizedEnv, roleEpisode, type CentralizedAdapter } from '../src/decpomdp/centralized.js';
import { centralizedMAGRPOConfigSchema, type CentralizedMAGRPOConfig } from './centralized-magrpo/config.js';
import { CentralizedMAGRPOTrainer, roleCallbacks } from './centralized-magrpo/trainer.js';
import { agentDirs } from './core/save.js';
import { madpoConfigSchema, type MADPOConfig } from './madpo/config.js';
import { MADPOTrainer } from './madpo/trainer.js';
import { magrpoConfigSchema, magrpoEvalEarlyTermination, type MAGRPOConfig } from './magrpo/config.js';
import { MAGRPOTrainer } from './magrpo/trainer.js';
import { mareinforceConfigSchema, maremaxConfigSchema, marlooConfigSchema, type MAREINFORCEConfig, type MAReMaxConfig, type MARLOOConfig } from './reinforce/config.js';
import { MAREINFORCETrainer, MAReMaxTrainer, MARLOOTrainer } from './reinforce/trainer.js';
import { marlhfActorCriticLayout, MARLHFActorCriticTrainer } from './marlhf/actor-critic.js';
import { isActorCriticAlgorithm, marlhfConfigSchema, type MARLHFConfig } from './marlhf/config.js';
import { marlhfLayout } from './marlhf/phase1.js';
import { MARLHFTrainer } from './marlhf/trainer.js';
import { registerTrainer, type CriticModelDefaults, type PlayedTask, type TrainerBuildInputs, type TrainerSpec } from './registry.js';

/** The constructor inputs every trainer shares, from the registry's build inputs. */
function trainerInputs<C>(inputs: TrainerBuildInputs<C>) {
  const { agents, env, trainTasks, evalTasks, evalCallbacks, logger } = inputs;
  return { agents, env, trainTasks, evalTasks, evalCallbacks, logger };
}

/** MAGRPO: no critics; its threshold prunes the rollout tree and, unless `eval_early_termination: false`, ends eval episodes (as `MAGRPOTrainer.evaluate`). */
export const MAGRPO_TRAINER: TrainerSpec<MAGRPOConfig> = {
  name: 'magrpo',
  label: 'MAGRPO',
  section: 'magrpo',
  schema: magrpoConfigSchema,
  usesCritics: false,
  evalEarlyTermination: magrpoEvalEarlyTermination,
  build: (inputs) => new MAGRPOTrainer<unknown, unknown>({ ...trainerInputs(inputs), config: inputs.config }),
};

/** MAREINFORCE: MAGRPO without a baseline (`advantage_mode` 'raw'); no critics, eval as MAGRPO. */
export const MAREINFORCE_TRAINER: TrainerSpec<MAREINFORCEConfig> = {
  name: 'mareinforce',
  label: 'MAREINFORCE',
  section: 'mareinforce',
  schema: mareinforceConfigSchema,
  usesCritics: false,
  evalEarlyTermination: magrpoEvalEarlyTermination,
  build: (inputs) => new MAREINFORCETrainer<unknown, unknown>({ ...trainerInputs(inputs), config: inputs.config }),
};

/** MAReMax: MAGRPO with the group's best return as the baseline (`advantage_mode` 'max'). */
export const MAREMAX_TRAINER: TrainerSpec<MAReMaxConfig> = {
  name: 'maremax',
  label: 'MAReMax',
  section: 'maremax',
  schema: maremaxConfigSchema,
  usesCritics: false,
  evalEarlyTermination: magrpoEvalEarlyTermination,
  build: (inputs) => new MAReMaxTrainer<unknown, unknown>({ ...trainerInputs(inputs), config: inputs.config }),
};

/** MARLOO: MAGRPO with the leave-one-out baseline (`advantage_mode` 'rloo'). */
export const MARLOO_TRAINER: TrainerSpec<MARLOOConfig> = {
  name: 'marloo',
  label: 'MARLOO',
  section: 'marloo',
  schema: marlooConfigSchema,
  usesCritics: false,
  evalEarlyTermination: magrpoEvalEarlyTermination,
  build: (inputs) => new MARLOOTrainer<unknown, unknown>({ ...trainerInputs(inputs), config: inputs.config }),
};

/** MADPO: multi-agent DPO on the joint reward's preferences; no critics; each agent's frozen reference (adapters off under LoRA); eval as MAGRPO. */
export const MADPO_TRAINER: TrainerSpec<MADPOConfig> = {
  name: 'madpo',
  label: 'MADPO',
  section: 'madpo',
  schema: madpoConfigSchema,
  usesCritics: false,
  usesReference: true,
  evalEarlyTermination: magrpoEvalEarlyTermination,
  build: (inputs) => new MADPOTrainer<unknown, unknown>({ ...trainerInputs(inputs), config: inputs.config }),
};

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
  usesCritics: false,
  agentCount: () => 1,
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
    new CentralizedMAGRPOTrainer<unknown, unknown>({ ...trainerInputs(inputs), config: inputs.config, centralizedAdapter: adapterOf(inputs.centralized, inputs.env.name) }),
};

/** Critic LMs of a MARLHF run besides the reward model: maac's centralized critic, iac's separate critic per agent. */
function marlhfCritics(config: MARLHFConfig, numAgents: number): number {
  if (config.rl_algorithm === 'maac') return 1;
  return config.rl_algorithm === 'iac' && config.use_separate_critic ? numAgents : 0;
}

/**
 * MARLHF's critic LMs: the reward model (`reward_model_name`, else `model.critic_model`, else
 * agent 0's model, as CoMLRL), then maac / iac's critics (`critic_model_name`, else
 * `model.critic_model`, else the agent's own model); `model.critics` lists them all in that order.
 */
function marlhfCriticModels(config: MARLHFConfig, models: CriticModelDefaults): readonly string[] | null {
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
  usesCritics: true,
  criticCount: (config, n) => 1 + marlhfCritics(config, n),
  criticsHint: 'one joint reward model, then maac: one centralized critic, iac: one critic per agent',
  criticModels: marlhfCriticModels,
  modelPathFields: ['reward_model_name', 'critic_model_name'],
  layout: (config, dir, n) => (isActorCriticAlgorithm(config.rl_algorithm) ? marlhfActorCriticLayout(config, dir, n) : marlhfLayout(dir, n)),
  evalEarlyTermination: (config) => (isActorCriticAlgorithm(config.rl_algorithm) ? config.early_termination_threshold : magrpoEvalEarlyTermination(config)),
  build: (inputs) => {
    const { config } = inputs;
    const count = 1 + marlhfCritics(config, inputs.agents.length);
    if (inputs.critics.length !== count) throw new Error(`marlhf needs ${count} critic LMs (the reward model first), got ${inputs.critics.length}`);
    const [rewardModel, ...critics] = inputs.critics;
    const [rewardHead, ...criticHeads] = inputs.heads;
    const reward = { ...trainerInputs(inputs), config, rewardModel, ...(rewardHead ? { rewardHead } : {}) };
    if (config.rl_algorithm === 'maac') return new MARLHFActorCriticTrainer<unknown, unknown>({ ...reward, critic: critics[0], ...(criticHeads.length > 0 ? { criticHead: criticHeads[0] } : {}) });
    if (config.rl_algorithm === 'iac') return new MARLHFActorCriticTrainer<unknown, unknown>({ ...reward, ...(critics.length > 0 ? { critics } : {}), ...(criticHeads.length > 0 ? { criticHeads } : {}) });
    return new MARLHFTrainer<unknown, unknown>(reward);
  },
};

/** CoLLM-DC: a critic LM per agent (`use_separate_critic`) or value heads on the actors. */
export const COLLM_DC_TRAINER: TrainerSpec<CoLLMDCConfig> = {
  name: 'collm-dc',
  label: 'CoLLM-DC',
  section: 'collm_dc',
  aliases: ['iac'],
  schema: collmDCConfigSchema,
  usesCritics: true,
  criticCount: (config, numAgents) => (config.use_separate_critic ? numAgents : 0),
  criticModelsOff: (config) => (config.use_separate_critic ? undefined : { field: 'use_separate_critic', means: 'is false (a value head on each actor)' }),
  criticsHint: 'one per agent',
  layout: (config, dir, n) => ({ agents: agentDirs(dir, n), ...(config.use_separate_critic ? separateCriticsLayout(dir, n) : sharedHeadsLayout(dir, n)) }),
  evalEarlyTermination: (config) => config.early_termination_threshold,
  build: (inputs) =>
    new CoLLMDCTrainer<unknown, unknown>({
      ...trainerInputs(inputs),
      config: inputs.config,
      ...(inputs.critics.length > 0 ? { critics: inputs.critics } : {}),
      ...(inputs.heads.length > 0 ? { criticHeads: inputs.heads } : {}),
    }),
};

/** CoLLM-CC: one centralized critic LM. */
export const COLLM_CC_TRAINER: TrainerSpec<CoLLMCCConfig> = {
  name: 'collm-cc',
  label: 'CoLLM-CC',
  section: 'collm_cc',
  aliases: ['maac'],
  schema: collmCCConfigSchema,
  usesCritics: true,
  criticCount: () => 1,
  criticsHint: 'one centralized critic',
  layout: (_config, dir, n) => ({ agents: agentDirs(dir, n), ...centralizedCriticLayout(dir) }),
  evalEarlyTermination: (config) => config.early_termination_threshold,
  build: (inputs) => {
    if (inputs.critics.length !== 1) throw new Error(`collm-cc needs exactly one critic, got ${inputs.critics.length}`);
    return new CoLLMCCTrainer<unknown, unknown>({
      ...trainerInputs(inputs),
      config: inputs.config,
      critic: inputs.critics[0],
      ...(inputs.heads.length > 0 ? { criticHead: inputs.heads[0] } : {}),
    });
  },
};

registerTrainer(MAGRPO_TRAINER);
registerTrainer(COLLM_DC_TRAINER);
registerTrainer(COLLM_CC_TRAINER);
registerTrainer(MAREINFORCE_TRAINER);
registerTrainer(MAREMAX_TRAINER);
registerTrainer(MARLOO_TRAINER);
registerTrainer(CENTRALIZED_MAGRPO_TRAINER);
registerTrainer(MADPO_TRAINER);
registerTrainer(MARLHF_TRAINER);
