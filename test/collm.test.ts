/**
 * CoLLM-DC / CoLLM-CC trainers on real tiny checkpoints: configs and their CoMLRL constraints,
 * constructor rules, TD targets / bootstrapping / terminal handling on a scripted environment with
 * fixed critic values (hand-derived), the importance ratio and its clipping, non-finite errors,
 * saving and exact resume.
 */
import * as fs from 'node:fs';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import type { JointTransition } from '../src/buffer/replay.js';
import { createCriticHead, headSpecFromHiddenDim, loadCriticHead, type CriticHead } from '../src/critic/heads.js';
import { decentralizedCriticIds, globalInfoPrefixIds } from '../src/critic/inputs.js';
import type { CriticLM } from '../src/critic/value-model.js';
import type { Agent } from '../src/decpomdp/agent.js';
import type { GlobalInfo, LLMDecPOMDP, ObservationRendering, StepResult } from '../src/decpomdp/types.js';
import { loadCausalLM } from '../src/model/load.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { rngFor } from '../src/util/rng.js';
import { toyTasks, toyWords, type ToyTask } from '../envs/toy/index.js';
import {
  COLLM_CC_CONFIG_FIELDS,
  comlrl136,
  parseCoLLMCCConfig,
  parseCoLLMDCConfig,
} from '../trainers/collm/config.js';
import { CoLLMCCTrainer } from '../trainers/collm/centralized.js';
import { CoLLMDCTrainer } from '../trainers/collm/decentralized.js';
import { actorObjective, actorStep, behaviourLogProbs, type ActorRow } from '../trainers/collm/steps.js';
import { encodePrompt } from '../trainers/core/generation.js';
import { bootstrapTargets, estimates } from '../trainers/collm/run.js';
import { ACTOR_CRITIC_PRESET_NAMES, actorCriticPreset } from '../trainers/presets.js';
import { disposeCritics, toyCritics } from './collm-helpers.js';
import { disposeAgents, tempDir, tinyAgents } from './magrpo-helpers.js';

// ---------------------------------------------------------------------------------------------
// Configs (no models needed).
// ---------------------------------------------------------------------------------------------

describe('actor-critic configs', () => {
  it('CoMLRL 1.3.6 defaults plus the paper-aligned extras', () => {
    const dc = parseCoLLMDCConfig({});
    expect(dc).toMatchObject({
      agent_learning_rate: 5e-6,
      critic_learning_rate: 5e-6,
      rollout_buffer_size: 8,
      train_batch_size: null,
      value_clip_range: 0.2,
      value_loss_coef: 0.6,
      advantage_normalization: true,
      max_new_tokens: 256,
      temperature: 0.6,
      top_p: 0.6,
      top_k: null,
      num_train_epochs: 40,
      use_separate_critic: true,
      critic_type: 'v',
      critic_value_head_hidden_dim: null,
      value_head_hidden_dim: null,
      num_turns: 2,
      external_prompt_passthrough: false,
      discount: 0.9,
      num_generations: 1,
      eval_interval: 16,
      eval_num_samples: 4,
      eval_batch_size: 1,
      early_termination_threshold: -0.2,
      logging_steps: 1,
      update_epochs: 1,
      use_importance_ratio: true,
      ratio_clip_range: 0.2,
      // The paper's choices (docs/differences.md): m_t and the history for DC and CC alike,
      // targets from the current critic, Q against a baseline, value clip on every critic.
      use_global_info: true,
      critic_history: 'full',
      recompute_targets: true,
      q_advantage: 'baseline',
      value_clip_separate: true,
    });
    const cc = parseCoLLMCCConfig({});
    expect(cc).toMatchObject({ use_global_info: true, critic_history: 'full', recompute_targets: true, q_advantage: 'baseline', value_clip_range: 0.2, value_clip_separate: true });
    expect(cc.value_loss_coef).toBe(0.6);
    expect(COLLM_CC_CONFIG_FIELDS).toContain('value_clip_range');
    for (const parse of [parseCoLLMDCConfig, parseCoLLMCCConfig]) {
      expect(parse({ ...comlrl136() })).toMatchObject({
        update_epochs: 1,
        use_importance_ratio: false,
        ratio_clip_range: null,
        use_global_info: false,
        critic_history: 'current',
        recompute_targets: false,
        q_advantage: 'td',
        value_clip_separate: false,
      });
    }
    // The shared head keeps CoMLRL's value clip under comlrl136 (it only ever applied there).
    expect(parseCoLLMDCConfig({ ...comlrl136() }).value_clip_range).toBe(0.2);
  });

  it('rejects out-of-range values naming the field (CoMLRL constraint tests)', () => {
    for (const parse of [parseCoLLMDCConfig, parseCoLLMCCConfig]) {
      for (const field of ['rollout_buffer_size', 'train_batch_size', 'num_agents', 'num_turns', 'num_generations', 'eval_batch_size', 'logging_steps', 'update_epochs']) {
        expect(() => parse({ [field]: 0 })).toThrow(new RegExp(`${field} must be an integer >= 1`));
      }
      for (const field of ['eval_interval', 'eval_num_samples']) {
        expect(() => parse({ [field]: -1 })).toThrow(new RegExp(`${field} must be an integer >= 0`));
      }
      expect(() => parse({ critic_type: 'x' })).toThrow(/critic_type must be one of 'v', 'q'/);
      expect(() => parse({ num_turns: 2, num_generations: 2 })).toThrow(/num_generations must be 1 when num_turns > 1/);
      expect(parse({ num_turns: 1, num_generations: 4 }).num_generations).toBe(4);
      expect(() => parse({ ratio_clip_range: 0 })).toThrow(/ratio_clip_range must be a finite number > 0/);
      expect(() => parse({ criticType: 'v' })).toThrow(/did you mean 'critic_type'/);
    }
    expect(() => parseCoLLMCCConfig({ use_separate_critic: false })).toThrow(/unknown field 'use_separate_critic'/);
  });

  it('a head width of 0 means a linear head, as in CoMLRL configs; negative widths are refused', () => {
    expect(parseCoLLMDCConfig({ value_head_hidden_dim: 0, critic_value_head_hidden_dim: 0 })).toMatchObject({ value_head_hidden_dim: 0, critic_value_head_hidden_dim: 0 });
    expect(headSpecFromHiddenDim(parseCoLLMCCConfig({ critic_value_head_hidden_dim: 0 }).critic_value_head_hidden_dim)).toEqual({ type: 'linear' });
    expect(() => parseCoLLMDCConfig({ value_head_hidden_dim: -1 })).toThrow(/value_head_hidden_dim must be an integer >= 0/);
  });

  it('presets of the paper runs parse with their trainer', () => {
    expect(ACTOR_CRITIC_PRESET_NAMES).toEqual(['tldr-dc', 'tldr-cc', 'coophe-dc', 'coophe-cc', 'housebuild-dc', 'housebuild-cc']);
    for (const name of ACTOR_CRITIC_PRESET_NAMES) {
      const p = actorCriticPreset(name);
      const cfg = p.trainer === 'collm-dc' ? parseCoLLMDCConfig(p.config) : parseCoLLMCCConfig(p.config);
      expect(cfg.num_agents).toBe(2);
      expect(cfg.ratio_clip_range).toBe(0.2);
    }
    const hb = actorCriticPreset('housebuild-dc');
    expect(parseCoLLMDCConfig(hb.config)).toMatchObject({ num_turns: 4, num_train_epochs: 120, critic_learning_rate: 3e-6, max_new_tokens: 512, value_clip_range: 0.05, rollout_buffer_size: 1 });
    expect(parseCoLLMCCConfig(actorCriticPreset('housebuild-cc').config)).toMatchObject({ num_train_epochs: 120, critic_learning_rate: 3e-6, value_clip_range: 0.05 });
    expect(hb.rewardProcessor.shift).toBe(-1);
    expect(() => actorCriticPreset('nope')).toThrow(/unknown actor-critic preset 'nope'/);
  });
});

