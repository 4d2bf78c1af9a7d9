/**
 * Named presets of the CoLLM paper's actor-critic runs: TLDR, CoopHE and HouseBuild, each for
 * CoLLM-DC and CoLLM-CC. The numbers are the experiment repositories' configs the paper was run
 * with (`tasks-reference.md` §1.6, §2.6, §3.5: iac_* → DC, maac_* → CC), except where the paper's
 * Appendix C table differs, which they follow (marked `paper App. C`): critic learning rate 3e-6,
 * HouseBuild 120 epochs, and the "advantage clip" (`value_clip_range`: 0.2 / 0.2 / 0.05) for CC
 * as well as DC. The paper-aligned options keep their defaults (m_t and history for every
 * critic, targets from the current critic). examples/configs/*.yaml carry the same values with a
 * source comment per field.
 *
 * A preset is only the trainer config plus what the scripts set around it (models, reward
 * shift, data splits); examples combine it with an environment:
 *
 * ```ts
 * const p = actorCriticPreset('housebuild-cc');
 * const trainer = new CoLLMCCTrainer({ ..., config: { ...p.config, num_train_epochs: 2 } });
 * ```
 */
import type { CoLLMCCConfigInput, CoLLMDCConfigInput } from './actor-critic-config.js';

/** Tasks with presets. */
export type PresetTask = 'tldr' | 'coophe' | 'housebuild';

interface PresetBase {
  /** `<task>-dc` or `<task>-cc`. */
  readonly name: string;
  readonly task: PresetTask;
  /** Hugging Face id of the agents' model in the paper's runs. */
  readonly agentModel: string;
  /** Hugging Face id of the critic model(s). */
  readonly criticModel: string;
  /** Reward post-processing of the scripts: r' = r·scale + shift. */
  readonly rewardProcessor: { readonly scale: number; readonly shift: number };
  /** Dataset slices the scripts train and evaluate on (Python slice notation). */
  readonly splits: { readonly train: string; readonly eval: string };
  /** Provenance and caveats. */
  readonly notes: string;
}

/** A CoLLM-DC preset. */
export interface DCPreset extends PresetBase {
  readonly trainer: 'collm-dc';
  readonly config: Readonly<CoLLMDCConfigInput>;
}

/** A CoLLM-CC preset. */
export interface CCPreset extends PresetBase {
  readonly trainer: 'collm-cc';
  readonly config: Readonly<CoLLMCCConfigInput>;
}

/** Either kind of preset. */
export type ActorCriticPreset = DCPreset | CCPreset;

// TLDR (LLM_Collab_Writing iac_tldr / maac_tldr): single turn, dense reward.
const tldrShared = {
  num_agents: 2,
  num_turns: 1,
  num_train_epochs: 20,
  agent_learning_rate: 5e-6,
  critic_learning_rate: 3e-6, // paper App. C (the experiment config: 5e-6)
  num_generations: 1,
  max_new_tokens: 256,
  temperature: 0.7,
  top_p: 0.9,
  top_k: null,
  rollout_buffer_size: 4,
  train_batch_size: 4,
  value_loss_coef: 0.6,
  critic_max_length: 2048, // the experiment configs' max_length: the critic's input budget (history)
  discount: 0.9,
  eval_interval: 20,
  eval_num_samples: 4,
  eval_batch_size: 1,
  logging_steps: 50,
} as const;

// CoopHE (LLM_Collab_Code_Generation iac_che / maac_che): 2 turns with level feedback.
const coopheShared = {
  num_agents: 2,
  num_turns: 2,
  num_train_epochs: 80,
  agent_learning_rate: 5e-6,
  critic_learning_rate: 3e-6, // paper App. C (the experiment config: 5e-6)
  num_generations: 1,
  max_new_tokens: 256,
  temperature: 0.6,
  top_p: 0.6,
  top_k: null,
  discount: 0.9,
  early_termination_threshold: -0.2,
  rollout_buffer_size: 4,
  train_batch_size: 4,
  value_loss_coef: 0.6,
  critic_max_length: 2048, // the experiment configs' max_length: the critic's input budget (history)
  eval_interval: 40,
  eval_num_samples: 4,
  eval_batch_size: 1,
  logging_steps: 10,
  seed: 42,
} as const;

// HouseBuild (LLM_Collab_Minecraft iac / maac): 4 turns, sparse and long-horizon.
const houseShared = {
  num_agents: 2,
  num_turns: 4,
  num_train_epochs: 120, // paper App. C (the experiment config: 150)
  agent_learning_rate: 5e-6,
  critic_learning_rate: 3e-6, // paper App. C (the experiment config: 5e-6)
  num_generations: 1,
  max_new_tokens: 512,
  temperature: 0.6,
  top_p: 0.6,
  top_k: null,
  discount: 0.9,
  early_termination_threshold: 0.0,
  rollout_buffer_size: 1,
  train_batch_size: 1,
  value_loss_coef: 0.6,
  critic_max_length: 2048, // the experiment configs' max_length: the critic's input budget (history)
  eval_interval: 10,
  eval_num_samples: 2,
  eval_batch_size: 1,
  logging_steps: 40,
} as const;

