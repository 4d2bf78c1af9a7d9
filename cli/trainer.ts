/**
 * Builds agents, critics and the chosen trainer from a run config, from the config's model paths
 * (a fresh run) or from a checkpoint (resume), behind one small interface the runner drives.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { TrainerName } from '../src/config/schema.js';
import type { SerializableTrainerState } from '../src/checkpoint/state.js';
import { loadCriticHead, type CriticHead } from '../src/critic/heads.js';
import type { CriticLM } from '../src/critic/value-model.js';
import type { Agent, ChatFormat } from '../src/decpomdp/agent.js';
import { loadCausalLM, type LoadCausalLMOptions } from '../src/model/load.js';
import { loraSettings, type LoraSection } from '../src/model/lora/config.js';
import type { CausalLM } from '../src/model/types.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { createRng } from '../src/util/rng.js';
import { CoLLMCCTrainer } from '../trainers/collm-cc.js';
import { CoLLMDCTrainer } from '../trainers/collm-dc.js';
import type { ActorCriticStateExtra } from '../trainers/common/ac-run.js';
import type { EvalEpisode } from '../trainers/common/eval.js';
import type { MetricRecord, MetricsSink } from '../trainers/common/metrics.js';
import { parseTrainerState, type DatasetCursor, type TrainerState } from '../trainers/common/state.js';
import { MAGRPOTrainer, type MAGRPOStateExtra } from '../trainers/magrpo.js';
import type { TypedRunConfig as RunConfig } from './schemas.js';
import type { TaskSetup } from './tasks.js';

/** What the runner needs from any trainer. */
export interface TrainerHandle {
  readonly name: TrainerName;
  readonly agents: readonly Agent[];
  /** Items per epoch and epochs: the run has `itemsPerEpoch · epochs` steps. */
  readonly itemsPerEpoch: number;
  readonly epochs: number;
  readonly cursor: DatasetCursor;
  readonly envSteps: number;
  /** `skipFirstEval`: the caller just evaluated the current weights (see TrainOptions). */
  train(onItemEnd: () => Promise<void>, options?: { skipFirstEval?: boolean }): Promise<void>;
  evaluate(): Promise<{ metrics: MetricRecord; episodes: EvalEpisode<unknown, unknown>[] }>;
  exportState(): SerializableTrainerState;
  /** exportState() written into `dir` with the AdamW moments streamed one by one (see TrainerBase.writeState). */
  writeState(dir: string): Promise<void>;
  importState(state: SerializableTrainerState): void;
  /** Agents (and critics and heads) in the trainer's layout: `dir/agent_i/`, critics as the trainer saves them. */
  save(dir: string): Promise<void>;
  /**
   * With `model.lora.save_merged` (critics: `model.critic_lora.save_merged`): writes each LoRA
   * model's merged full weights into `<its saved dir>/merged/` under `dir` (after {@link save}).
   */
  saveMerged(dir: string, options?: { dtype?: 'float32' | 'bfloat16' | 'float16' }): Promise<void>;
  dispose(): void;
}

