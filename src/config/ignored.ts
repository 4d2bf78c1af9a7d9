/**
 * Settings a run would silently ignore, given the rest of its config: each one is an error naming
 * the key and the setting that makes it moot (docs/cli.md, "Config files"), so a config never says
 * one thing while the run does another.
 */
import { referencesNeeded } from './roles.js';
import { sectionRoles, type TrainerSectionFields, type TrainerSectionSpec } from './trainers.js';

/** One refused key: its dotted path and why. */
export interface IgnoredSettingIssue {
  readonly key: string;
  readonly message: string;
}

/** The parts of a parsed config the checks read (the run config's sections before assembly). */
export interface IgnoredSettingsInput {
  readonly spec: TrainerSectionSpec;
  /** The trainer section's name as written (its alias, e.g. `iac`, included). */
  readonly section: string;
  readonly trainerConfig: TrainerSectionFields;
  readonly model: {
    readonly critics?: readonly string[] | undefined;
    readonly critic_model?: string | undefined;
    readonly critic_lora?: false | { readonly save_merged: boolean } | undefined;
    readonly lora?: { readonly save_merged: boolean } | undefined;
    readonly reference_model?: string | undefined;
    readonly use_chat_template: boolean;
    readonly system_prompt?: string | undefined;
    readonly enable_thinking?: boolean | undefined;
  };
  readonly output: { readonly save_final_model: boolean; readonly save_dtype: string };
}

/**
 * The keys of a config that the run would ignore:
 * - critic keys of `model` (`critics`, `critic_model`, `critic_lora`) when the trainer section
 *   turns its critic models off (its roles' `critics.off`: CoLLM-DC `use_separate_critic: false`);
 * - `save_merged` of `model.lora` / `model.critic_lora`, and an `output.save_dtype` other than
 *   float32, when `output.save_final_model` is false (both shape only `final/`; checkpoints are
 *   always float32 adapters or weights);
 * - `model.system_prompt` and `model.enable_thinking` without `model.use_chat_template`;
 * - `model.reference_model` when nothing scores against a reference (`reference_kl_enabled` off and
 *   a trainer whose roles load no reference of their own).
 */
export function ignoredSettingIssues(input: IgnoredSettingsInput): IgnoredSettingIssue[] {
  const { spec, section, trainerConfig, model, output } = input;
  const issues: IgnoredSettingIssue[] = [];
  const roles = sectionRoles(spec);
  const off = roles.critics?.off?.(trainerConfig);
  if (off !== undefined) {
    for (const key of ['critics', 'critic_model', 'critic_lora'] as const) {
      if (model[key] === undefined) continue;
      issues.push({
        key: `model.${key}`,
        message: `would be ignored: ${section}.${off.field} ${off.means}, so ${spec.label} trains no critic model; remove model.${key}, or give the critics their own models with ${section}.${off.field}: true`,
      });
    }
  }
  if (!output.save_final_model) {
    const noFinal = 'output.save_final_model is false, and only final/ holds merged models';
    if (model.lora?.save_merged === true) issues.push({ key: 'model.lora.save_merged', message: `would be ignored: ${noFinal}; remove it or set output.save_final_model: true` });
    if (model.critic_lora !== undefined && model.critic_lora !== false && model.critic_lora.save_merged) {
      issues.push({ key: 'model.critic_lora.save_merged', message: `would be ignored: ${noFinal}; remove it or set output.save_final_model: true` });
    }
    if (output.save_dtype !== 'float32') {
      issues.push({ key: 'output.save_dtype', message: `would be ignored: output.save_final_model is false, and checkpoints are always float32; remove it or set output.save_final_model: true` });
    }
  }
  if (!model.use_chat_template) {
    for (const key of ['system_prompt', 'enable_thinking'] as const) {
      if (model[key] !== undefined) issues.push({ key: `model.${key}`, message: `would be ignored: it applies through the chat template, and model.use_chat_template is false; set model.use_chat_template: true or remove it` });
    }
  }
  if (model.reference_model !== undefined && !referencesNeeded(roles, trainerConfig)) {
    issues.push({
      key: 'model.reference_model',
      message: `would be ignored: ${section}.reference_kl_enabled is ${trainerConfig.reference_kl_enabled === false ? 'false' : 'not set'} and ${spec.label} has no reference of its own; set ${section}.reference_kl_enabled: true or remove it`,
    });
  }
  return issues;
}
