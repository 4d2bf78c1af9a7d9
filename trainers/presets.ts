/**
 * Named presets of the CoLLM paper's actor-critic runs: TLDR, CoopHE and HouseBuild, each for
 * CoLLM-DC and CoLLM-CC; and of the REINFORCE-folder trainers of CoMLRL 1.4 (`reinforcePreset`:
 * MAREINFORCE, MAReMax, MARLOO, CentralizedMAGRPO, MADPO and MARLHF on TLDR, at the end of this file). The
 * actor-critic numbers are read from the example configs
 * `examples/configs/<task>-collm-<dc|cc>.yaml` (shipped with the package), the single source of
 * them: the experiment repositories' configs the paper was run with (`tasks-reference.md` §1.6,
 * §2.6, §3.5: iac_* → DC, maac_* → CC), except where the paper's Appendix C table differs, which
 * they follow (critic learning rate 3e-6, HouseBuild 120 epochs, the "advantage clip"
 * `value_clip_range` 0.2 / 0.2 / 0.05 for CC as well as DC); each field's source is commented in
 * the file. comlrl's paper-aligned options keep their defaults unless the file sets them. A
 * preset's `config` is the trainer's validated config (defaults filled).
 *
 * A preset is only the trainer config plus what the scripts set around it (models, reward
 * shift, data splits); examples combine it with an environment:
 *
 * ```ts
 * const p = actorCriticPreset('housebuild-cc');
 * const trainer = new CoLLMCCTrainer({ ..., config: { ...p.config, num_train_epochs: 2 } });
 * ```
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readConfigFile } from '../src/config/load.js';
import { parseCentralizedMAGRPOConfig, type CentralizedMAGRPOConfig } from './centralized-magrpo/config.js';
import { parseMADPOConfig, type MADPOConfig } from './madpo/config.js';
import { parseMARLHFConfig, type MARLHFConfig } from './marlhf/config.js';
import { parseCoLLMCCConfig, parseCoLLMDCConfig, type CoLLMCCConfigInput, type CoLLMDCConfigInput } from './collm/config.js';
import { parseMAREINFORCEConfig, parseMAReMaxConfig, parseMARLOOConfig, type MAREINFORCEConfig, type MAReMaxConfig, type MARLOOConfig } from './reinforce/config.js';

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

/** What a preset takes from outside its YAML file: the Hugging Face ids and provenance notes. */
interface PresetMeta {
  readonly task: PresetTask;
  readonly trainer: 'collm-dc' | 'collm-cc';
  readonly agentModel: string;
  readonly criticModel: string;
  readonly notes: string;
}

// The numbers live in examples/configs/<task>-collm-<dc|cc>.yaml (the one source; each value's
// origin is commented there); a preset is that file's trainer section with the run's sampling
// and seed merged in as the run-config parser does, plus these ids and notes.
const PRESET_META: Readonly<Record<string, PresetMeta>> = {
  'tldr-dc': { task: 'tldr', trainer: 'collm-dc', agentModel: 'Qwen/Qwen3-1.7B', criticModel: 'Qwen/Qwen3-1.7B', notes: 'iac_tldr config; discount is the script default 0.9.' },
  'tldr-cc': { task: 'tldr', trainer: 'collm-cc', agentModel: 'Qwen/Qwen3-1.7B', criticModel: 'Qwen/Qwen3-1.7B', notes: 'maac_tldr config; discount is the script default 0.9.' },
  'coophe-dc': {
    task: 'coophe',
    trainer: 'collm-dc',
    agentModel: 'Qwen/Qwen2.5-Coder-3B',
    criticModel: 'Qwen/Qwen2.5-Coder-3B',
    notes: 'iac_che config (sampling 0.6/0.6 from the iac section); reward shift −4 via iac.reward_shift.',
  },
  'coophe-cc': { task: 'coophe', trainer: 'collm-cc', agentModel: 'Qwen/Qwen2.5-Coder-3B', criticModel: 'Qwen/Qwen2.5-Coder-3B', notes: 'maac_che config; reward shift −4 via maac.reward_shift.' },
  'housebuild-dc': {
    task: 'housebuild',
    trainer: 'collm-dc',
    agentModel: 'Qwen/Qwen3-4B-Instruct-2507',
    criticModel: 'Qwen/Qwen3-4B-Instruct-2507',
    notes: 'iac HouseBuild config (bf16, chat template on); threshold 0.0 never fires since processed rewards are <= 0.',
  },
  'housebuild-cc': {
    task: 'housebuild',
    trainer: 'collm-cc',
    agentModel: 'Qwen/Qwen3-4B-Instruct-2507',
    criticModel: 'Qwen/Qwen3-4B-Instruct-2507',
    notes: 'maac HouseBuild config (bf16, chat template on); threshold 0.0 never fires since processed rewards are <= 0.',
  },
};