/** Where the weights come from. */
export interface ModelSources {
  /** One HF directory per agent. */
  readonly agents: readonly string[];
  /** Critic LM directories (CoLLM-DC separate critics: one per agent; CoLLM-CC: one); empty otherwise. */
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

/** Step number of a cursor: training items done since the start of the run. */
export function cursorStep(cursor: DatasetCursor, itemsPerEpoch: number): number {
  return cursor.epoch * itemsPerEpoch + cursor.index;
}

function usesSeparateCritic(config: RunConfig): boolean {
  return config.trainer === 'collm-cc' || (config.trainer === 'collm-dc' && config.trainerConfig.use_separate_critic);
}

/** Number of agents a config asks for: `model.agents`, else `num_agents`, else the env's. */
export function numAgentsOf(config: RunConfig, envAgents: number): number {
  if (config.model.agents) return config.model.agents.length;
  return config.trainerConfig.num_agents ?? envAgents;
}

/** The agents' model directories named by the config: `model.agents`, else `model.agent_model` per agent. */
export function agentDirsFromConfig(config: RunConfig, numAgents: number): string[] {
  const m = config.model;
  if (m.agents) return [...m.agents];
  const dir = m.agent_model;
  if (dir !== undefined) return Array.from({ length: numAgents }, () => dir);
  throw new Error('model.agent_model or model.agents is required: the local Hugging Face directory of each agent');
}

/** Model directories named by the config (a fresh run). */
export function sourcesFromConfig(config: RunConfig, numAgents: number): ModelSources {
  const m = config.model;
  const agents = agentDirsFromConfig(config, numAgents);
  let critics: string[] = [];
  if (usesSeparateCritic(config)) {
    const count = config.trainer === 'collm-cc' ? 1 : agents.length;
    if (m.critics) {
      if (m.critics.length !== count) {
        throw new Error(`model.critics has ${m.critics.length} entries; ${config.trainer} needs ${count} (${config.trainer === 'collm-cc' ? 'one centralized critic' : 'one per agent'})`);
      }
      critics = [...m.critics];
    } else {
      // CoMLRL's default critic is the agent's own model.
      critics = Array.from({ length: count }, (_, i) => m.critic_model ?? agents[i]);
    }
  }
  return { agents, critics, heads: null };
}

/** Model directories inside a checkpoint written by {@link TrainerHandle.save} (resume). */
export function sourcesFromCheckpoint(config: RunConfig, dir: string, numAgents: number): ModelSources {
  const saved = savedDirs(config, dir, numAgents);
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

function savedDirs(config: RunConfig, dir: string, numAgents: number): ModelSources {
  const agents = Array.from({ length: numAgents }, (_, i) => join(dir, `agent_${i}`));
  if (config.trainer === 'magrpo') return { agents, critics: [], heads: null };
  if (config.trainer === 'collm-cc') return { agents, critics: [join(dir, 'critic')], heads: [join(dir, 'critic')] };
  if (usesSeparateCritic(config)) {
    const critics = agents.map((a) => join(a, 'critic'));
    return { agents, critics, heads: critics };
  }
  return { agents, critics: [], heads: agents };
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
  lora: LoadCausalLMOptions = {},
): Promise<{ model: CausalLM; tokenizer: Awaited<ReturnType<typeof loadTokenizer>> }> {
  if (!existsSync(dir)) throw new Error(`${what}: model directory ${dir} not found (model paths are local Hugging Face directories)`);
  if (lora.adapter !== undefined && !existsSync(lora.adapter)) throw new Error(`${what}: adapter directory ${lora.adapter} not found (the checkpoint is incomplete)`);
  let model: CausalLM;
  try {
    model = await loadCausalLM(dir, lora);
  } catch (err) {
    throw new Error(`${what}: ${(err as Error).message}`);
  }
  try {
    return { model, tokenizer: await loadTokenizer(dir) };
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
  const key = `${config.trainer.replace('-', '_')}.max_new_tokens`;
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
      const { model, tokenizer } = await loadModelDir(dirs[i], `agent ${i}`, loraOptions(config.model.lora, adapters?.[i], config.seed, `agent_${i}`));
      agents.push({ name: `agent_${i}`, model, tokenizer, chat });
      checkMaxNewTokens(config, model, `agent ${i} (${dirs[i]})`);
      counter?.watch(model);
    }
  } catch (err) {
    for (const a of agents) a.model.dispose();
    throw err;
  }
  return agents;
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
  const cleanup = () => {
    for (const a of agents) a.model.dispose();
    for (const c of critics) c.model.dispose();
    for (const h of heads) h.dispose();
  };
  try {
    agents.push(...(await loadAgents(config, sources.agents, counter, sources.agentAdapters)));
    for (let i = 0; i < sources.critics.length; i++) {
      const lora = loraOptions(criticLora(config), sources.criticAdapters?.[i], config.seed, `critic_${i}`);
      const { model, tokenizer } = await loadModelDir(sources.critics[i], `critic ${i}`, lora);
      critics.push({ name: `critic_${i}`, model, tokenizer });
    }
    // The heads' init stream is unused here: the saved weights overwrite the init.
    if (sources.heads) for (const d of sources.heads) heads.push(await loadCriticHead(d, createRng('resume-head')));
  } catch (err) {
    cleanup();
    throw err;
  }
  const common = {
    agents,
    env: task.env,
    trainTasks: task.trainTasks,
    evalTasks: task.evalTasks,
    evalCallbacks: task.evalCallbacks,
    logger,
  };
  const epochs = config.trainerConfig.num_train_epochs;
  const itemsPerEpoch = task.trainTasks.length;
  try {
    if (config.trainer === 'magrpo') {
      const t = new MAGRPOTrainer<unknown, unknown>({ ...common, config: config.trainerConfig });
      return handle('magrpo', t, agents, critics, config, itemsPerEpoch, epochs, () => {
        t.dispose();
        cleanup();
      }, (s) => t.importState(checkedState<MAGRPOStateExtra>(s)), () => t.exportState());
    }
    if (config.trainer === 'collm-dc') {
      const t = new CoLLMDCTrainer<unknown, unknown>({
        ...common,
        config: config.trainerConfig,
        ...(critics.length > 0 ? { critics } : {}),
        ...(heads.length > 0 ? { criticHeads: heads } : {}),
      });
      return handle('collm-dc', t, agents, critics, config, itemsPerEpoch, epochs, () => {
        // The trainer frees the heads; critic LMs and agents are ours.
        t.dispose();
        for (const a of agents) a.model.dispose();
        for (const c of critics) c.model.dispose();
      }, (s) => t.importState(checkedState<ActorCriticStateExtra>(s)), () => t.exportState());
    }
    if (critics.length !== 1) throw new Error(`collm-cc needs exactly one critic, got ${critics.length}`);
    const t = new CoLLMCCTrainer<unknown, unknown>({
      ...common,
      config: config.trainerConfig,
      critic: critics[0],
      ...(heads.length > 0 ? { criticHead: heads[0] } : {}),
    });
    return handle('collm-cc', t, agents, critics, config, itemsPerEpoch, epochs, () => {
      t.dispose();
      for (const a of agents) a.model.dispose();
      for (const c of critics) c.model.dispose();
    }, (s) => t.importState(checkedState<ActorCriticStateExtra>(s)), () => t.exportState());
  } catch (err) {
    cleanup();
    throw err;
  }
}

/**
 * A checkpoint's trainer state with its envelope checked (see parseTrainerState). Its `extra` is the
 * trainer's own data, which the trainer's `importState` checks against its agents and buffers.
 */
function checkedState<Extra>(raw: SerializableTrainerState): TrainerState<Extra> {
  return parseTrainerState(raw) as TrainerState<Extra>;
}

interface AnyTrainer {
  readonly datasetCursor: DatasetCursor;
  readonly envSteps: number;
  train(options: { onItemEnd?: () => Promise<void>; skipFirstEval?: boolean }): Promise<void>;
  evaluate(): Promise<{ metrics: MetricRecord; episodes: EvalEpisode<unknown, unknown>[] }>;
  save(dir: string): Promise<unknown>;
  writeState(dir: string): Promise<void>;
}

function handle(
  name: TrainerName,
  t: AnyTrainer,
  agents: readonly Agent[],
  critics: readonly CriticLM[],
  config: RunConfig,
  itemsPerEpoch: number,
  epochs: number,
  dispose: () => void,
  importState: (s: SerializableTrainerState) => void,
  exportState: () => SerializableTrainerState,
): TrainerHandle {
  return {
    name,
    agents,
    itemsPerEpoch,
    epochs,
    get cursor() {
      return t.datasetCursor;
    },
    get envSteps() {
      return t.envSteps;
    },
    train: (onItemEnd, options) => t.train({ onItemEnd, ...options }),
    evaluate: async () => {
      const r = await t.evaluate();
      return { metrics: r.metrics, episodes: r.episodes };
    },
    exportState,
    writeState: (dir) => t.writeState(dir),
    importState,
    save: async (dir) => {
      await t.save(dir);
    },
    saveMerged: async (dir, options) => {
      if (config.model.lora?.save_merged) {
        for (let i = 0; i < agents.length; i++) await agents[i].model.saveMerged?.(join(dir, `agent_${i}`, 'merged'), options);
      }
      if (criticLora(config)?.save_merged) {
        const saved = savedDirs(config, dir, agents.length).critics;
        for (let i = 0; i < critics.length; i++) await critics[i].model.saveMerged?.(join(saved[i], 'merged'), options);
      }
    },
    dispose,
  };
}