// ---------------------------------------------------------------------------------------------
// The actor objective (no models needed).
// ---------------------------------------------------------------------------------------------

describe('actor objective: ratio and clipping', () => {
  const row = (advantage: number, oldLogProb: number | null): ActorRow => ({ promptIds: [1], completionIds: [2], advantage, oldLogProb, weight: 0.5 });
  const gradAt = (seq: number[], rows: ActorRow[], settings: { useRatio: boolean; clipRange: number | null }) =>
    tf.tidy(() => {
      const f = (x: tf.Tensor) => actorObjective(settings)(x as tf.Tensor1D, rows);
      const x = tf.tensor1d(seq);
      return { value: f(x).dataSync()[0], grad: Array.from(tf.grad(f)(x).dataSync()) };
    });

  it('unchanged actor (no stored log-prob): ρ = 1 exactly, and all three objectives have the same gradient −w·A', () => {
    const rows = [row(2, null), row(-1, null)];
    const seq = [-1.3, -0.2];
    const off = gradAt(seq, rows, { useRatio: false, clipRange: null });
    const unclipped = gradAt(seq, rows, { useRatio: true, clipRange: null });
    const clipped = gradAt(seq, rows, { useRatio: true, clipRange: 0.2 });
    expect(off.grad).toEqual([-1, 0.5]); // −0.5·2, −0.5·(−1)
    expect(unclipped.grad).toEqual(off.grad);
    expect(clipped.grad).toEqual(off.grad);
    // Values: −Σ w·A·log π = −(0.5·2·−1.3 + 0.5·−1·−0.2) = 1.2 ; with ρ = 1: −Σ w·A = −(1 − 0.5) = −0.5
    expect(off.value).toBeCloseTo(1.2, 6);
    expect(unclipped.value).toBe(-0.5);
    expect(clipped.value).toBe(-0.5);
  });

  it('ρ outside [1 − c, 1 + c]: the clipped side has zero gradient, the other keeps −w·A·ρ', () => {
    // seq − old = ±0.5 → ρ = e^{±0.5} (1.6487 / 0.6065), c = 0.2, w = 0.5.
    const rows = [row(1, -1.5), row(-1, -1.5), row(1, -0.5), row(-1, -0.5)];
    const seq = [-1, -1, -1, -1];
    const { grad } = gradAt(seq, rows, { useRatio: true, clipRange: 0.2 });
    const up = Math.exp(0.5);
    const down = Math.exp(-0.5);
    expect(grad[0]).toBe(0); // A > 0, ρ > 1.2: clipped
    expect(grad[1]).toBeCloseTo(0.5 * up, 5); // A < 0, ρ > 1.2: min picks ρ·A, gradient −w·A·ρ
    expect(grad[2]).toBeCloseTo(-0.5 * down, 5); // A > 0, ρ < 0.8: min picks ρ·A
    expect(grad[3]).toBe(0); // A < 0, ρ < 0.8: clipped
    // Unclipped ratio: every row −w·A·ρ.
    const free = gradAt(seq, rows, { useRatio: true, clipRange: null }).grad;
    expect(free[0]).toBeCloseTo(-0.5 * up, 5);
    expect(free[3]).toBeCloseTo(0.5 * down, 5);
  });
});

// ---------------------------------------------------------------------------------------------
// Trainers on tiny checkpoints.
// ---------------------------------------------------------------------------------------------

interface ScriptState {
  readonly cue: string;
  readonly turn: number;
  readonly last: number | null;
}

