/**
 * One CoMLRL parity case: rebuild the case's checkpoint, build the comlrl trainer that matches the
 * CoMLRL trainer under CoMLRL-compatible settings, feed it the case's completions (a
 * {@link CompletionSampler}) and table reward, run its one update through the trainer's own code,
 * and compare every quantity CoMLRL recorded. The trainer is observed, never re-implemented: its
 * optimizers' steps, its models' scoring passes and its update trace are recorded as they happen.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { createLinearHead, type CriticHead } from '../../src/critic/heads.js';
import type { Agent } from '../../src/decpomdp/agent.js';
import { fromCoMLRL, type CoMLRLState } from '../../src/decpomdp/comlrl-adapter.js';
import { loadAgent } from '../../src/decpomdp/load-agent.js';
import { createTinyModel } from '../../src/model/tiny.js';
import type { CausalLM, CompletionScores } from '../../src/model/types.js';
import type { AdamW } from '../../src/optim/adamw.js';
import { rngFor } from '../../src/util/rng.js';
import { COLLM_CC_CONFIG_FIELDS, COLLM_DC_CONFIG_FIELDS, comlrlCompatible } from '../collm/config.js';
import { CoLLMCCTrainer } from '../collm/centralized.js';
import { CoLLMDCTrainer } from '../collm/decentralized.js';
import type { CompletionSampler } from '../core/generation.js';
import type { UpdateTraceEvent } from '../core/trace.js';
import type { RecordedStep, Recording, ScoredRow } from './recording.js';
import { MAGRPO_CONFIG_FIELDS } from '../magrpo/config.js';
import { MAGRPOTrainer } from '../magrpo/trainer.js';
import { Comparison, type QuantityResult } from './compare.js';
import { compareAc, compareMagrpo, compareSteps } from './checks.js';
import type { TrainerVector } from './vector.js';

/** A case's one dataset item. */
type Item = { prompt: string };
type State = CoMLRLState<Item>;

/** A case's outcome. */
export interface ParityCaseResult {
  readonly case: string;
  readonly trainer: string;
  readonly results: QuantityResult[];
  readonly ok: boolean;
}

/** Checkpoint tensor name of a comlrl variable (`comlrl_m3/model.norm.weight` → `model.norm.weight`). */
function checkpointName(variable: tf.Variable, heads: Map<string, string>): string {
  return heads.get(variable.name) ?? variable.name.slice(variable.name.indexOf('/') + 1);
}

/** `name` or `name[r]` (an embedding / LM-head row) as sampled in the vectors. */
function sampleValues(data: Float32Array, shape: readonly number[], key: string, base: string): number[] | null {
  if (key === base) return [...data.subarray(0, 8)];
  const m = /^(.*)\[(\d+)\]$/.exec(key);
  if (!m || m[1] !== base) return null;
  const width = shape[1] ?? 1;
  const r = Number(m[2]);
  return [...data.subarray(r * width, r * width + 8)];
}

/** Rebuilds the case's checkpoint with comlrl's tiny-model writer and checks every file's sha256. */
export async function rebuildCheckpoint(vector: TrainerVector, workDir: string): Promise<string> {
  const { spec, sha256, command } = vector.model;
  const dir = join(workDir, `model-${vector.model.key}-${(sha256['model.safetensors'] ?? 'unknown').slice(0, 12)}`);
  const matches = () => Object.entries(sha256).every(([file, want]) => existsSync(join(dir, file)) && createHash('sha256').update(readFileSync(join(dir, file))).digest('hex') === want);
  if (existsSync(dir) && matches()) return dir;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const flag = (name: string) => new RegExp(`--${name}\\s+(\\S+)`).exec(command)?.[1];
  const arch = flag('arch') ?? 'qwen3';
  const tokenizer = flag('tokenizer') ?? 'qwen3';
  if (arch !== 'qwen3' && arch !== 'qwen2' && arch !== 'llama') throw new Error(`case ${vector.case}: model.command names arch '${arch}', which tiny-model does not write`);
  if (tokenizer !== 'qwen3' && tokenizer !== 'bpe' && tokenizer !== 'word') throw new Error(`case ${vector.case}: model.command names tokenizer '${tokenizer}'`);
  await createTinyModel({ dir, arch, tokenizer, seed: spec.seed, hiddenSize: spec.hidden, numLayers: spec.layers, numHeads: spec.heads, numKvHeads: spec.kv_heads, tieWordEmbeddings: spec.tie });
  for (const [file, want] of Object.entries(sha256)) {
    const got = existsSync(join(dir, file)) ? createHash('sha256').update(readFileSync(join(dir, file))).digest('hex') : '(missing)';
    if (got !== want) throw new Error(`case ${vector.case}: the rebuilt checkpoint's ${file} has sha256 ${got}, the case records ${want} (model.command: ${command})`);
  }
  return dir;
}

