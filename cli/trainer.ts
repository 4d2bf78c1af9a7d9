/**
 * Builds agents, critics and the chosen trainer from a run config, from the config's model paths
 * (a fresh run) or from a checkpoint (resume), behind one small interface the runner drives. What
 * differs between trainers (critic count, saved layout, construction) comes from the trainer
 * registry (trainers/registry.ts).
 */
import { existsSync } from 'node:fs';
import { memorySettingsOf } from '../src/config/schema.js';
import { activeBackend } from '../src/backend/init.js';
import { torchCudaDevices, torchDevice } from '../src/backend/torch/index.js';
import { runDeviceIssues } from '../src/config/devices.js';
import { referencesNeeded } from '../src/config/roles.js';
import { ConfigError } from '../src/config/schema.js';
import { loadCriticHead, type CriticHead } from '../src/critic/heads.js';
import type { CriticLM } from '../src/critic/value-model.js';
import type { Agent, ChatFormat } from '../src/decpomdp/agent.js';
import { loadCausalLM, type LoadCausalLMOptions } from '../src/model/load.js';
import { loraSettings, type LoraSection } from '../src/model/lora/config.js';
import type { CausalLM } from '../src/model/types.js';
import { checkTokenizerFitsModel, tokenizerDifference } from '../src/tokenizer/check.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import type { Tokenizer } from '../src/tokenizer/types.js';
import { createRng } from '../src/util/rng.js';
import { cursorStep } from '../trainers/core/checkpoint.js';
import type { EvalEpisode } from '../trainers/core/eval.js';
import type { MetricRecord, MetricsSink } from '../trainers/core/metrics.js';
import type { SaveOptions } from '../trainers/core/save.js';
import type { DatasetCursor } from '../trainers/core/state.js';
import type { TrainOptions } from '../trainers/core/trainer.js';
import { getTrainer, type RunnableTrainer } from '../trainers/registry.js';
import type { RunConfig } from './schemas.js';
import type { TaskSetup } from './tasks.js';

export { cursorStep };

/** What the runner needs from any trainer. */
export interface TrainerHandle {
  /** The registered trainer's name (`config.trainer`). */
  readonly name: string;
  /** The trainer itself, for the library's checkpoint functions (trainers/core/checkpoint.ts). */
  readonly trainer: RunnableTrainer;
  readonly agents: readonly Agent[];
  /** Items per epoch and epochs: the run has `itemsPerEpoch · epochs` steps. */
  readonly itemsPerEpoch: number;
  readonly epochs: number;
  readonly cursor: DatasetCursor;
  readonly envSteps: number;
  /** The trainer's `train()`: its loop with the run's callbacks (see TrainOptions). */
  train(options: TrainOptions): Promise<void>;
  evaluate(): Promise<{ readonly metrics: MetricRecord; readonly episodes: readonly EvalEpisode<unknown, unknown>[] }>;
  /** The trainer state written into `dir` with the AdamW moments streamed one by one (see TrainerBase.writeState). */
  writeState(dir: string): Promise<void>;
  /** Agents (and critics and heads) in the trainer's layout: `dir/agent_i/`, critics as the trainer saves them (see SaveOptions). */
  save(dir: string, options?: SaveOptions): Promise<void>;
  /** Frees the trainer and the agents' and critics' models. */
  dispose(): void;
}

/** Where the weights come from. */
export interface ModelSources {
  /** One HF directory per agent. */
  readonly agents: readonly string[];
  /** Value-model directories, as the trainer's roles order them: its reward model, then its critic LMs (CoLLM-DC separate critics: one per agent; CoLLM-CC: one); empty without. */
  readonly critics: readonly string[];
  /** Directories holding `value_head.*` to load (resume); null: fresh heads. */
  readonly heads: readonly string[] | null;
  /** LoRA resume: the saved adapter of each agent (its base is `agents[i]`); null: fresh adapters when `model.lora` is set. */
  readonly agentAdapters?: readonly string[] | null;
  /** LoRA resume: the saved adapter of each critic (its base is `critics[i]`). */
  readonly criticAdapters?: readonly string[] | null;
}

/** The LoRA settings of the critics: `model.critic_lora`, else `model.lora`; null: full fine-tuning. */
export function criticLora(config: RunConfig): LoraSection | null {
  const c = config.model.critic_lora;
  if (c === false) return null;
  return c ?? config.model.lora ?? null;
}

/** Which models' merged full weights `final/` also holds (`save_merged` of `model.lora` and of the critics' LoRA). */
export function mergedModels(config: RunConfig): { agents: boolean; critics: boolean } {
  return { agents: config.model.lora?.save_merged === true, critics: criticLora(config)?.save_merged === true };
}