/** Rewards come from a script (independent of the actions); optional early `done`. */
class ScriptedEnv implements LLMDecPOMDP<ToyTask, ScriptState> {
  readonly name = 'scripted';
  readonly numAgents = 2;
  readonly horizon: number;
  constructor(
    private readonly rewards: readonly number[],
    private readonly doneAfter: number | null = null,
  ) {
    this.horizon = rewards.length;
  }
  initialState(task: ToyTask): ScriptState {
    return { cue: task.cue, turn: 0, last: null };
  }
  observe(s: ScriptState, agent: number): string {
    // Agents see different texts so a critic input can be traced back to its agent.
    return agent === 0 ? `cue ${s.cue}` : `partner ${s.cue} none`;
  }
  async step(s: ScriptState): Promise<StepResult<ScriptState>> {
    const reward = this.rewards[s.turn];
    const turn = s.turn + 1;
    const done = turn >= this.horizon || (this.doneAfter !== null && turn >= this.doneAfter);
    return { reward, next: { cue: s.cue, turn, last: reward }, done, info: {} };
  }
  globalInfo(s: ScriptState): GlobalInfo {
    return { turn: s.turn, numTurns: this.horizon, lastReward: s.last, maxReward: 1 };
  }
}

/** The same script as a staged env; counts the transitions (the costly feedback step) it runs. */
class StagedScriptedEnv extends ScriptedEnv {
  transitions = 0;
  async rewardOf(s: ScriptState): Promise<{ raw: number; reward: number }> {
    const r = (await this.step(s)).reward;
    return { raw: r, reward: r };
  }
  async transition(s: ScriptState): Promise<StepResult<ScriptState>> {
    this.transitions++;
    return this.step(s);
  }
}

let dir: string;
let cleanup: () => Promise<void>;
let agents: Agent[];
let critics: CriticLM[];

beforeAll(async () => {
  setBackendLogger(null);
  await initBackend('wasm');
  ({ dir, cleanup } = await tempDir('collm'));
  agents = await tinyAgents(dir, [
    { name: 'a0', arch: 'qwen3', seed: 1, words: [...toyWords] },
    { name: 'a1', arch: 'llama', seed: 2, words: [...toyWords] },
  ]);
  critics = await toyCritics(dir);
});
afterAll(async () => {
  disposeAgents(agents);
  disposeCritics(critics);
  await cleanup();
});

/** A linear head whose value is the constant `c` for every input (weights 0, bias c). */
function constantHead(hidden: number, c: number): CriticHead {
  const head = createCriticHead(hidden, { type: 'linear' }, rngFor(0, 'init'));
  const [w, b] = head.trainableVariables();
  tf.tidy(() => {
    w.assign(tf.zerosLike(w));
    b.assign(tf.tensor1d([c]));
  });
  return head;
}

const tasks = toyTasks(4, 'script');
const fast = { max_new_tokens: 2, temperature: 1, top_p: 1, eval_interval: 0, logging_steps: 1_000_000, seed: 3 } as const;