/** The comlrl config of the case: CoMLRL's fields as recorded, plus the settings that reproduce CoMLRL. */
function trainerConfig(vector: TrainerVector, fields: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(vector.config)) {
    if (fields.includes(key)) out[key] = value;
    // CoMLRL's placement keys: comlrl runs every model on one backend, which is what they say here.
    else if (value !== null && value !== 'none') throw new Error(`case ${vector.case}: config.${key} = ${JSON.stringify(value)} has no comlrl equivalent`);
  }
  const adam = vector.optimizers.agent0 ?? Object.values(vector.optimizers)[0];
  return { ...out, eval_interval: 0, seed: 0, max_grad_norm: null, adam_betas: adam.betas, adam_eps: adam.eps, weight_decay: adam.weight_decay };
}

/** The formatters, reward and transition of the case as a CoMLRL-style task. */
function caseEnv(vector: TrainerVector, numAgents: number, numTurns: number, rewardCalls: [string, string][]) {
  const { inputs } = vector;
  // The files keep the templates as Python source text: each newline is written as a backslash and an n.
  const unescape = (text: string) => text.replaceAll('\\n', '\n');
  const format = (template: string) => (item: { prompt: string }) => unescape(template).replaceAll('{prompt}', item.prompt);
  let externalTransition;
  if (inputs.external_transition !== null) {
    // The README's words carry the template in single quotes, with {prompt} and {completion_i}.
    const m = /'([^']*)'/.exec(inputs.external_transition);
    if (!m) throw new Error(`case ${vector.case}: inputs.external_transition has no quoted template: ${inputs.external_transition}`);
    const template = unescape(m[1]);
    externalTransition = ({ prompt, agentCompletions }: { prompt: string; agentCompletions: readonly string[] }) =>
      agentCompletions.map((c) => template.replaceAll('{prompt}', prompt).replaceAll('{completion_i}', c));
  }
  const table = new Map(inputs.reward_table.map((r) => [JSON.stringify([r.agent0_text, r.agent1_text]), r.reward]));
  return fromCoMLRL<{ prompt: string }>({
    name: `parity-${vector.case}`,
    numAgents,
    numTurns,
    formatters: inputs.formatters.map(format),
    externalTransition,
    rewardFunc: (completions) => {
      const pair: [string, string] = [completions[0][0], completions[1][0]];
      rewardCalls.push(pair);
      const r = table.get(JSON.stringify(pair));
      if (r === undefined) throw new Error(`case ${vector.case}: no reward in inputs.reward_table for the completions ${JSON.stringify(pair)}`);
      return r;
    },
  });
}