/** Number of agents a config asks for: `model.agents`, else the trainer's roles (`num_agents`, else the env's; CentralizedMAGRPO: 1). */
export function numAgentsOf(config: RunConfig, envAgents: number): number {
  if (config.model.agents) return config.model.agents.length;
  return getTrainer(config.trainer).agentCount(config.trainerConfig, envAgents);
}

/**
 * Refuses the section's device keys (`agent_devices`, `critic_devices`, `reference_devices`) that
 * this run cannot honour, naming each key (src/config/devices.ts): a list of the wrong length, a
 * device off torch other than cpu, a GPU torch does not see, a device other than the run's one.
 * Call it once the backend is up, before any model loads.
 * @throws ConfigError naming every refused key.
 */
export function checkRunDevices(config: RunConfig, numAgents: number): void {
  const trainer = getTrainer(config.trainer);
  const backend = activeBackend() ?? 'wasm';
  const device = backend === 'torch' ? (torchDevice() ?? 'cpu') : 'cpu';
  const issues = runDeviceIssues(trainer.section, config.trainerConfig, trainer.roles, numAgents, { backend, device, cudaDevices: backend === 'torch' ? torchCudaDevices() : 0 });
  if (issues.length > 0) throw new ConfigError(issues);
}

/** The agents' model directories named by the config: `model.agents`, else `model.agent_model` per agent. */
export function agentDirsFromConfig(config: RunConfig, numAgents: number): string[] {
  const m = config.model;
  if (m.agents) return [...m.agents];
  const dir = m.agent_model;
  if (dir !== undefined) return Array.from({ length: numAgents }, () => dir);
  throw new Error('model.agent_model or model.agents is required: the local Hugging Face directory of each agent');
}

/**
 * Model directories named by the config (a fresh run): the agents', then the value models' its
 * roles declare — from the trainer's section (its roles' `models`), else `model.critics`, else
 * `model.critic_model`, else each one's agent's model (CoMLRL's default).
 */
export function sourcesFromConfig(config: RunConfig, numAgents: number): ModelSources {
  const m = config.model;
  const agents = agentDirsFromConfig(config, numAgents);
  let critics: string[] = [];
  const trainer = getTrainer(config.trainer);
  const count = trainer.criticCount(config.trainerConfig, agents.length);
  const named = trainer.criticModels(config.trainerConfig, { agents, ...(m.critic_model !== undefined ? { criticModel: m.critic_model } : {}), ...(m.critics ? { critics: m.critics } : {}) });
  if (count > 0) {
    if (named) {
      // The trainer's own section names them (MARLHF's reward_model_name and critic_model_name).
      if (named.length !== count) throw new Error(`${config.trainer}'s section names ${named.length} critic models; it needs ${count}`);
      critics = [...named];
    } else if (m.critics) {
      if (m.critics.length !== count) {
        throw new Error(`model.critics has ${m.critics.length} entries; ${config.trainer} needs ${count}${trainer.criticsHint ? ` (${trainer.criticsHint})` : ''}`);
      }
      critics = [...m.critics];
    } else {
      // CoMLRL's default critic is the agent's own model.
      critics = Array.from({ length: count }, (_, i) => m.critic_model ?? agents[i]);
    }
  }
  return { agents, critics, heads: null };
}

/** Model directories inside a checkpoint written by {@link TrainerHandle.save} (resume): the trainer's saved layout. */
export function sourcesFromCheckpoint(config: RunConfig, dir: string, numAgents: number): ModelSources {
  const saved = getTrainer(config.trainer).layout(config.trainerConfig, dir, numAgents);
  // LoRA checkpoints hold adapters only: the bases come from the config's model paths again.
  const bases = config.model.lora || criticLora(config) ? sourcesFromConfig(config, numAgents) : null;
  return {
    agents: config.model.lora ? bases!.agents : saved.agents,
    critics: criticLora(config) ? bases!.critics : saved.critics,
    heads: saved.heads,
    agentAdapters: config.model.lora ? saved.agents : null,
    criticAdapters: criticLora(config) ? saved.critics : null,
  };
}

function chatFormat(config: RunConfig): ChatFormat | false {
  if (!config.model.use_chat_template) return false;
  const f: ChatFormat = {};
  if (config.model.system_prompt !== undefined) f.system = config.model.system_prompt;
  if (config.model.enable_thinking !== undefined) f.enableThinking = config.model.enable_thinking;
  return f;
}