describe('TD targets on scripted rewards with fixed critic values', () => {
  it('CoLLM-CC: y_t = r_t + γ·V(h_{t+1}), no bootstrap after the last turn', async () => {
    const head = constantHead(critics[2].model.hiddenSize, 0.5);
    const trainer = new CoLLMCCTrainer({
      agents,
      critic: critics[2],
      criticHead: head,
      env: new ScriptedEnv([0.1, 0.2, 0.3]),
      trainTasks: tasks,
      config: { ...fast, num_turns: 3, discount: 0.5, early_termination_threshold: null },
    });
    const trs = await trainer.rollout(tasks[0]);
    expect(trs.map((t) => t.turn)).toEqual([0, 1, 2]);
    expect(trs.map((t) => t.joint?.value)).toEqual([0.5, 0.5, 0.5]);
    // y = [0.1 + 0.5·0.5, 0.2 + 0.5·0.5, 0.3] = [0.35, 0.45, 0.3]
    const y = trs.map((t) => t.joint?.target ?? NaN);
    [0.35, 0.45, 0.3].forEach((want, t) => expect(y[t]).toBeCloseTo(want, 12));
    for (const tr of trs) for (const a of tr.agents) expect(a.target).toBe(tr.joint?.target);
    // Monte-Carlo returns (logging): G = [0.1 + 0.5·0.2 + 0.25·0.3, 0.2 + 0.5·0.3, 0.3] = [0.275, 0.35, 0.3]
    [0.275, 0.35, 0.3].forEach((want, t) => expect(trs[t].agents[0].return).toBeCloseTo(want, 12));
    expect(trs.map((t) => t.done)).toEqual([false, false, true]);
    expect(trs[0].nextObservations).toEqual(['cue red', 'partner red none']);
    expect(trs[2].nextObservations).toBeNull();
    expect(trs.map((t) => t.globalInfo.lastReward)).toEqual([null, 0.1, 0.2]);
    expect(trs[1].nextGlobalInfo).toEqual(trs[2].globalInfo);
    // The update's δ per turn: y − 0.5 = [−0.15, −0.05, −0.2].
    const m = await trainer.updateFrom(trs);
    expect(m['turn_1/td_error_mean']).toBeCloseTo(-0.15, 6);
    expect(m['turn_2/td_error_mean']).toBeCloseTo(-0.05, 6);
    expect(m['turn_3/td_error_mean']).toBeCloseTo(-0.2, 6);
    trainer.dispose();
  });

  it('early termination (env done, or reward above the threshold) ends the trajectory without bootstrap', async () => {
    for (const [env, threshold] of [
      [new ScriptedEnv([0.1, 0.2, 0.3], 2), null],
      [new ScriptedEnv([0.1, 0.2, 0.3]), 0.15],
    ] as const) {
      const trainer = new CoLLMCCTrainer({
        agents,
        critic: critics[2],
        criticHead: constantHead(critics[2].model.hiddenSize, 0.5),
        env,
        trainTasks: tasks,
        config: { ...fast, num_turns: 3, discount: 0.5, early_termination_threshold: threshold },
      });
      const trs = await trainer.rollout(tasks[1]);
      // r = [0.1, 0.2] (0.1 is not > 0.15, 0.2 is): y = [0.1 + 0.5·0.5, 0.2] = [0.35, 0.2]
      expect(trs.map((t) => t.reward)).toEqual([0.1, 0.2]);
      expect(trs[0].joint?.target).toBeCloseTo(0.35, 12);
      expect(trs[1].joint?.target).toBe(0.2);
      expect(trs.map((t) => t.done)).toEqual([false, true]);
      trainer.dispose();
    }
  });

  it('CoLLM-DC: each agent bootstraps from its own critic (separate critics and shared heads)', async () => {
    for (const separate of [true, false]) {
      const hidden = separate ? critics[0].model.hiddenSize : agents[0].model.hiddenSize;
      const trainer = new CoLLMDCTrainer({
        agents,
        ...(separate ? { critics: [critics[0], critics[1]] } : {}),
        criticHeads: [constantHead(hidden, 0.5), constantHead(separate ? critics[1].model.hiddenSize : agents[1].model.hiddenSize, -1)],
        env: new ScriptedEnv([0.1, 0.2, 0.3]),
        trainTasks: tasks,
        config: { ...fast, num_turns: 3, discount: 0.5, early_termination_threshold: null, use_separate_critic: separate },
      });
      const trs = await trainer.rollout(tasks[2]);
      // agent 0 (V = 0.5): y = [0.35, 0.45, 0.3]; agent 1 (V = −1): y = [0.1 − 0.5, 0.2 − 0.5, 0.3] = [−0.4, −0.3, 0.3]
      [0.35, 0.45, 0.3].forEach((want, t) => expect(trs[t].agents[0].target).toBeCloseTo(want, 12));
      [-0.4, -0.3, 0.3].forEach((want, t) => expect(trs[t].agents[1].target).toBeCloseTo(want, 12));
      expect(trs.map((t) => t.agents[1].value)).toEqual([-1, -1, -1]);
      expect(trs.every((t) => t.joint === null)).toBe(true);
      // Agent 1's critic input holds agent 1's observation ('partner …'); agent 0's only its own
      // history: its observations ('cue red'), never agent 1's.
      const tok = separate ? critics[0].tokenizer : agents[0].tokenizer;
      const partner = tok.encode('partner', { addSpecialTokens: false })[0];
      for (const t of trs) expect(t.agents[1].criticIds).toContain(partner);
      const ownActions = trs.map((t) => t.agents[0].completionIds);
      const isSub = (hay: readonly number[], needle: readonly number[]) => hay.some((_, i) => needle.every((x, j) => hay[i + j] === x));
      if (!separate) {
        // Shared head: m_t block, then each earlier turn's prompt + completion ids, then the prompt.
        const a = trs.map((t) => t.agents[0]);
        const m = (t: number) => globalInfoPrefixIds(agents[0].tokenizer, trs[t].globalInfo);
        expect(a[0].criticIds).toEqual([...m(0), ...a[0].promptIds]);
        expect(a[2].criticIds).toEqual([...m(2), ...a[0].promptIds, ...ownActions[0], ...a[1].promptIds, ...ownActions[1], ...a[2].promptIds]);
        // The next-step input is the next transition's input; none after the last step.
        expect(a[0].nextCriticIds).toEqual(a[1].criticIds);
        expect(a[2].nextCriticIds).toBeNull();
      } else {
        // Separate critic: the text layout with its turn history (src/critic/inputs.ts).
        const want = decentralizedCriticIds(critics[0].tokenizer, {
          prompt: trs[2].agents[0].observation,
          globalInfo: trs[2].globalInfo,
          history: [0, 1].map((t) => ({ observation: trs[t].agents[0].observation, action: trs[t].agents[0].action })),
        });
        expect(trs[2].agents[0].criticIds).toEqual(want);
        expect(isSub(trs[2].agents[0].criticIds, critics[0].tokenizer.encode('[Turn 2]', { addSpecialTokens: false }))).toBe(true);
        // comlrl136: the current observation only, no m_t (CoMLRL 1.3.6).
        const old = new CoLLMDCTrainer({
          agents,
          critics: [critics[0], critics[1]],
          env: new ScriptedEnv([0.1, 0.2, 0.3]),
          trainTasks: tasks,
          config: { ...fast, ...comlrl136(), num_turns: 3, early_termination_threshold: null },
        });
        const otrs = await old.rollout(tasks[2]);
        for (const t of otrs) expect(t.agents[0].criticIds).toEqual(critics[0].tokenizer.encode(t.agents[0].observation));
        old.dispose();
      }
      trainer.dispose();
    }
  });

  it('a staged env runs no transition (feedback) after the last turn or an early stop', async () => {
    const env = new StagedScriptedEnv([0.1, 0.2, 0.3]);
    const trainer = new CoLLMCCTrainer({ agents, critic: critics[2], env, trainTasks: tasks, config: { ...fast, num_turns: 3, early_termination_threshold: 0.15 } });
    const trs = await trainer.rollout(tasks[0]);
    expect(trs.map((t) => t.reward)).toEqual([0.1, 0.2]);
    expect(env.transitions).toBe(1); // after turn 1 only: turn 2's reward 0.2 > 0.15 ends the episode
    expect(trs[1].nextGlobalInfo).toBeNull();
    expect(trs[0].nextGlobalInfo).toEqual(trs[1].globalInfo);
    trainer.dispose();
  });

  it('the centralized critic input holds every agent observation and m_t (token ids)', async () => {
    const trainer = new CoLLMCCTrainer({ agents, critic: critics[2], env: new ScriptedEnv([0, 1]), trainTasks: tasks, config: { ...fast, num_turns: 2, early_termination_threshold: null } });
    const trs = await trainer.rollout(tasks[3]); // cue gold
    const tok = critics[2].tokenizer;
    const ids = trs[1].joint?.criticIds ?? [];
    const enc = (s: string) => tok.encode(s, { addSpecialTokens: false });
    const isSub = (needle: number[]) => ids.some((_, i) => needle.every((x, j) => ids[i + j] === x));
    expect(isSub(enc('[Agent 0] cue gold'))).toBe(true);
    expect(isSub(enc('[Agent 1] partner gold none'))).toBe(true);
    expect(isSub(enc('[Global Info] turn 2 of 2; last reward: 0 (max 1)'))).toBe(true);
    trainer.dispose();
  });
});