/** The recorded completions of every generate call, per agent in call order, cut at the first pad. */
function recordedGenerations(vector: TrainerVector): { agent: number; promptIds: number[]; rows: number[][] }[] {
  if (vector.magrpo) {
    return vector.magrpo.nodes.flatMap((n) => n.agents.map((a) => ({ agent: a.agent, promptIds: a.prompt_ids, rows: a.rows.map((r, k) => r.slice(0, a.response_lens[k])) })));
  }
  const samples = vector.ac?.samples ?? [];
  const groups = new Map<string, { agent: number; promptIds: number[]; rows: number[][] }>();
  for (const s of samples) {
    const key = `${s.agent}/${s.turn}/${JSON.stringify(s.full_input_ids.slice(0, s.prompt_len))}`;
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { agent: s.agent, promptIds: s.full_input_ids.slice(0, s.prompt_len), rows: [] }));
    g.rows[s.generation] = s.full_input_ids.slice(s.prompt_len, s.prompt_len + s.response_len);
  }
  return [...groups.values()];
}

/** A sampler that answers each prompt with CoMLRL's completions for it, in CoMLRL's call order. */
function fixedSampler(vector: TrainerVector, unknown: string[]): CompletionSampler {
  const pending = recordedGenerations(vector);
  return ({ agent, promptIds, k }) => {
    const key = JSON.stringify(promptIds);
    const at = pending.findIndex((g) => g.agent === agent && JSON.stringify(g.promptIds) === key);
    if (at < 0) {
      unknown.push(`agent ${agent}: ${key.slice(0, 160)}`);
      throw new Error(`case ${vector.case}: comlrl asked agent ${agent} to complete a prompt CoMLRL never sampled: ${key.slice(0, 200)}`);
    }
    const [g] = pending.splice(at, 1);
    if (g.rows.length !== k) throw new Error(`case ${vector.case}: comlrl asked agent ${agent} for ${k} completions, CoMLRL sampled ${g.rows.length}`);
    return g.rows;
  };
}

/** A linear value head holding CoMLRL's initial values (its N(0, 0.02) draw came from torch's RNG). */
function recordedHead(vector: TrainerVector, label: string, hidden: number): CriticHead {
  const init = vector.value_heads_init[label];
  if (!init) throw new Error(`case ${vector.case}: value_heads_init has no '${label}'`);
  const w = init['value_head.value_projection.weight'];
  const b = init['value_head.value_projection.bias'];
  if (!w || !b) throw new Error(`case ${vector.case}: value_heads_init.${label} needs value_head.value_projection.weight and .bias (a linear head)`);
  const head = createLinearHead(hidden, { type: 'linear' }, rngFor(0, 'init'));
  const [vw, vb] = head.trainableVariables();
  tf.tidy(() => {
    vw.assign(tf.tensor2d(w.values, [1, hidden]));
    vb.assign(tf.tensor1d(b.values));
  });
  return head;
}

/** Records every step of `optimizer` (grad norms, per-tensor grad L2 and samples, parameter change). */
function recordSteps(optimizer: AdamW, model: string, heads: Map<string, string>, sampled: readonly string[], steps: RecordedStep[]): void {
  const original = optimizer.step.bind(optimizer);
  optimizer.step = (grads) => {
    const named = grads as tf.NamedTensorMap;
    const before = new Map(optimizer.variables.map((v) => [v.name, v.dataSync().slice()]));
    const gradL2 = new Map<string, number>();
    const gradFirst8 = new Map<string, number[]>();
    let sq = 0;
    for (const v of optimizer.variables) {
      const g = named[v.name];
      if (!g) continue;
      const data = g.dataSync() as Float32Array;
      let s = 0;
      for (let i = 0; i < data.length; i++) s += data[i] * data[i];
      sq += s;
      const name = checkpointName(v, heads);
      gradL2.set(name, Math.sqrt(s));
      for (const key of sampled) {
        const vals = sampleValues(data, v.shape, key, name);
        if (vals) gradFirst8.set(key, vals);
      }
    }
    original(grads);
    const deltaL2 = new Map<string, number>();
    for (const v of optimizer.variables) {
      const b = before.get(v.name) as Float32Array;
      const a = v.dataSync() as Float32Array;
      let s = 0;
      for (let i = 0; i < a.length; i++) s += (a[i] - b[i]) ** 2;
      deltaL2.set(checkpointName(v, heads), Math.sqrt(s));
    }
    steps.push({ model, gradNorm: Math.sqrt(sq), gradL2, gradFirst8, deltaL2 });
  };
}

