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
import { marlhfConfigSchema, type MARLHFConfig } from './marlhf/config.js';
import { marlhfLayout, MARLHFTrainer } from './marlhf/trainer.js';
import { registerTrainer, type PlayedTask, type TrainerBuildInputs, type TrainerSpec } from './registry.js';

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

/** MARLHF: a joint reward model (its one critic LM, saved as `reward_model/`) fitted to preferences, then MAGRPO on its score. */
export const MARLHF_TRAINER: TrainerSpec<MARLHFConfig> = {
  name: 'marlhf',
  label: 'MARLHF',
  section: 'marlhf',
  schema: marlhfConfigSchema,
  usesCritics: true,
  criticCount: () => 1,
  criticsHint: 'one joint reward model',
  criticModels: (config) => (config.reward_model_name === null ? null : [config.reward_model_name]),
  modelPathFields: ['reward_model_name'],
  layout: (_config, dir, n) => marlhfLayout(dir, n),
  evalEarlyTermination: magrpoEvalEarlyTermination,
  build: (inputs) => {
    if (inputs.critics.length !== 1) throw new Error(`marlhf needs exactly one reward model LM, got ${inputs.critics.length}`);
    return new MARLHFTrainer<unknown, unknown>({
      ...trainerInputs(inputs),
      config: inputs.config,
      rewardModel: inputs.critics[0],
      ...(inputs.heads.length > 0 ? { rewardHead: inputs.heads[0] } : {}),
    });
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
