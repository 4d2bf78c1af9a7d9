/**
 * CoLLM-CC — multi-agent actor-critic with a centralized critic (CoLLM paper, Algorithm 1;
 * CoMLRL 1.3.6's MAAC). {@link CoLLMTrainer} runs the algorithm; this file says what the one
 * critic V(h_t) (or Q(h_t, a_t)) is: its own LM, tokenizer and AdamW, reading the joint history —
 * every agent's earlier observations and actions and its current observation (config
 * `critic_history`), m_t and for Q the joint action — in the text layout of src/critic/inputs.ts.
 * Every agent trains on its advantage; it steps once per joint minibatch, after the actors, with
 * value clipping when `value_clip_separate`; saved to `critic/` beside the agents.
 *
 * Differences from CoMLRL 1.3.6 (docs/differences.md): the critic is updated once per joint minibatch, not once
 * per agent buffer (CoMLRL steps it N times on duplicated inputs); it encodes its input with its
 * own tokenizer (CoMLRL: agent 0's).
 */
import type { JointTransition } from '../../src/buffer/replay.js';
import { createCriticHead, headSpecFromHiddenDim, saveCriticHead, type CriticHead } from '../../src/critic/heads.js';
import { centralizedCriticIds } from '../../src/critic/inputs.js';
import { ValueModel, type CriticLM } from '../../src/critic/value-model.js';
import type { Agent } from '../../src/decpomdp/agent.js';
import type { AdamW } from '../../src/optim/adamw.js';
import type { Rng } from '../../src/util/rng.js';
import { parseCoLLMCCConfig, type ActorCriticConfig, type CoLLMCCConfig, type CoLLMCCConfigInput } from './config.js';
import type { CriticLayout, CriticSet, CriticSlot, CriticView } from './critic-set.js';
import { centralizedCriticLayout } from './layout.js';
import type { CriticPart } from './rollout.js';
import type { ActorCriticInputs, ActorCriticState } from './run.js';
import { CoLLMTrainer } from './trainer.js';

/** One critic of the joint history, whose advantage every agent trains on. */
export class CentralizedCritic implements CriticSet {
  readonly label = 'CoLLM-CC';
  readonly slots: readonly CriticSlot[];

  constructor(
    readonly model: ValueModel,
    private readonly settings: Pick<ActorCriticConfig, 'critic_type' | 'use_global_info' | 'critic_max_length'>,
  ) {
    this.slots = [{ model, owner: null, sharesActor: false }];
  }

  slotOf(): number {
    return 0;
  }

  input(_slot: number, step: CriticView, history: readonly CriticView[]): number[] {
    const { settings } = this;
    return centralizedCriticIds(
      this.model.tokenizer,
      {
        observations: step.observations,
        actions: settings.critic_type === 'q' ? step.actions : null,
        globalInfo: settings.use_global_info ? step.globalInfo : null,
        history: history.map((h) => ({ observations: h.observations, actions: h.actions })),
      },
      settings.critic_max_length,
    );
  }

  partOf(transition: JointTransition): CriticPart {
    if (!transition.joint) throw new Error(`CoLLM-CC: transition of episode ${transition.episode} turn ${transition.turn} has no centralized critic data`);
    return transition.joint;
  }

  /** Every agent's part carries the joint value and target (its own critic inputs are empty). */
  transitionParts(parts: readonly CriticPart[], numAgents: number): { agents: CriticPart[]; joint: CriticPart | null } {
    const [joint] = parts;
    return { agents: Array.from({ length: numAgents }, () => ({ criticIds: [], nextCriticIds: null, value: joint.value, target: joint.target })), joint };
  }

  layout(dir: string): CriticLayout {
    return centralizedCriticLayout(dir);
  }

  async save(dir: string): Promise<string[]> {
    const [cdir] = this.layout(dir).critics;
    await this.model.backbone.save(cdir);
    await this.model.tokenizer.save(cdir);
    await saveCriticHead(this.model.head, cdir);
    return [cdir];
  }
}

/**
 * CoLLM-CC's critic: checks it (exactly one, not an actor's model) and makes its head N(0, 0.02)
 * from `rng`, reading `featureSize` global features beside h (or takes `head`).
 */
export function centralizedCritic(agents: readonly Agent[], config: CoLLMCCConfig, critic: CriticLM | undefined, head: CriticHead | undefined, rng: Rng, featureSize = 0): CentralizedCritic {
  // CoMLRL: exactly one centralized critic is required.
  if (!critic) throw new Error('CoLLMCCTrainer: critic must be provided (exactly one centralized critic LM)');
  if (Array.isArray(critic)) throw new Error(`CoLLMCCTrainer: critics length ${(critic as unknown[]).length}: CoLLM-CC takes exactly one critic`);
  if (agents.some((a) => a.model === critic.model)) throw new Error("CoLLMCCTrainer: the critic is an actor's model; give the critic its own LM");
  const base = headSpecFromHiddenDim(config.critic_value_head_hidden_dim);
  const spec = config.critic_head ? { ...base, type: config.critic_head } : base;
  return new CentralizedCritic(new ValueModel(critic.model, head ?? createCriticHead(critic.model.hiddenSize, spec, rng, featureSize), critic.tokenizer, false), config);
}

/** Constructor arguments of {@link CoLLMCCTrainer}. */
export interface CoLLMCCTrainerOptions<T, S> extends ActorCriticInputs<T, S> {
  /** The centralized critic's LM and tokenizer (required; not an actor's model). */
  critic: CriticLM;
  /** A value head to use instead of a fresh one (e.g. loaded with `loadCriticHead` to resume). */
  criticHead?: CriticHead;
  /** CoMLRL MAACConfig fields (snake_case) plus comlrl's extras; see collm/config.ts. */
  config?: CoLLMCCConfigInput;
}

/** A CoLLM-CC trainer snapshot. */
export type CoLLMCCTrainerState = ActorCriticState;

/**
 * Trains n agents with CoLLM-CC on an LLM Dec-POMDP: {@link CoLLMTrainer} with one centralized critic.
 *
 * ```ts
 * const trainer = new CoLLMCCTrainer({ agents, critic, env, trainTasks, evalTasks, config: { num_turns: 2 } });
 * await trainer.train();
 * await trainer.save('out');
 * ```
 */
export class CoLLMCCTrainer<T, S> extends CoLLMTrainer<T, S, CoLLMCCConfig> {
  constructor(options: CoLLMCCTrainerOptions<T, S>) {
    super({ className: 'CoLLMCCTrainer', label: 'CoLLM-CC', stateTag: 'collm-cc' }, parseCoLLMCCConfig(options.config ?? {}), options, (agents, config, rng, featureSize) =>
      centralizedCritic(agents, config, options.critic, options.criticHead, rng, featureSize),
    );
  }

  /** The centralized critic (its own LM + head + tokenizer). */
  get critic(): ValueModel {
    return this.criticSet.slots[0].model;
  }

  /** The critic's AdamW. */
  get criticOptimizer(): AdamW {
    return this.criticOptimizers[0];
  }
}