async function loadModelDir(
  dir: string,
  what: string,
  options: LoadCausalLMOptions = {},
): Promise<{ model: CausalLM; tokenizer: Awaited<ReturnType<typeof loadTokenizer>> }> {
  if (!existsSync(dir)) throw new Error(`${what}: model directory ${dir} not found (model paths are local Hugging Face directories)`);
  if (options.adapter !== undefined && !existsSync(options.adapter)) throw new Error(`${what}: adapter directory ${options.adapter} not found (the checkpoint is incomplete)`);
  let model: CausalLM;
  try {
    model = await loadCausalLM(dir, options);
  } catch (err) {
    throw new Error(`${what}: ${(err as Error).message}`);
  }
  try {
    const tokenizer = await loadTokenizer(dir);
    checkTokenizerFitsModel(tokenizer, model.vocabSize, dir);
    return { model, tokenizer };
  } catch (err) {
    model.dispose();
    throw err;
  }
}

/** Counts generated tokens of every agent (for tokens/s) by wrapping each model's `generate`. */
export class TokenCounter {
  total = 0;
  /** Wraps `model.generate` so that every generated token is counted. */
  watch(model: CausalLM): void {
    const original = model.generate.bind(model);
    model.generate = async (prompts, options) => {
      const out = await original(prompts, options);
      for (const s of out.sequences) this.total += s.length;
      return out;
    };
  }
}

/**
 * Refuses a `max_new_tokens` the model cannot generate: prompt and completion must fit in its
 * context (`max_position_embeddings` of its config.json), so the limit is that context minus one.
 */
export function checkMaxNewTokens(config: RunConfig, model: CausalLM, what: string): void {
  const maxNew = config.trainerConfig.max_new_tokens;
  const context = model.config.max_position_embeddings;
  if (typeof context !== 'number' || maxNew < context) return;
  const key = `${getTrainer(config.trainer).section}.max_new_tokens`;
  throw new Error(`${key} ${maxNew} does not fit the context of ${what}: its config.json max_position_embeddings is ${context}, which must hold the prompt and the completion; set ${key} below ${context}`);
}

/**
 * How model `what` of a run loads under LoRA: the saved adapter (resume), a fresh adapter seeded
 * by the run seed and the model's role, or none (full fine-tuning).
 */
function loraOptions(section: LoraSection | null | undefined, adapter: string | undefined, seed: number, role: string): LoadCausalLMOptions {
  if (!section) return {};
  if (adapter !== undefined) return { adapter };
  return { lora: { settings: loraSettings(section), seed: `${seed}:${role}` } };
}

/**
 * Loads one agent per directory, with the config's chat settings; with `model.lora` each gets an
 * adapter (`adapters[i]` when resuming) on the directory's shared frozen base.
 */
export async function loadAgents(
  config: RunConfig,
  dirs: readonly string[],
  counter?: TokenCounter,
  adapters?: readonly string[] | null,
): Promise<Agent[]> {
  const chat = chatFormat(config);
  const agents: Agent[] = [];
  try {
    for (let i = 0; i < dirs.length; i++) {
      const { model, tokenizer } = await loadModelDir(dirs[i], `agent ${i}`, { ...loraOptions(config.model.lora, adapters?.[i], config.seed, `agent_${i}`), memory: memorySettingsOf(config.memory) });
      agents.push({ name: `agent_${i}`, model, tokenizer, chat });
      checkMaxNewTokens(config, model, `agent ${i} (${dirs[i]})`);
      if (chat !== false && !tokenizer.hasChatTemplate) {
        throw new Error(`agent ${i}: model.use_chat_template is true, but the tokenizer in ${dirs[i]} has no chat template (no chat_template.jinja, and tokenizer_config.json has no "chat_template"); set model.use_chat_template: false or use a chat model`);
      }
      counter?.watch(model);
    }
  } catch (err) {
    for (const a of agents) a.model.dispose();
    throw err;
  }
  return agents;
}

/** A reference model loaded from a folder, with that folder's tokenizer. */
export interface LoadedReference {
  readonly dir: string;
  readonly model: CausalLM;
  readonly tokenizer: Tokenizer;
}

/**
 * The frozen references of the reference KL (or of a trainer whose roles always have one: MADPO), one per agent (null: none needed): `model.reference_model`,
 * else — under full fine-tuning — each agent's starting directory from the config, never a
 * checkpoint's, so a resumed run measures the KL to the same policy. One model per distinct
 * directory. LoRA agents without `model.reference_model` need none: their base with the adapter off.
 */
export async function loadReferences(config: RunConfig, numAgents: number): Promise<(LoadedReference | null)[]> {
  if (!referencesNeeded(getTrainer(config.trainer).roles, config.trainerConfig)) return Array.from({ length: numAgents }, () => null);
  const explicit = config.model.reference_model;
  if (explicit === undefined && config.model.lora) return Array.from({ length: numAgents }, () => null);
  const dirs = explicit !== undefined ? Array.from({ length: numAgents }, () => explicit) : agentDirsFromConfig(config, numAgents);
  const loaded = new Map<string, LoadedReference>();
  try {
    for (const dir of dirs) {
      if (!loaded.has(dir)) loaded.set(dir, { dir, ...(await loadModelDir(dir, 'reference model', { memory: memorySettingsOf(config.memory) })) });
    }
  } catch (err) {
    for (const m of loaded.values()) m.model.dispose();
    throw err;
  }
  return dirs.map((d) => loaded.get(d) ?? null);
}