describe("an env's prompt rendering", () => {
  /**
   * The scripted env with a rendering, as HouseBuild has: turn 1 raw for both agents; later turns
   * agent 0 through the chat template with the task's system prompt, agent 1 raw.
   */
  class RenderedScriptedEnv extends ScriptedEnv {
    rendering(s: ScriptState, agent: number): ObservationRendering {
      return s.turn === 0 || agent === 1 ? { kind: 'raw' } : { kind: 'chat', system: 'cue', user: this.observe(s, agent) };
    }
  }

  it('CoLLM-CC and CoLLM-DC encode every prompt with it (chat agents get the raw observation where it says raw)', async () => {
    // Chat agents: without the rendering their prompts would go through the chat template.
    const chatAgents: Agent[] = agents.map((a) => ({ ...a, chat: { system: 'none' } }));
    const env = new RenderedScriptedEnv([0.1, 0.2]);
    expect(encodePrompt(chatAgents[0], 'cue red')).not.toEqual(chatAgents[0].tokenizer.encode('cue red'));
    const config = { ...fast, num_turns: 2, early_termination_threshold: null, eval_num_samples: 1 };
    const cc = new CoLLMCCTrainer({ agents: chatAgents, critic: critics[2], env, trainTasks: tasks, config });
    const dcSeparate = new CoLLMDCTrainer({ agents: chatAgents, critics: [critics[0], critics[1]], env, trainTasks: tasks, config });
    // A shared head reads the actor's prompt ids: its critic input shows the rendering too.
    // (no m_t and no history here, so its critic input is exactly the actor's prompt ids)
    const dcShared = new CoLLMDCTrainer({
      agents: chatAgents,
      env,
      trainTasks: tasks,
      evalTasks: [tasks[0]],
      config: { ...config, use_separate_critic: false, use_global_info: false, critic_history: 'current' },
    });
    for (const trainer of [cc, dcSeparate, dcShared]) {
      const trs = await trainer.rollout(tasks[0]);
      expect(trs.map((t) => t.turn)).toEqual([0, 1]);
      for (const i of [0, 1]) {
        const obs = trs.map((t) => t.agents[i].observation);
        expect(trs[0].agents[i].promptIds).toEqual(chatAgents[i].tokenizer.encode(obs[0]));
        const turn2 = i === 1 ? chatAgents[i].tokenizer.encode(obs[1]) : encodePrompt(chatAgents[i], 'ignored', { kind: 'chat', system: 'cue', user: obs[1] });
        expect(trs[1].agents[i].promptIds).toEqual(turn2);
        expect(trs.map((t) => t.agents[i].prompt)).toEqual(trs.map((t) => chatAgents[i].tokenizer.decode(t.agents[i].promptIds)));
      }
    }
    const trs = await dcShared.rollout(tasks[1]);
    for (const t of trs) t.agents.forEach((a) => expect(a.criticIds).toEqual(a.promptIds));

    // Evaluation: the shared head values the rendered prompts (turn 1: the raw observations).
    const ev = await dcShared.evaluate();
    const obs = ev.episodes[0].observations[0];
    const raw = await Promise.all([0, 1].map(async (i) => (await dcShared.critics[i].predict([chatAgents[i].tokenizer.encode(obs[i])]))[0]));
    const templated = await Promise.all([0, 1].map(async (i) => (await dcShared.critics[i].predict([encodePrompt(chatAgents[i], obs[i])]))[0]));
    expect(ev.metrics['eval/turn_1/value_pred_mean']).toBeCloseTo((raw[0] + raw[1]) / 2, 6);
    // The check tells the two apart: the templated prompts give another value.
    expect(Math.abs((templated[0] + templated[1]) / 2 - (raw[0] + raw[1]) / 2)).toBeGreaterThan(1e-3);
    for (const trainer of [cc, dcSeparate, dcShared]) trainer.dispose();
  });
});

