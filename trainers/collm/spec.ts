/** CoLLM-DC's and CoLLM-CC's registry entries: sections (with CoMLRL's `iac:` / `maac:`), schemas and critic roles, registered by ../builtin.ts. */
import { agentDirs } from '../core/save.js';
import { trainerInputsOf, type TrainerSpec } from '../registry.js';
import { CoLLMCCTrainer } from './centralized.js';
import { collmCCConfigSchema, collmDCConfigSchema, type CoLLMCCConfig, type CoLLMDCConfig } from './config.js';
import { CoLLMDCTrainer } from './decentralized.js';
import { centralizedCriticLayout, separateCriticsLayout, sharedHeadsLayout } from './layout.js';

/** CoLLM-DC: a critic LM per agent (`use_separate_critic`) or value heads on the actors. */
export const COLLM_DC_TRAINER: TrainerSpec<CoLLMDCConfig> = {
  name: 'collm-dc',
  label: 'CoLLM-DC',
  section: 'collm_dc',
  aliases: ['iac'],
  schema: collmDCConfigSchema,
  roles: {
    critics: {
      count: (config, numAgents) => (config.use_separate_critic ? numAgents : 0),
      hint: 'one per agent',
      placedByCriticDevices: true,
      off: (config) => (config.use_separate_critic ? undefined : { field: 'use_separate_critic', means: 'is false (a value head on each actor)' }),
    },
    reference: 'kl',
    layout: (config, dir, n) => ({ agents: agentDirs(dir, n), ...(config.use_separate_critic ? separateCriticsLayout(dir, n) : sharedHeadsLayout(dir, n)) }),
  },
  evalEarlyTermination: (config) => config.early_termination_threshold,
  build: (inputs) =>
    new CoLLMDCTrainer<unknown, unknown>({
      ...trainerInputsOf(inputs),
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
  roles: {
    critics: { count: () => 1, hint: 'one centralized critic', placedByCriticDevices: true },
    reference: 'kl',
    layout: (_config, dir, n) => ({ agents: agentDirs(dir, n), ...centralizedCriticLayout(dir) }),
  },
  evalEarlyTermination: (config) => config.early_termination_threshold,
  build: (inputs) => {
    if (inputs.critics.length !== 1) throw new Error(`collm-cc needs exactly one critic, got ${inputs.critics.length}`);
    return new CoLLMCCTrainer<unknown, unknown>({
      ...trainerInputsOf(inputs),
      config: inputs.config,
      critic: inputs.critics[0],
      ...(inputs.heads.length > 0 ? { criticHead: inputs.heads[0] } : {}),
    });
  },
};
