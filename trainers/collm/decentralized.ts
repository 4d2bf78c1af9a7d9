/**
 * CoLLM-DC — multi-agent actor-critic with decentralized critics (CoLLM paper, Algorithm 1 with
 * per-agent critics; CoMLRL 1.3.6's IAC). {@link CoLLMTrainer} runs the algorithm; this file says
 * what agent i's critic V_i (or Q_i) is: it reads only agent i's history h_{i,t} (config
 * `critic_history`) and m_t, and gives agent i's advantage. Two kinds:
 *
 * - a separate critic LM with a value head per agent (`use_separate_critic: true`, the default),
 *   reading the observation text with its own tokenizer, stepping its own AdamW, value clipping
 *   when `value_clip_separate`; saved to `agent_i/critic/` (LM, tokenizer, `value_head.*`);
 * - a value head on agent i's own backbone (`use_separate_critic: false`), reading the actor's
 *   prompt (and completion) ids; its loss is added to the actor's for one joint step (CoMLRL),
 *   always value-clipped; saved as `agent_i/value_head.*` (CoMLRL's layout).
 *
 * With `comlrl136()` the trainer is CoMLRL 1.3.6's IAC update.
 */
import type { JointTransition } from '../../src/buffer/replay.js';
import { createCriticHead, headSpecFromHiddenDim, saveCriticHead, type CriticHead } from '../../src/critic/heads.js';
import { decentralizedCriticIds, globalInfoPrefixIds, sharedHeadIds } from '../../src/critic/inputs.js';
import { ValueModel, type CriticLM } from '../../src/critic/value-model.js';
import type { Agent } from '../../src/decpomdp/agent.js';
import type { Rng } from '../../src/util/rng.js';
import { parseCoLLMDCConfig, type ActorCriticConfig, type CoLLMDCConfig, type CoLLMDCConfigInput } from './config.js';
import type { CriticLayout, CriticSet, CriticSlot, CriticView } from './critic-set.js';
import { separateCriticsLayout, sharedHeadsLayout } from './layout.js';
import type { CriticPart } from './rollout.js';
import type { ActorCriticInputs, ActorCriticState } from './run.js';
import { CoLLMTrainer } from './trainer.js';

/** What a critic's input depends on in the config. */
type InputSettings = Pick<ActorCriticConfig, 'critic_type' | 'use_global_info' | 'critic_max_length'>;

/** Per-agent critics: slot i belongs to agent i, gives its advantage and sits in its transition part. */
abstract class PerAgentCritics implements CriticSet {
  readonly label = 'CoLLM-DC';
  readonly slots: readonly CriticSlot[];

  constructor(
    readonly models: readonly ValueModel[],
    protected readonly settings: InputSettings,
  ) {
    this.slots = models.map((model, i) => ({ model, owner: i, sharesActor: model.sharesBackbone }));
  }

  slotOf(agent: number): number {
    return agent;
  }

  abstract input(slot: number, step: CriticView, history: readonly CriticView[]): number[];

  partOf(transition: JointTransition, slot: number): CriticPart {
    return transition.agents[slot];
  }

  transitionParts(parts: readonly CriticPart[]): { agents: CriticPart[]; joint: CriticPart | null } {
    return { agents: [...parts], joint: null };
  }

  abstract layout(dir: string): CriticLayout;
  abstract save(dir: string): Promise<string[]>;
}

/** A separate critic LM + value head per agent, reading agent i's observation text. */
export class SeparateCritics extends PerAgentCritics {
  input(slot: number, step: CriticView, history: readonly CriticView[]): number[] {
    const { settings } = this;
    return decentralizedCriticIds(
      this.models[slot].tokenizer,
      {
        prompt: step.observations[slot],
        action: settings.critic_type === 'q' ? step.actions[slot] : null,
        globalInfo: settings.use_global_info ? step.globalInfo : null,
        history: history.map((h) => ({ observation: h.observations[slot], action: h.actions[slot] })),
      },
      settings.critic_max_length,
    );
  }

  layout(dir: string): CriticLayout {
    return separateCriticsLayout(dir, this.models.length);
  }

  async save(dir: string): Promise<string[]> {
    const { critics } = this.layout(dir);
    for (let i = 0; i < this.models.length; i++) {
      const critic = this.models[i];
      await critic.backbone.save(critics[i]);
      await critic.tokenizer.save(critics[i]);
      await saveCriticHead(critic.head, critics[i]);
    }
    return [];
  }
}

/** A value head on each actor's backbone, reading the actor's own prompt (and completion) ids. */
export class SharedHeadCritics extends PerAgentCritics {
  input(slot: number, step: CriticView, history: readonly CriticView[]): number[] {
    const { settings } = this;
    return sharedHeadIds(
      step.promptIds(slot),
      settings.critic_type === 'q' ? step.actionIds[slot] : null,
      settings.critic_max_length,
      settings.use_global_info ? globalInfoPrefixIds(this.models[slot].tokenizer, step.globalInfo) : null,
      history.map((h) => ({ promptIds: h.promptIds(slot), completionIds: h.actionIds[slot] })),
    );
  }