const PRESETS: Record<string, ActorCriticPreset> = {
  'tldr-dc': {
    name: 'tldr-dc',
    task: 'tldr',
    trainer: 'collm-dc',
    agentModel: 'Qwen/Qwen3-1.7B',
    criticModel: 'Qwen/Qwen3-1.7B',
    rewardProcessor: { scale: 1, shift: 0 },
    splits: { train: 'train[:1000]', eval: 'test[:1000]' },
    config: { ...tldrShared, use_separate_critic: true, critic_type: 'v', value_clip_range: 0.2 },
    notes: 'iac_tldr config; discount is the script default 0.9.',
  },
  'tldr-cc': {
    name: 'tldr-cc',
    task: 'tldr',
    trainer: 'collm-cc',
    agentModel: 'Qwen/Qwen3-1.7B',
    criticModel: 'Qwen/Qwen3-1.7B',
    rewardProcessor: { scale: 1, shift: 0 },
    splits: { train: 'train[:1100]', eval: 'test[:1100]' },
    config: { ...tldrShared, critic_type: 'v', value_clip_range: 0.2 }, // clip: paper App. C advantage clip
    notes: 'maac_tldr config; discount is the script default 0.9.',
  },
  'coophe-dc': {
    name: 'coophe-dc',
    task: 'coophe',
    trainer: 'collm-dc',
    agentModel: 'Qwen/Qwen2.5-Coder-3B',
    criticModel: 'Qwen/Qwen2.5-Coder-3B',
    rewardProcessor: { scale: 1, shift: -4 },
    splits: { train: 'train[16:]', eval: 'train[:16]' },
    config: { ...coopheShared, use_separate_critic: true, critic_type: 'v', value_clip_range: 0.2 },
    notes: 'iac_che config (sampling 0.6/0.6 from the iac section); reward shift −4 via iac.reward_shift.',
  },
  'coophe-cc': {
    name: 'coophe-cc',
    task: 'coophe',
    trainer: 'collm-cc',
    agentModel: 'Qwen/Qwen2.5-Coder-3B',
    criticModel: 'Qwen/Qwen2.5-Coder-3B',
    rewardProcessor: { scale: 1, shift: -4 },
    splits: { train: 'train[16:]', eval: 'train[:16]' },
    config: { ...coopheShared, critic_type: 'v', value_clip_range: 0.2 }, // clip: paper App. C advantage clip
    notes: 'maac_che config; reward shift −4 via maac.reward_shift.',
  },
  'housebuild-dc': {
    name: 'housebuild-dc',
    task: 'housebuild',
    trainer: 'collm-dc',
    agentModel: 'Qwen/Qwen3-4B-Instruct-2507',
    criticModel: 'Qwen/Qwen3-4B-Instruct-2507',
    rewardProcessor: { scale: 1, shift: -1 },
    splits: { train: '[:8]', eval: '[8:]' },
    config: { ...houseShared, use_separate_critic: true, critic_type: 'v', value_clip_range: 0.05 },
    notes: 'iac HouseBuild config (bf16, chat template on); threshold 0.0 never fires since processed rewards are <= 0.',
  },
  'housebuild-cc': {
    name: 'housebuild-cc',
    task: 'housebuild',
    trainer: 'collm-cc',
    agentModel: 'Qwen/Qwen3-4B-Instruct-2507',
    criticModel: 'Qwen/Qwen3-4B-Instruct-2507',
    rewardProcessor: { scale: 1, shift: -1 },
    splits: { train: '[:8]', eval: '[8:]' },
    config: { ...houseShared, critic_type: 'v', value_clip_range: 0.05 }, // clip: paper App. C advantage clip
    notes: 'maac HouseBuild config (bf16, chat template on); threshold 0.0 never fires since processed rewards are <= 0.',
  },
};

/** Names of every preset. */
export const ACTOR_CRITIC_PRESET_NAMES: readonly string[] = Object.keys(PRESETS);

/** The CoLLM-DC preset of a task. */
export function actorCriticPreset(name: `${PresetTask}-dc`): DCPreset;
/** The CoLLM-CC preset of a task. */
export function actorCriticPreset(name: `${PresetTask}-cc`): CCPreset;
/** Any preset by name; throws naming the known presets. */
export function actorCriticPreset(name: string): ActorCriticPreset;
export function actorCriticPreset(name: string): ActorCriticPreset {
  const p = PRESETS[name];
  if (!p) throw new Error(`unknown actor-critic preset '${name}'; known: ${ACTOR_CRITIC_PRESET_NAMES.join(', ')}`);
  // A fresh copy, so callers can modify it freely.
  return { ...p, config: { ...p.config } } as ActorCriticPreset;
}