/**
 * Records the per-token log-probs of every update pass of `model` (the passes under a gradient:
 * `tokenLogProbs`, the no-gradient scoring of behaviour log-probs at rollout, is left out).
 */
function recordScoring(model: CausalLM, label: string, scored: Map<string, ScoredRow[]>): void {
  const original = model.scoreCompletions.bind(model);
  const plain = model.tokenLogProbs.bind(model);
  const rows = scored.get(label) ?? [];
  scored.set(label, rows);
  let outsideUpdate = 0;
  model.tokenLogProbs = async (prompts, completions) => {
    outsideUpdate++;
    try {
      return await plain(prompts, completions);
    } finally {
      outsideUpdate--;
    }
  };
  model.scoreCompletions = (prompts, completions, pass): CompletionScores => {
    const out = original(prompts, completions, pass);
    if (outsideUpdate > 0) return out;
    const lps = out.tokenLogProbs.arraySync();
    prompts.forEach((p, r) => rows.push({ promptIds: [...p], completionIds: [...completions[r]], tokenLogProbs: lps[r].slice(0, completions[r].length) }));
    return out;
  };
}

/** Every tensor's values, by checkpoint name. */
function snapshot(variables: readonly tf.Variable[], heads: Map<string, string>): Map<string, Float32Array> {
  return new Map(variables.map((v) => [checkpointName(v, heads), (v.dataSync() as Float32Array).slice()]));
}

/**
 * Which settings the comlrl trainer runs with: `comlrl-compatible` (the switches of the docs'
 * differences table that reproduce CoMLRL: `score_last_token: false` for MAGRPO,
 * {@link comlrlCompatible} for CoLLM) or `comlrl-defaults` (comlrl's own defaults, to see what
 * each differing default changes).
 */
export type ParitySettings = 'comlrl-compatible' | 'comlrl-defaults';