describe('importance ratio over update epochs', () => {
  /** Fresh copies of the actors and CC critic from their checkpoints (identical starts). */
  async function freshSetup(): Promise<{ agents: Agent[]; critic: CriticLM; dispose: () => void }> {
    const load = async (name: string) => ({ model: await loadCausalLM(join(dir, name)), tokenizer: await loadTokenizer(join(dir, name)) });
    const a0 = await load('a0');
    const a1 = await load('a1');
    const c = await load('cc');
    const fresh: Agent[] = [
      { name: 'a0', chat: false, ...a0 },
      { name: 'a1', chat: false, ...a1 },
    ];
    return { agents: fresh, critic: c, dispose: () => [a0.model, a1.model, c.model].forEach((m) => m.dispose()) };
  }
  const weights = (a: Agent[]) => a.flatMap((x) => x.model.trainableVariables().map((v) => Array.from(v.dataSync())));
  const env = new ScriptedEnv([0.2]);
  const epochOne = { ...fast, num_turns: 1, rollout_buffer_size: 4, update_epochs: 1, agent_learning_rate: 1e-2, critic_learning_rate: 1e-2 } as const;

  it('update_epochs = 1: ρ is exactly 1 and clipped, unclipped and ratio-free updates give identical weights', async () => {
    const results: number[][][] = [];
    for (const variant of [{ ratio_clip_range: 0.2 }, { ratio_clip_range: null }, { use_importance_ratio: false }]) {
      const s = await freshSetup();
      const trainer = new CoLLMCCTrainer({ agents: s.agents, critic: s.critic, env: new ScriptedEnv([0.1]), trainTasks: toyTasks(4, 'r'), config: { ...epochOne, ...variant } });
      await trainer.train({ maxItems: 4 }); // 4 single-turn episodes fill the buffer once: one minibatch per agent
      const m = trainer.lastUpdateMetrics;
      expect([m['turn_1/ratio_mean'], m['turn_1/ratio_min'], m['turn_1/ratio_max'], m['turn_1/clip_fraction']]).toEqual([1, 1, 1, 0]);
      results.push(weights(s.agents));
      trainer.dispose();
      s.dispose();
    }
    expect(results[1]).toEqual(results[0]);
    expect(results[2]).toEqual(results[0]);
  });

  it('update_epochs > 1: the ratio moves, and clipping bounds how far the policy moves on the buffer', async () => {
    const drift: number[] = [];
    for (const clip of [0.2, null]) {
      const s = await freshSetup();
      const trainer = new CoLLMCCTrainer({
        agents: s.agents,
        critic: s.critic,
        env,
        trainTasks: toyTasks(8, 'r'),
        config: { ...epochOne, rollout_buffer_size: 8, update_epochs: 6, agent_learning_rate: 3e-2, ratio_clip_range: clip },
      });
      const trs: JointTransition[] = [];
      for (const task of toyTasks(8, 'r')) trs.push(...(await trainer.rollout(task)));
      const m = await trainer.updateFrom(trs);
      expect(m['turn_1/ratio_max'] - m['turn_1/ratio_min']).toBeGreaterThan(0.01);
      if (clip !== null) expect(m['turn_1/clip_fraction']).toBeGreaterThan(0);
      // How far each actor's log-prob of the buffer's completions moved: max |log ρ| after the update.
      let worst = 0;
      for (let i = 0; i < 2; i++) {
        const now = await behaviourLogProbs(s.agents[i].model, trs.map((t) => t.agents[i].promptIds), trs.map((t) => t.agents[i].completionIds));
        now.forEach((lp, j) => (worst = Math.max(worst, Math.abs(lp - trs[j].agents[i].behaviourLogProb))));
      }
      drift.push(worst);
      trainer.dispose();
      s.dispose();
    }
    console.log(`max |log ρ| after 6 epochs: clip 0.2 → ${drift[0].toFixed(3)}, no clip → ${drift[1].toFixed(3)}`);
    expect(drift[0]).toBeLessThan(drift[1]);
  });
});