/** The example config a preset is read from: `examples/configs/<task>-collm-<dc|cc>.yaml`. */
export function presetConfigFile(name: string): string {
  const meta = PRESET_META[name];
  if (!meta) throw new Error(`unknown actor-critic preset '${name}'; known: ${ACTOR_CRITIC_PRESET_NAMES.join(', ')}`);
  return join(exampleConfigsDir(), `${meta.task}-${meta.trainer}.yaml`);
}

/** The packaged example configs (found by walking up: this module runs from trainers/ and dist/trainers/). */
function exampleConfigsDir(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const candidate = join(dir, 'examples', 'configs');
    if (existsSync(join(candidate, 'tldr-collm-dc.yaml'))) return candidate;
    dir = dirname(dir);
  }
  throw new Error('the example configs (examples/configs/*.yaml) were not found next to the comlrl package');
}

const asRecord = (v: unknown): Record<string, unknown> => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {});

/** A config file's trainer section as the run-config parser merges it: the model's sampling fills unset fields, the top-level seed wins. */
function trainerSectionOf(doc: Record<string, unknown>, sectionKey: string): Record<string, unknown> {
  const model = asRecord(doc.model);
  const raw: Record<string, unknown> = {};
  for (const k of ['temperature', 'top_p', 'top_k']) if (k in model) raw[k] = model[k];
  Object.assign(raw, asRecord(doc[sectionKey]));
  if (doc.seed !== undefined) raw.seed = doc.seed;
  return raw;
}

/** Reads and validates one preset from its YAML file. */
function readPreset(name: string, meta: PresetMeta): ActorCriticPreset {
  const file = presetConfigFile(name);
  const doc = readConfigFile(file);
  const dataset = asRecord(doc.dataset);
  const rp = asRecord(doc.reward_processor);
  const sectionKey = meta.trainer === 'collm-dc' ? 'collm_dc' : 'collm_cc';
  const raw = trainerSectionOf(doc, sectionKey);
  const enabled = rp.enabled !== false;
  const scale = enabled && typeof rp.scale === 'number' ? rp.scale : 1;
  const shift = enabled && typeof rp.shift === 'number' ? rp.shift : 0;
  const trainSplit = dataset.train_split;
  const evalSplit = dataset.eval_split;
  if (typeof trainSplit !== 'string' || typeof evalSplit !== 'string') throw new Error(`${file}: dataset.train_split and dataset.eval_split must be set for preset '${name}'`);
  const base = { name, task: meta.task, agentModel: meta.agentModel, criticModel: meta.criticModel, rewardProcessor: { scale, shift }, splits: { train: trainSplit, eval: evalSplit }, notes: meta.notes };
  try {
    return meta.trainer === 'collm-dc' ? { ...base, trainer: 'collm-dc', config: parseCoLLMDCConfig(raw) } : { ...base, trainer: 'collm-cc', config: parseCoLLMCCConfig(raw) };
  } catch (err) {
    throw new Error(`${file}: ${(err as Error).message}`);
  }
}

/** Names of every preset. */
export const ACTOR_CRITIC_PRESET_NAMES: readonly string[] = Object.keys(PRESET_META);

/** The CoLLM-DC preset of a task. */
export function actorCriticPreset(name: `${PresetTask}-dc`): DCPreset;
/** The CoLLM-CC preset of a task. */
export function actorCriticPreset(name: `${PresetTask}-cc`): CCPreset;
/** Any preset by name; throws naming the known presets. */
export function actorCriticPreset(name: string): ActorCriticPreset;
export function actorCriticPreset(name: string): ActorCriticPreset {
  const meta = PRESET_META[name];
  if (!meta) throw new Error(`unknown actor-critic preset '${name}'; known: ${ACTOR_CRITIC_PRESET_NAMES.join(', ')}`);
  // Read on every call: a fresh object callers can modify, and always the YAML's current values.
  return readPreset(name, meta);
}

// ---------------------------------------------------------------------------------------------
// The REINFORCE-folder trainers of CoMLRL 1.4 (MAREINFORCE, MAReMax, MARLOO, CentralizedMAGRPO; MADPO, which CoMLRL first put there).
// ---------------------------------------------------------------------------------------------

/** The trainers of the REINFORCE presets. */
export type ReinforcePresetTrainer = 'mareinforce' | 'maremax' | 'marloo' | 'centralized-magrpo' | 'madpo' | 'marlhf';

/** A REINFORCE-family or CentralizedMAGRPO preset: `examples/configs/<task>-<trainer>.yaml`'s trainer config. */
export interface ReinforcePreset {
  /** `<task>-<trainer>`, e.g. 'tldr-marloo'. */
  readonly name: string;
  readonly task: PresetTask;
  readonly trainer: ReinforcePresetTrainer;
  /** Hugging Face id of the agents' model (CentralizedMAGRPO: the one joint policy's). */
  readonly agentModel: string;
  readonly rewardProcessor: { readonly scale: number; readonly shift: number };
  readonly splits: { readonly train: string; readonly eval: string };
  readonly notes: string;
  /** The trainer's validated config (defaults filled). */
  readonly config: Readonly<MAREINFORCEConfig | MAReMaxConfig | MARLOOConfig | CentralizedMAGRPOConfig | MADPOConfig | MARLHFConfig>;
}