/**
 * Refuses a reference whose tokenizer is not agent `i`'s (it scores the agent's token ids: with
 * another vocabulary the KL or DPO margin means nothing, or an id falls outside its embedding),
 * naming both folders and the key to change.
 */
export function checkReferenceTokenizerOf(config: RunConfig, agent: Agent, agentDir: string, i: number, reference: LoadedReference): void {
  const diff = tokenizerDifference(agent.tokenizer, reference.tokenizer);
  if (diff === undefined) return;
  const key = config.model.reference_model !== undefined ? `model.reference_model ${reference.dir}` : `the reference model ${reference.dir} (agent ${i}'s starting model)`;
  const change = config.model.reference_model !== undefined ? 'set model.reference_model to a model with the agent\'s tokenizer, or leave it unset (each agent\'s starting weights are its reference)' : 'give the agents models with their starting model\'s tokenizer';
  throw new Error(`${key} has another tokenizer than agent ${i} (${agentDir}): ${diff}; the reference scores the agent's token ids, so both must share one tokenizer: ${change}`);
}

/** Builds the trainer of `config` over `task` with weights from `sources`. */
export async function buildTrainer(
  config: RunConfig,
  task: TaskSetup,
  sources: ModelSources,
  logger: MetricsSink,
  counter?: TokenCounter,
): Promise<TrainerHandle> {
  const agents: Agent[] = [];
  const critics: CriticLM[] = [];
  const heads: CriticHead[] = [];
  const references = new Set<CausalLM>();
  const cleanup = () => {
    for (const r of references) r.dispose();
    for (const a of agents) a.model.dispose();
    for (const c of critics) c.model.dispose();
    for (const h of heads) h.dispose();
  };
  try {
    agents.push(...(await loadAgents(config, sources.agents, counter, sources.agentAdapters)));
    const refs = await loadReferences(config, agents.length);
    for (const r of refs) if (r !== null) references.add(r.model);
    refs.forEach((r, i) => {
      if (r === null) return;
      checkReferenceTokenizerOf(config, agents[i], sources.agents[i], i, r);
      agents[i] = { ...agents[i], reference: r.model, referenceTokenizer: r.tokenizer };
    });
    for (let i = 0; i < sources.critics.length; i++) {
      const lora = loraOptions(criticLora(config), sources.criticAdapters?.[i], config.seed, `critic_${i}`);
      const { model, tokenizer } = await loadModelDir(sources.critics[i], `critic ${i}`, { ...lora, memory: memorySettingsOf(config.memory) });
      critics.push({ name: `critic_${i}`, model, tokenizer });
    }
    // The heads' init stream is unused here: the saved weights overwrite the init.
    if (sources.heads) for (const d of sources.heads) heads.push(await loadCriticHead(d, createRng('resume-head')));
  } catch (err) {
    cleanup();
    throw err;
  }
  const spec = getTrainer(config.trainer);
  let trainer: RunnableTrainer;
  try {
    trainer = spec.build({
      config: config.trainerConfig,
      agents,
      critics,
      heads,
      env: task.env,
      trainTasks: task.trainTasks,
      evalTasks: task.evalTasks,
      evalCallbacks: task.evalCallbacks,
      ...(task.centralized ? { centralized: task.centralized } : {}),
      logger,
    });
  } catch (err) {
    cleanup();
    throw err;
  }
  return handleOf(config, trainer, () => {
    // The trainer frees the heads it was given; the agents' and critics' models are ours.
    trainer.dispose();
    for (const a of agents) a.model.dispose();
    for (const c of critics) c.model.dispose();
    for (const r of references) r.dispose();
  });
}

function handleOf(config: RunConfig, t: RunnableTrainer, dispose: () => void): TrainerHandle {
  return {
    name: config.trainer,
    trainer: t,
    agents: t.agents,
    itemsPerEpoch: t.itemsPerEpoch,
    epochs: config.trainerConfig.num_train_epochs,
    get cursor() {
      return t.datasetCursor;
    },
    get envSteps() {
      return t.envSteps;
    },
    train: (options) => t.train(options),
    evaluate: () => t.evaluate(),
    writeState: (dir) => t.writeState(dir),
    save: async (dir, options) => {
      await t.save(dir, options);
    },
    dispose,
  };
}