describe('the paper-aligned update (docs/differences.md, item 5)', () => {
  const cfg3 = { ...fast, num_turns: 3, discount: 0.5, early_termination_threshold: null, critic_learning_rate: 0 } as const;

  it('targets from the current critic: each update epoch recomputes V(h), V(h′), y and δ (recompute_targets)', async () => {
    for (const recompute of [true, false]) {
      const head = constantHead(critics[2].model.hiddenSize, 0.5);
      const trainer = new CoLLMCCTrainer({
        agents,
        critic: critics[2],
        criticHead: head,
        env: new ScriptedEnv([0.1, 0.2, 0.3]),
        trainTasks: tasks,
        config: { ...cfg3, update_epochs: 2, recompute_targets: recompute },
      });
      const trs = await trainer.rollout(tasks[0]);
      // The critic moves after the rollout (as a previous flush would move it): V ≡ 0.8 now.
      tf.tidy(() => head.trainableVariables()[1].assign(tf.tensor1d([0.8])));
      const calls: number[] = [];
      const predict = trainer.critic.predict.bind(trainer.critic);
      trainer.critic.predict = async (rows, bs) => {
        calls.push(rows.length);
        return predict(rows, bs);
      };
      const m = await trainer.updateFrom(trs);
      if (recompute) {
        // y = [0.1 + 0.5·0.8, 0.2 + 0.5·0.8, 0.3], δ = y − 0.8 = [−0.3, −0.2, −0.5]
        expect(m['turn_1/td_error_mean']).toBeCloseTo(-0.3, 6);
        expect(m['turn_2/td_error_mean']).toBeCloseTo(-0.2, 6);
        expect(m['turn_3/td_error_mean']).toBeCloseTo(-0.5, 6);
        expect(m['turn_1/value_pred_mean']).toBeCloseTo(0.8, 6);
        expect(calls.length).toBe(2); // once per update epoch
      } else {
        // The rollout-time values (0.5): δ = [0.35, 0.45, 0.3] − 0.5.
        expect(m['turn_1/td_error_mean']).toBeCloseTo(-0.15, 6);
        expect(m['turn_3/td_error_mean']).toBeCloseTo(-0.2, 6);
        expect(calls.length).toBe(0);
      }
      trainer.dispose();
    }
  });

  it('value clip on every critic: once the critic has moved past ±c toward its target, its gradient is zero (value_clip_range)', async () => {
    // Single turn, reward 1, two update epochs: the first epoch's step moves V (≈ 0) far toward y = 1,
    // beyond a clip of 1e-6 around its value at the flush's start; in the second epoch the clipped
    // branch of max((y − v)², (y − v_clip)²) is the larger and has no gradient.
    const norms: number[][] = [];
    for (const variant of [{ value_clip_range: 1e-6 }, { value_clip_range: null }, { value_clip_range: 1e-6, value_clip_separate: false }]) {
      const c = { model: await loadCausalLM(join(dir, 'cc')), tokenizer: await loadTokenizer(join(dir, 'cc')) };
      const trainer = new CoLLMCCTrainer({
        agents,
        critic: c,
        env: new ScriptedEnv([1]),
        trainTasks: tasks,
        config: { ...fast, num_turns: 1, update_epochs: 2, agent_learning_rate: 0, critic_learning_rate: 3e-3, ...variant },
      });
      const trs: JointTransition[] = [];
      for (const task of tasks) trs.push(...(await trainer.rollout(task)));
      const seen: number[] = [];
      // The gradient norm of each critic step, read where the optimizer receives it.
      const opt = trainer.criticOptimizer;
      const step = opt.step.bind(opt);
      opt.step = (grads) => {
        const gs = Object.values(grads).filter((g): g is tf.Tensor => g instanceof tf.Tensor);
        seen.push(Math.sqrt(tf.tidy(() => gs.reduce((a, g) => a + tf.sum(tf.square(g)).dataSync()[0], 0))));
        step(grads);
      };
      const ids = trs.map((t) => [...(t.joint?.criticIds ?? [])]);
      const before = await trainer.critic.predict(ids);
      await trainer.updateFrom(trs);
      const after = await trainer.critic.predict(ids);
      expect(Math.min(...after.map((v, j) => v - before[j]))).toBeGreaterThan(1e-3); // moved toward y = 1
      norms.push(seen);
      trainer.dispose();
      c.model.dispose();
    }
    console.log(`critic gradient norm per update epoch: clip 1e-6 → ${norms[0].map((x) => x.toFixed(4))}, no clip → ${norms[1].map((x) => x.toFixed(4))}, comlrl136's shared-head-only clip → ${norms[2].map((x) => x.toFixed(4))}`);
    expect(norms[0][1]).toBe(0);
    expect(norms[1][1]).toBeGreaterThan(0);
    expect(norms[2][1]).toBeGreaterThan(0);
  });

  it('Q advantage: against the turn group\'s mean Q it keeps the signal that the TD error loses once Q fits (q_advantage)', () => {
    // One state, two actions with rewards 1 and 0 (last turn: y = r), Q fitted exactly: Q = [1, 0].
    const trs = [1, 0].map((reward) => ({ turn: 0, reward }) as unknown as JointTransition);
    const q = [1, 0];
    const targets = bootstrapTargets(trs, [null, null], 0.9);
    expect(targets).toEqual([1, 0]);
    const td = estimates(trs, q, targets, { normalize: false, qBaseline: false });
    expect(td.advantages).toEqual([0, 0]); // δ = r − Q = 0: no gradient at all
    const base = estimates(trs, q, targets, { normalize: false, qBaseline: true });
    expect(base.advantages).toEqual([0.5, -0.5]); // Q − mean Q: the better action is pushed up
    expect(estimates(trs, q, targets, { normalize: true, qBaseline: true }).advantages).toEqual([1, -1]);
  });

  it('a snapshot whose buffer holds transitions of the old layout is refused with a clear message', async () => {
    const trainer = new CoLLMCCTrainer({ agents, critic: critics[2], env: new ScriptedEnv([0.1, 0.2]), trainTasks: tasks, config: { ...fast, num_turns: 2, rollout_buffer_size: 3 } });
    await trainer.train({ maxItems: 2 });
    const state = structuredClone(trainer.exportState());
    expect(state.extra.buffer.length).toBeGreaterThan(0);
    const { transitionFormat: _, ...old } = state.extra;
    expect(() => trainer.importState({ ...state, extra: old })).toThrow(/older layout \(format 1, this version needs 2/);
    // An old snapshot taken at a flush (empty buffer) still resumes.
    expect(() => trainer.importState({ ...state, extra: { ...old, buffer: [] } })).not.toThrow();
    trainer.dispose();
  });
});

describe('errors', () => {
  it("constructor rules (CoMLRL's wording where it has one)", () => {
    const env = new ScriptedEnv([0, 0]);
    const base = { agents, env, trainTasks: tasks };
    expect(() => new CoLLMDCTrainer({ ...base })).toThrow(/critics must be provided/);
    expect(() => new CoLLMDCTrainer({ ...base, critics: [critics[0]] })).toThrow(/critics length 1/);
    expect(() => new CoLLMDCTrainer({ ...base, critics: [critics[0], critics[0]] })).toThrow(/share one model/);
    expect(() => new CoLLMDCTrainer({ ...base, critics: [critics[0], critics[1]], config: { use_separate_critic: false } })).toThrow(/use_separate_critic is false/);
    expect(() => new CoLLMCCTrainer({ ...base, critic: undefined as unknown as CriticLM })).toThrow(/critic must be provided/);
    expect(() => new CoLLMCCTrainer({ ...base, critic: { model: agents[0].model, tokenizer: agents[0].tokenizer } })).toThrow(/actor's model/);
    expect(() => new CoLLMCCTrainer({ ...base, critic: critics[2], config: { num_turns: 3 } })).toThrow(/num_turns 3 exceeds env 'scripted' horizon 2/);
  });

  it('non-finite rewards and advantages raise clear errors', async () => {
    const trainer = new CoLLMCCTrainer({ agents, critic: critics[2], env: new ScriptedEnv([Number.NaN]), trainTasks: tasks, config: { ...fast, num_turns: 1 } });
    await expect(trainer.rollout(tasks[0])).rejects.toThrow(/non-finite reward \(NaN\) at turn 1/);
    trainer.dispose();
    const opt = { maxGradNorm: null, chunkSize: null, label: 'agent 0' };
    const { AdamW } = await import('../src/optim/adamw.js');
    const adam = new AdamW(agents[0].model.trainableVariables());
    expect(() =>
      actorStep(agents[0].model, adam, [{ promptIds: [1], completionIds: [2], advantage: Number.POSITIVE_INFINITY, oldLogProb: null, weight: 1 }], { useRatio: true, clipRange: 0.2 }, opt),
    ).toThrow(/agent 0: non-finite advantage/);
    adam.dispose();
  });
});

describe('single-turn with K samples, saving and exact resume', () => {
  it('num_generations K gives K joint transitions per item (env_step += K), Q critic per joint action', async () => {
    const trainer = new CoLLMDCTrainer({
      agents,
      critics: [critics[0], critics[1]],
      env: new ScriptedEnv([0.3]),
      trainTasks: tasks,
      config: { ...fast, num_turns: 1, num_generations: 3, critic_type: 'q', rollout_buffer_size: 6 },
      rolloutMetrics: (trs) => ({ transitions: trs.length, reward: trs[0].reward }),
    });
    const trs = await trainer.rollout(tasks[0]);
    expect(trs.map((t) => t.generation)).toEqual([0, 1, 2]);
    // Q input: the observation followed by the agent's own completion.
    for (const t of trs) expect(t.agents[0].criticIds.length).toBeGreaterThan(critics[0].tokenizer.encode('cue red').length);
    await trainer.train({ maxItems: 2 });
    expect(trainer.envSteps).toBe(6);
    expect(trainer.bufferedTransitions).toBe(0); // 6 transitions: one flush
    expect(trainer.lastUpdateMetrics).toMatchObject({ 'rollout/transitions': 6, 'rollout/reward': 0.3, 'turn_1/transitions': 6 });
    trainer.dispose();
  });

  it('save writes agents, critics and heads; export → import resumes exactly', async () => {
    const out = join(dir, 'saved');
    const cfg = { ...fast, num_turns: 2, early_termination_threshold: null, rollout_buffer_size: 3, update_epochs: 2, agent_learning_rate: 1e-2, critic_learning_rate: 1e-2 } as const;
    const env = new ScriptedEnv([0.1, 0.4]);
    const load = async (d: string) => ({ model: await loadCausalLM(d), tokenizer: await loadTokenizer(d) });
    const startAgents = async (): Promise<Agent[]> => [
      { name: 'a0', chat: false, ...(await load(join(dir, 'a0'))) },
      { name: 'a1', chat: false, ...(await load(join(dir, 'a1'))) },
    ];

    // Uninterrupted: 4 items.
    const refAgents = await startAgents();
    const refCritic = await load(join(dir, 'cc'));
    const ref = new CoLLMCCTrainer({ agents: refAgents, critic: refCritic, env, trainTasks: tasks, config: cfg });
    await ref.train({ maxItems: 4 });

    // Interrupted after 2 items (a transition is left in the buffer), saved, reloaded, resumed.
    const firstAgents = await startAgents();
    const firstCritic = await load(join(dir, 'cc'));
    const first = new CoLLMCCTrainer({ agents: firstAgents, critic: firstCritic, env, trainTasks: tasks, config: cfg });
    await first.train({ maxItems: 2 });
    expect(first.bufferedTransitions).toBe(1);
    await first.save(out);
    const state = structuredClone(first.exportState());
    expect(JSON.parse(JSON.stringify(state.extra))).toEqual(state.extra); // the buffer part is plain JSON
    for (const f of ['agent_0/config.json', 'agent_1/tokenizer.json', 'critic/config.json', 'critic/value_head.safetensors', 'critic/value_head.json']) {
      expect(fs.existsSync(join(out, f))).toBe(true);
    }
    const resumedAgents: Agent[] = [
      { name: 'a0', chat: false, ...(await load(join(out, 'agent_0'))) },
      { name: 'a1', chat: false, ...(await load(join(out, 'agent_1'))) },
    ];
    const resumedCritic = await load(join(out, 'critic'));
    const resumed = new CoLLMCCTrainer({
      agents: resumedAgents,
      critic: resumedCritic,
      criticHead: await loadCriticHead(join(out, 'critic'), rngFor(0, 'unused')),
      env,
      trainTasks: tasks,
      config: cfg,
    });
    resumed.importState(state);
    await resumed.train({ maxItems: 2 });

    expect(resumed.envSteps).toBe(ref.envSteps);
    expect(resumed.lastUpdateMetrics).toEqual(ref.lastUpdateMetrics);
    const w = (a: Agent[]) => a.flatMap((x) => x.model.trainableVariables().map((v) => Array.from(v.dataSync())));
    expect(w(resumedAgents)).toEqual(w(refAgents));
    expect(Array.from(resumed.critic.head.trainableVariables()[0].dataSync())).toEqual(Array.from(ref.critic.head.trainableVariables()[0].dataSync()));

    // CoLLM-DC save layout: agent_i/critic/ with the head; shared heads beside the actor.
    const dcOut = join(dir, 'saved-dc');
    const dc = new CoLLMDCTrainer({ agents, critics: [critics[0], critics[1]], env, trainTasks: tasks, config: { ...fast, num_turns: 2 } });
    await dc.save(dcOut);
    expect(fs.existsSync(join(dcOut, 'agent_1/critic/value_head.safetensors'))).toBe(true);
    expect(fs.existsSync(join(dcOut, 'agent_1/critic/config.json'))).toBe(true);
    const shared = new CoLLMDCTrainer({ agents, env, trainTasks: tasks, config: { ...fast, num_turns: 2, use_separate_critic: false } });
    await shared.save(join(dir, 'saved-shared'));
    expect(fs.existsSync(join(dir, 'saved-shared/agent_0/value_head.json'))).toBe(true);
    expect(() => shared.importState(dc.exportState() as never)).toThrow(/optimizer states/);

    for (const t of [ref, first, resumed, dc, shared]) t.dispose();
    disposeAgents([...refAgents, ...firstAgents, ...resumedAgents]);
    for (const c of [refCritic, firstCritic, resumedCritic]) c.model.dispose();
  });
});