/** Each REINFORCE preset's trainer, section and config parser. */
const REINFORCE_TRAINERS: Readonly<Record<ReinforcePresetTrainer, { section: string; parse: (raw: Record<string, unknown>) => ReinforcePreset['config'] }>> = {
  mareinforce: { section: 'mareinforce', parse: parseMAREINFORCEConfig },
  maremax: { section: 'maremax', parse: parseMAReMaxConfig },
  marloo: { section: 'marloo', parse: parseMARLOOConfig },
  'centralized-magrpo': { section: 'centralized_magrpo', parse: parseCentralizedMAGRPOConfig },
  madpo: { section: 'madpo', parse: parseMADPOConfig },
  marlhf: { section: 'marlhf', parse: parseMARLHFConfig },
};

const REINFORCE_PRESET_META: Readonly<Record<string, { task: PresetTask; trainer: ReinforcePresetTrainer; agentModel: string; notes: string }>> = {
  'tldr-mareinforce': { task: 'tldr', trainer: 'mareinforce', agentModel: 'Qwen/Qwen3-1.7B', notes: "tldr-magrpo's numbers (MAGRPO paper), advantage_normalization off." },
  'tldr-maremax': { task: 'tldr', trainer: 'maremax', agentModel: 'Qwen/Qwen3-1.7B', notes: "tldr-magrpo's numbers (MAGRPO paper), advantage_normalization off." },
  'tldr-marloo': { task: 'tldr', trainer: 'marloo', agentModel: 'Qwen/Qwen3-1.7B', notes: "tldr-magrpo's numbers (MAGRPO paper), advantage_normalization off." },
  'tldr-centralized-magrpo': {
    task: 'tldr',
    trainer: 'centralized-magrpo',
    agentModel: 'Qwen/Qwen3-1.7B',
    notes: "tldr-magrpo's numbers (MAGRPO paper) for one joint policy; max_new_tokens doubled (both texts in one completion).",
  },
  'tldr-madpo': { task: 'tldr', trainer: 'madpo', agentModel: 'Qwen/Qwen3-1.7B', notes: "tldr-magrpo's sampling and learning rate; CoMLRL's MADPO defaults (16 pairs per prompt, reward_gap, dpo_beta 0.1), 4 candidates per agent." },
  'tldr-marlhf': {
    task: 'tldr',
    trainer: 'marlhf',
    agentModel: 'Qwen/Qwen3-1.7B',
    notes: "tldr-magrpo's numbers for phase 2 (MAGRPO on the reward model's score); phase 1: 16 candidates per agent and post, CoMLRL's reward-model defaults, joint text capped at 1024 tokens.",
  },
};

/** Names of every REINFORCE preset. */
export const REINFORCE_PRESET_NAMES: readonly string[] = Object.keys(REINFORCE_PRESET_META);

/** The example config a REINFORCE preset is read from: `examples/configs/<task>-<trainer>.yaml`. */
export function reinforcePresetConfigFile(name: string): string {
  const meta = REINFORCE_PRESET_META[name];
  if (!meta) throw new Error(`unknown REINFORCE preset '${name}'; known: ${REINFORCE_PRESET_NAMES.join(', ')}`);
  return join(exampleConfigsDir(), `${meta.task}-${meta.trainer}.yaml`);
}

/** A REINFORCE-family or CentralizedMAGRPO preset by name (read from its YAML on every call); throws naming the known ones. */
export function reinforcePreset(name: string): ReinforcePreset {
  const file = reinforcePresetConfigFile(name);
  const meta = REINFORCE_PRESET_META[name];
  const doc = readConfigFile(file);
  const dataset = asRecord(doc.dataset);
  const rp = asRecord(doc.reward_processor);
  const enabled = rp.enabled !== false;
  const scale = enabled && typeof rp.scale === 'number' ? rp.scale : 1;
  const shift = enabled && typeof rp.shift === 'number' ? rp.shift : 0;
  const { train_split: train, eval_split: evalSplit } = dataset;
  if (typeof train !== 'string' || typeof evalSplit !== 'string') throw new Error(`${file}: dataset.train_split and dataset.eval_split must be set for preset '${name}'`);
  const { section, parse } = REINFORCE_TRAINERS[meta.trainer];
  try {
    const config = parse(trainerSectionOf(doc, section));
    return { name, task: meta.task, trainer: meta.trainer, agentModel: meta.agentModel, rewardProcessor: { scale, shift }, splits: { train, eval: evalSplit }, notes: meta.notes, config };
  } catch (err) {
    throw new Error(`${file}: ${(err as Error).message}`);
  }
}