  layout(dir: string): CriticLayout {
    return sharedHeadsLayout(dir, this.models.length);
  }

  async save(dir: string): Promise<string[]> {
    const { heads } = this.layout(dir);
    for (let i = 0; i < this.models.length; i++) await saveCriticHead(this.models[i].head, heads[i]);
    return [];
  }
}

/**
 * CoLLM-DC's critics from its config and inputs: checks them (CoMLRL's rules, its wording where it
 * has one) and makes each head N(0, 0.02) from `rng`, agent by agent, reading `featureSize`
 * global features beside h (or takes `heads`).
 */
export function decentralizedCritics(
  agents: readonly Agent[],
  config: CoLLMDCConfig,
  options: { critics?: readonly CriticLM[]; criticHeads?: readonly CriticHead[] },
  rng: Rng,
  featureSize = 0,
): SeparateCritics | SharedHeadCritics {
  const n = agents.length;
  const { critics, criticHeads } = options;
  if (config.use_separate_critic) {
    if (!critics || critics.length === 0) throw new Error('CoLLMDCTrainer: critics must be provided when use_separate_critic is true (one critic LM per agent)');
    if (critics.length !== n) throw new Error(`CoLLMDCTrainer: critics length ${critics.length} does not match the ${n} agents`);
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < i; j++) {
        if (critics[i].model === critics[j].model) throw new Error(`CoLLMDCTrainer: critics ${j} and ${i} share one model object; give each agent its own critic copy`);
      }
      if (agents.some((a) => a.model === critics[i].model)) {
        throw new Error(`CoLLMDCTrainer: critic ${i} is an actor's model; use use_separate_critic: false for a head on the actor's backbone`);
      }
    }
  } else if (critics && critics.length > 0) {
    throw new Error('CoLLMDCTrainer: critics were given but use_separate_critic is false (a shared head lives on each actor; drop critics or set use_separate_critic: true)');
  }
  if (criticHeads && criticHeads.length !== n) {
    throw new Error(`CoLLMDCTrainer: criticHeads length ${criticHeads.length} does not match the ${n} agents`);
  }
  const hiddenDim = config.use_separate_critic ? config.critic_value_head_hidden_dim : config.value_head_hidden_dim;
  const spec = config.critic_head ? { ...headSpecFromHiddenDim(hiddenDim), type: config.critic_head } : headSpecFromHiddenDim(hiddenDim);
  const models = agents.map((agent, i) => {
    const lm = config.use_separate_critic ? (critics as readonly CriticLM[])[i] : agent;
    const head = criticHeads?.[i] ?? createCriticHead(lm.model.hiddenSize, spec, rng, featureSize);
    return new ValueModel(lm.model, head, lm.tokenizer, !config.use_separate_critic);
  });
  return config.use_separate_critic ? new SeparateCritics(models, config) : new SharedHeadCritics(models, config);
}

/** Constructor arguments of {@link CoLLMDCTrainer}. */
export interface CoLLMDCTrainerOptions<T, S> extends ActorCriticInputs<T, S> {
  /**
   * One separate critic LM per agent (required with `use_separate_critic: true`, the default;
   * an error with a shared head). Separate model objects: critics do not share weights.
   */
  critics?: readonly CriticLM[];
  /**
   * Value heads to use instead of fresh ones (e.g. loaded with `loadCriticHead` to resume), one per
   * agent; their input size must match the critic (or actor, for shared heads) hidden size.
   */
  criticHeads?: readonly CriticHead[];
  /** CoMLRL IACConfig fields (snake_case) plus comlrl's extras; see collm/config.ts. */
  config?: CoLLMDCConfigInput;
}

/** A CoLLM-DC trainer snapshot. */
export type CoLLMDCTrainerState = ActorCriticState;

/**
 * Trains n agents with CoLLM-DC on an LLM Dec-POMDP: {@link CoLLMTrainer} with per-agent critics.
 *
 * ```ts
 * const trainer = new CoLLMDCTrainer({ agents, critics, env, trainTasks, evalTasks, config: { num_turns: 2 } });
 * await trainer.train();
 * await trainer.save('out');
 * ```
 */
export class CoLLMDCTrainer<T, S> extends CoLLMTrainer<T, S, CoLLMDCConfig> {
  constructor(options: CoLLMDCTrainerOptions<T, S>) {
    super({ className: 'CoLLMDCTrainer', label: 'CoLLM-DC', stateTag: 'collm-dc' }, parseCoLLMDCConfig(options.config ?? {}), options, (agents, config, rng, featureSize) =>
      decentralizedCritics(agents, config, options, rng, featureSize),
    );
  }

  /** Agent i's critic: a separate LM + head, or a head on agent i's backbone. */
  get critics(): readonly ValueModel[] {
    return this.criticSet.slots.map((s) => s.model);
  }
}