/** Runs one case and compares it; models are freed at the end. */
export async function runParityCase(vector: TrainerVector, workDir: string, settings: ParitySettings = 'comlrl-compatible'): Promise<ParityCaseResult> {
  const compatible = settings === 'comlrl-compatible';
  const dir = await rebuildCheckpoint(vector, workDir);
  const cfg = vector.config;
  const numAgents = typeof cfg.num_agents === 'number' ? cfg.num_agents : 2;
  const numTurns = typeof cfg.num_turns === 'number' ? cfg.num_turns : 1;
  const agents: Agent[] = [];
  for (let i = 0; i < numAgents; i++) agents.push(await loadAgent(dir, { name: `agent${i}` }));
  const critics: Agent[] = [];
  const heads = new Map<string, string>();
  const rec: Recording = { steps: [], scored: new Map(), trace: [], rewardCalls: [], unknownPrompts: [], itemDelta: new Map() };
  const env = caseEnv(vector, numAgents, numTurns, rec.rewardCalls);
  const common = { agents, env, trainTasks: [vector.inputs.dataset_item], sampler: fixedSampler(vector, rec.unknownPrompts), trace: (e: UpdateTraceEvent) => rec.trace.push(e) };
  const sampledKeys = [...new Set(vector.steps.flatMap((s) => Object.keys(s.grad_first8)))];
  const models = new Map<string, tf.Variable[]>();
  let trainer: MAGRPOTrainer<Item, State> | CoLLMDCTrainer<Item, State> | CoLLMCCTrainer<Item, State>;
  const headFor = (label: string, model: CausalLM) => {
    const head = recordedHead(vector, label, model.hiddenSize);
    const [w, b] = head.trainableVariables();
    heads.set(w.name, 'value_head.value_projection.weight');
    heads.set(b.name, 'value_head.value_projection.bias');
    return head;
  };
  try {
    if (vector.trainer === 'MAGRPOTrainer') {
      const t = new MAGRPOTrainer({ ...common, config: { ...trainerConfig(vector, MAGRPO_CONFIG_FIELDS), ...(compatible ? { score_last_token: false } : {}) } });
      t.optimizers.forEach((o, i) => recordSteps(o, `agent${i}`, heads, sampledKeys, rec.steps));
      trainer = t;
    } else if (vector.trainer === 'IACTrainer') {
      for (let i = 0; i < numAgents; i++) critics.push(await loadAgent(dir, { name: `critic${i}` }));
      const t = new CoLLMDCTrainer({
        ...common,
        critics,
        criticHeads: critics.map((c, i) => headFor(`critic${i}`, c.model)),
        config: { ...trainerConfig(vector, COLLM_DC_CONFIG_FIELDS), ...(compatible ? comlrlCompatible() : {}) },
      });
      t.actorOptimizers.forEach((o, i) => recordSteps(o, `agent${i}`, heads, sampledKeys, rec.steps));
      t.criticOptimizers.forEach((o, c) => recordSteps(o, `critic${c}`, heads, sampledKeys, rec.steps));
      trainer = t;
    } else {
      critics.push(await loadAgent(dir, { name: 'critic' }));
      const t = new CoLLMCCTrainer({
        ...common,
        critic: critics[0],
        criticHead: headFor('critic', critics[0].model),
        config: { ...trainerConfig(vector, COLLM_CC_CONFIG_FIELDS), ...(compatible ? comlrlCompatible() : {}) },
      });
      t.actorOptimizers.forEach((o, i) => recordSteps(o, `agent${i}`, heads, sampledKeys, rec.steps));
      recordSteps(t.criticOptimizer, 'critic', heads, sampledKeys, rec.steps);
      trainer = t;
    }
    agents.forEach((a, i) => {
      recordScoring(a.model, `agent${i}`, rec.scored);
      models.set(`agent${i}`, a.model.trainableVariables());
    });
    if (trainer instanceof CoLLMDCTrainer) trainer.critics.forEach((c, i) => models.set(`critic${i}`, c.ownVariables()));
    if (trainer instanceof CoLLMCCTrainer) models.set('critic', trainer.critic.ownVariables());

    const before = new Map([...models].map(([label, vars]) => [label, snapshot(vars, heads)]));
    let trainError: Error | null = null;
    try {
      await trainer.train();
    } catch (err) {
      trainError = err as Error;
    }
    for (const [label, vars] of models) {
      const b = before.get(label) as Map<string, Float32Array>;
      const after = snapshot(vars, heads);
      rec.itemDelta.set(label, new Map([...after].map(([name, a]) => [name, a.map((x, i) => x - (b.get(name) as Float32Array)[i])])));
    }
    const cmp = new Comparison();
    if (trainError) cmp.problem('update ran', `comlrl's update failed: ${trainError.message}`);
    for (const p of rec.unknownPrompts) cmp.problem('prompt ids', `comlrl's prompt was never sampled by CoMLRL: ${p}`);
    const expectedCalls = vector.inputs.reward_calls.flatMap((c) => c.agent0.map((a0, k): [string, string] => [a0, c.agent1[k]]));
    cmp.same('reward inputs (texts)', 'all reward calls, sorted', expectedCalls.map((c) => JSON.stringify(c)).sort(), rec.rewardCalls.map((c) => JSON.stringify(c)).sort());
    if (vector.magrpo) compareMagrpo(vector, rec, cmp);
    else compareAc(vector, rec, cmp);
    compareSteps(vector, rec, cmp);
    const results = cmp.results();
    trainer.dispose();
    return { case: vector.case, trainer: vector.trainer, results, ok: results.every((r) => r.ok) };
  } finally {
    for (const a of [...agents, ...critics]) a.model.dispose();
  }
}
