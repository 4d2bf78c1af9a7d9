/**
 * Configs of the actor-critic trainers: CoLLM-DC (CoMLRL's `IACConfig`) and CoLLM-CC (CoMLRL's
 * `MAACConfig`). Every CoMLRL 1.3.6 field keeps its snake_case name, default and constraint, so a
 * CoMLRL YAML section or `IACConfig(...)` call maps over 1:1. comlrl adds:
 *
 * - `advantage_normalization` keeps CoMLRL's default (δ z-scored per turn group, as the paper's
 *   runs had it); false gives the raw δ of the paper's equations (docs/differences.md);
 * - paper-aligned options (design.md difference 5; docs/differences.md), on by default where the
 *   CoLLM paper states them: `use_global_info` (every critic reads m_t, DC and CC alike),
 *   `critic_global_features` (off unless set: heads also read m_t as numbers),
 *   `critic_history` (critics read the history h_t, joint for CC, within `critic_max_length`),
 *   `recompute_targets` (each update epoch takes y and δ from the current critic, the paper's
 *   Eq. 5), `value_clip_range` on every critic (how comlrl reads the paper's "advantage clip": its
 *   IAC experiment configs set `value_clip_range`; on CoLLM-CC's critic it is comlrl's choice);
 * - `q_advantage`, comlrl's own design: a Q critic's advantage against a baseline, not the
 *   zero-mean TD error;
 * - the paper's importance ratio ρ = π_θ/π_old (`use_importance_ratio`) with comlrl's PPO-style
 *   clip of it (`ratio_clip_range` — not the paper's advantage clip), and comlrl's `update_epochs`
 *   (passes over one buffer);
 * - `critic_warmup_items`: the first N training items update only the critic(s) (off by default);
 * - run settings shared with MAGRPO: seed, gradient clipping, AdamW settings, greedy eval, scoring
 *   chunk size; plus the critic head kind and a critic input length cap.
 *
 * `comlrl136()` flips them all off: one epoch, no ratio, no m_t, current observations only, stored
 * targets, value clipping only on a shared head, TD-error advantages for Q, which is CoMLRL
 * 1.3.6's update exactly (apart from the deliberate differences of docs/differences.md).
 */
import { z } from 'zod';
import { boolField, criticLrScheduleFields, enumField, finiteNumber, intAtLeast, lrScheduleFields, parseConfig, runSettingsFields } from '../core/config.js';
import { criticDevicesFields, parallelTrainingFields } from '../core/devices.js';
import { referenceKlFields } from '../core/reference-kl.js';
import { CRITIC_TARGETS, type CriticTarget } from '../../src/buffer/targets.js';

/** `v`: V(h) read at the last prompt token; `q`: Q(h, a) read at the last response token. */
export const CRITIC_TYPES = ['v', 'q'] as const;

/** What a critic reads: `full` history h_t (paper) or the `current` observations only (CoMLRL 1.3.6). */
export const CRITIC_HISTORY_MODES = ['full', 'current'] as const;

/**
 * A Q critic's advantage: `baseline` = Q(h, a) − the turn group's mean Q (an action-independent
 * baseline: unbiased, and not zero once Q fits); `td` = r + γQ(h′, a′) − Q(h, a) (CoMLRL 1.3.6,
 * whose expectation is zero once Q fits, so the policy gradient fades). V critics always use δ.
 */
export const Q_ADVANTAGE_MODES = ['baseline', 'td'] as const;

/** How an update orders its actor and critic steps (see `update_order`). */
export const UPDATE_ORDERS = ['joint', 'agent'] as const;

/** Fields both actor-critic configs share (CoMLRL names and 1.3.6 defaults, then comlrl's additions). */
function sharedFields() {
  return {
    // ---- CoMLRL fields common to IACConfig and MAACConfig ----
    /** AdamW learning rate of every actor. */
    agent_learning_rate: finiteNumber('agent_learning_rate', { min: 0 }).default(5e-6),
    /** AdamW learning rate of the critic(s); null → agent_learning_rate. */
    critic_learning_rate: finiteNumber('critic_learning_rate', { min: 0 }).nullable().default(5e-6),
    /** Joint transitions buffered before an update (CoMLRL: samples per agent buffer). */
    rollout_buffer_size: intAtLeast('rollout_buffer_size', 1).default(8),
    /** Transitions per minibatch (one optimizer step each); null → rollout_buffer_size. */
    train_batch_size: intAtLeast('train_batch_size', 1).nullable().default(null),
    /** Weight of the value loss (joint backward) or scale of the critic loss (separate critic). */
    value_loss_coef: finiteNumber('value_loss_coef', { min: 0 }).default(0.6),
    /**
     * true (CoMLRL 1.3.6, whose code produced the paper's numbers — its App. H): z-score the
     * advantages (δ, or Q against its baseline) within each turn group (population std, floor
     * 1e-6; a group of one stays raw). false: the raw δ = y − V that the paper's Eqs. 2 and 4
     * write (a Q critic with `q_advantage: baseline`: Q minus the group's mean).
     */
    advantage_normalization: boolField('advantage_normalization').default(true),
    /** Generation length cap per completion. */
    max_new_tokens: intAtLeast('max_new_tokens', 1).default(256),
    /** Sampling temperature (> 0). */
    temperature: finiteNumber('temperature', { min: 0, exclusiveMin: true }).default(0.6),
    /** Nucleus mass in (0, 1]; 1 turns it off. */
    top_p: finiteNumber('top_p', { min: 0, max: 1, exclusiveMin: true }).default(0.6),
    /**
     * Top-k filter. null (CoMLRL's default None) leaves it to each agent's checkpoint: its
     * generation_config.json `top_k`, else transformers' 50. 0 turns it off.
     */
    top_k: intAtLeast('top_k', 0).nullable().default(null),
    /** Passes over the training tasks. */
    num_train_epochs: intAtLeast('num_train_epochs', 1).default(40),
    /** V(h) or Q(h, a). */
    critic_type: enumField('critic_type', CRITIC_TYPES).default('v'),
    /** Number of agents; must equal the number of agents passed (defaults to it). */
    num_agents: intAtLeast('num_agents', 1).optional(),
    /** Turns per episode H (must not exceed the environment's horizon). */
    num_turns: intAtLeast('num_turns', 1).default(2),
    /**
     * CoMLRL: use the external transition's prompts verbatim. In comlrl prompts come from
     * `env.observe`; the CoMLRL adapter has its own option of this name. Accepted so configs load.
     */
    external_prompt_passthrough: boolField('external_prompt_passthrough').default(false),
    /** γ of the TD target y_t = r_t + γ·V(h_{t+1}). */
    discount: finiteNumber('discount', { min: 0, max: 1 }).default(0.9),
    /** Samples per agent per task; more than 1 only single-turn (see the refinement below). */
    num_generations: intAtLeast('num_generations', 1).default(1),
    /** Evaluate every this many training items (0 disables). */
    eval_interval: intAtLeast('eval_interval', 0).default(16),
    /** Eval tasks per evaluation (the first ones of the eval set). */
    eval_num_samples: intAtLeast('eval_num_samples', 0).default(4),
    /** Eval tasks generated together in one batch. */
    eval_batch_size: intAtLeast('eval_batch_size', 1).default(1),
    /** An episode stops after a turn whose reward is strictly greater than this; null disables. */
    early_termination_threshold: finiteNumber('early_termination_threshold').nullable().default(-0.2),
    /** Train metrics are logged when env_step has advanced by at least this much since the last log. */
    logging_steps: intAtLeast('logging_steps', 1).default(1),

    // ---- paper-aligned options (docs/differences.md) ----
    /** The critic reads m_t (turn, horizon, last reward / max reward), as the paper's critic prompt (DC and CC alike). */
    use_global_info: boolField('use_global_info').default(true),
    /**
     * `full`: the critic reads the history h_t (CC: every agent's past observations and actions;
     * DC: its own agent's), oldest turns dropped first to fit `critic_max_length`; `current`: the
     * current observations only (CoMLRL 1.3.6).
     */
    critic_history: enumField('critic_history', CRITIC_HISTORY_MODES).default('full'),
    /**
     * true: every update epoch recomputes V(h), V(h′), the targets y and δ with the current critic
     * (the paper's Eq. 5); false: the values stored at rollout for every epoch (CoMLRL 1.3.6).
     */
    recompute_targets: boolField('recompute_targets').default(true),
    /** Advantage of a Q critic (see {@link Q_ADVANTAGE_MODES}); ignored for V. */
    q_advantage: enumField('q_advantage', Q_ADVANTAGE_MODES).default('baseline'),
    /**
     * The paper's "advantage clip" (Appendix C: 0.2 TLDR / CoopHE, 0.05 HouseBuild), read as the
     * value clip its IAC experiment configs set as `value_clip_range` (its CoLLM-CC configs set
     * none): the critic's prediction is clipped to within ±c of its value at the flush's start,
     * loss max((y − v)², (y − v_clip)²); null: off.
     */
    value_clip_range: finiteNumber('value_clip_range', { min: 0, exclusiveMin: true }).nullable().default(0.2),
    /**
     * true: every critic head also reads the environment's numeric m_t (`globalFeatures`: the
     * paper's §4.1 m_t "in a numerical representation"), concatenated to the LM's last hidden
     * state before the head's first layer; the env must provide them (refused by name otherwise).
     * Absent or false: heads read the hidden state alone (CoMLRL). Left out of a config's hash
     * when absent (no default is filled in).
     */
    critic_global_features: boolField('critic_global_features').optional(),
    /**
     * Apply `value_clip_range` to separate critics too (the paper: every critic); false: only to a
     * CoLLM-DC shared head (CoMLRL 1.3.6, where separate critics ignore it).
     */
    value_clip_separate: boolField('value_clip_separate').default(true),

    /**
     * The order of the update's steps. Absent or `joint` (comlrl): per joint minibatch every actor
     * steps (with the critic it owns), then a centralized critic once. `agent` (CoMLRL): agent by
     * agent over the whole buffer, each of its minibatches an actor step followed by a critic step
     * — its own critic, or the centralized critic, which so steps once per agent on the same
     * transitions. Left out of a config's hash when absent (no default is filled in).
     */
    update_order: enumField('update_order', UPDATE_ORDERS).optional(),

    // ---- comlrl's critic targets (beyond CoMLRL and the paper) ----
    /**
     * What the critic regresses on and the actor's δ is measured against, over each episode's
     * transitions in a flush. Absent or `td`: the paper's one-step TD target r_t + γ·V(h_{t+1})
     * (Eq. 5, CoMLRL). `mc`: the discounted return to the episode's end; `nstep`: n rewards then
     * γ^n·V(h_{t+n}) (`critic_target_n`); `lambda`: the TD(λ) return (`critic_lambda`), whose
     * advantage is the GAE sum Σ (γλ)^k δ_{t+k}. A return that reaches the end of the flush's part
     * of an episode the buffer cut bootstraps from the critic's value there. Left out of a
     * config's hash when absent.
     */
    critic_target: enumField('critic_target', CRITIC_TARGETS).optional(),
    /** n of `critic_target: nstep` (required there, refused otherwise). */
    critic_target_n: intAtLeast('critic_target_n', 1).optional(),
    /** λ of `critic_target: lambda` in [0, 1] (required there, refused otherwise); 0 is `td`, 1 is `mc`. */
    critic_lambda: finiteNumber('critic_lambda', { min: 0, max: 1 }).optional(),

    // ---- comlrl's data reuse ----
    /** Passes over one buffer (PPO-style epochs); 1 = CoMLRL's single pass. */
    update_epochs: intAtLeast('update_epochs', 1).default(1),
    /**
     * Weight the advantage by ρ = π_θ(a|h)/π_old(a|h) from the stored behaviour log-probs (summed
     * over the completion), as the paper's objective does; ρ ≠ 1 once the actor has stepped since
     * it sampled (an earlier minibatch, turn group or update epoch). false: CoMLRL's −log π·A.
     */
    use_importance_ratio: boolField('use_importance_ratio').default(true),
    /** PPO clip of ρ to [1 − c, 1 + c] (comlrl's guard for reused data; not the paper's advantage clip); null: unclipped. */
    ratio_clip_range: finiteNumber('ratio_clip_range', { min: 0, exclusiveMin: true }).nullable().default(0.2),

    // ---- comlrl training schedule ----
    /**
     * Critic warm-up (as verl's `critic_warmup`): while the first N training items are played,
     * only critic parameters take optimizer steps — the separate critics, the centralized critic,
     * or (shared head) only the value head, never the actor's backbone. The actors keep sampling
     * but do not step. An update counts as warm-up when the newest transition in it comes from one
     * of the first N items (items are counted across epochs like the dataset cursor and restored
     * by `importState`). 0 (default) turns it off: CoMLRL 1.3.6's schedule.
     */
    critic_warmup_items: intAtLeast('critic_warmup_items', 0).default(0),

    // ---- CoMLRL 1.3.8 reference KL (plus comlrl's kl_mode) ----
    ...referenceKlFields(),

    // ---- CoMLRL's parallelism and device keys (only the run's one device is accepted today) ----
    ...parallelTrainingFields(),
    ...criticDevicesFields(),

    // ---- the Hugging Face Trainer's learning-rate schedule (as in MAGRPO), and the critics' own ----
    ...lrScheduleFields(),
    ...criticLrScheduleFields(),

    // ---- comlrl run settings (as in MAGRPO) ----
    ...runSettingsFields(),

    // ---- comlrl critic settings ----
    /** Registered value-head kind for every head; null → by hidden dim (mlp if set, else linear). */
    critic_head: z.string({ error: 'critic_head must be a registered head name (e.g. "linear", "mlp") or null' }).min(1, {
      error: 'critic_head must be a registered head name (e.g. "linear", "mlp") or null',
    }).nullable().default(null),
    /**
     * Critic input budget in tokens; null: no limit. m_t is always kept, the history's oldest turns
     * are dropped first, and what still does not fit is right-truncated (as HF tokenizers).
     */
    critic_max_length: intAtLeast('critic_max_length', 1).nullable().default(null),
  };
}

// CoMLRL: multi-turn actor-critic plays one sample per agent per turn.
function multiTurnNeedsOneGeneration(cfg: { num_turns: number; num_generations: number }, ctx: z.RefinementCtx): void {
  if (cfg.num_turns > 1 && cfg.num_generations !== 1) {
    ctx.addIssue({
      code: 'custom',
      path: ['num_generations'],
      message: `num_generations must be 1 when num_turns > 1 (multi-turn actor-critic samples one completion per agent per turn; got num_generations=${cfg.num_generations}, num_turns=${cfg.num_turns})`,
    });
  }
}

// Value heads on the actors' backbones step with the actors' optimizers, so a critic schedule would be ignored.
function sharedHeadsTakeActorSchedule(
  cfg: { use_separate_critic: boolean; critic_lr_scheduler_type: unknown; critic_lr_warmup_steps: unknown; critic_lr_warmup_ratio: unknown },
  ctx: z.RefinementCtx,
): void {
  if (cfg.use_separate_critic) return;
  for (const key of ['critic_lr_scheduler_type', 'critic_lr_warmup_steps', 'critic_lr_warmup_ratio'] as const) {
    if (cfg[key] === null) continue;
    ctx.addIssue({
      code: 'custom',
      path: [key],
      message: `${key} would be ignored: with use_separate_critic false the value heads step with the actors' optimizers (lr_scheduler_type); remove it`,
    });
  }
}

// Each head width applies to one kind of critic: an MLP width for the other kind would be ignored.
function unusedHeadWidth(cfg: { use_separate_critic: boolean; critic_value_head_hidden_dim: number | null; value_head_hidden_dim: number | null }, ctx: z.RefinementCtx): void {
  const [key, used] = cfg.use_separate_critic ? (['value_head_hidden_dim', 'critic_value_head_hidden_dim'] as const) : (['critic_value_head_hidden_dim', 'value_head_hidden_dim'] as const);
  const width = cfg[key];
  if (width === null || width === 0) return;
  ctx.addIssue({
    code: 'custom',
    path: [key],
    message: `${key} would be ignored: use_separate_critic is ${cfg.use_separate_critic}, so the heads take ${used}; set that instead (got ${key}=${width})`,
  });
}

// Each target parameter belongs to one critic_target, which needs it.
function criticTargetParameters(cfg: { critic_target?: string; critic_target_n?: number; critic_lambda?: number }, ctx: z.RefinementCtx): void {
  const kind = cfg.critic_target ?? 'td';
  for (const [key, owner] of [
    ['critic_target_n', 'nstep'],
    ['critic_lambda', 'lambda'],
  ] as const) {
    const set = cfg[key] !== undefined;
    if (set && kind !== owner) {
      ctx.addIssue({ code: 'custom', path: [key], message: `${key} applies to critic_target: ${owner} only (critic_target is ${kind}); remove it or set critic_target: ${owner}` });
    } else if (!set && kind === owner) {
      const what = owner === 'nstep' ? 'the n of the n-step return, an integer >= 1' : 'the λ of the TD(λ) return, in [0, 1]';
      ctx.addIssue({ code: 'custom', path: [key], message: `critic_target: ${owner} needs ${key} (${what})` });
    }
  }
}

const dcSchema = z
  .strictObject({
    ...sharedFields(),
    // ---- IACConfig-only fields ----
    /** true: a separate critic LM per agent (CoMLRL default); false: a value head on each actor's backbone. */
    use_separate_critic: boolField('use_separate_critic').default(true),
    /** Hidden width of the separate critics' MLP head; null or 0 → linear head (as CoMLRL). */
    critic_value_head_hidden_dim: intAtLeast('critic_value_head_hidden_dim', 0).nullable().default(null),
    /** Hidden width of the shared head's MLP; null or 0 → linear head (as CoMLRL). */
    value_head_hidden_dim: intAtLeast('value_head_hidden_dim', 0).nullable().default(null),
  })
  .superRefine(multiTurnNeedsOneGeneration)
  .superRefine(criticTargetParameters)
  .superRefine(sharedHeadsTakeActorSchedule)
  .superRefine(unusedHeadWidth);

const ccSchema = z
  .strictObject({
    ...sharedFields(),
    /** Hidden width of the centralized critic's MLP head (CoMLRL reads it from model_config); null or 0 → linear. */
    critic_value_head_hidden_dim: intAtLeast('critic_value_head_hidden_dim', 0).nullable().default(null),
  })
  .superRefine(multiTurnNeedsOneGeneration)
  .superRefine(criticTargetParameters);

/** CoLLM-DC config as written by users (every field optional). */
export type CoLLMDCConfigInput = z.input<typeof dcSchema>;
/** CoLLM-DC config after validation and defaults. */
export type CoLLMDCConfig = z.output<typeof dcSchema>;
/** CoLLM-CC config as written by users (every field optional). */
export type CoLLMCCConfigInput = z.input<typeof ccSchema>;
/** CoLLM-CC config after validation and defaults. */
export type CoLLMCCConfig = z.output<typeof ccSchema>;

/** The fields both validated actor-critic configs have (what the shared actor-critic code reads). */
export type ActorCriticConfig = Pick<CoLLMDCConfig, keyof CoLLMDCConfig & keyof CoLLMCCConfig>;

/** Every accepted CoLLM-DC field name. */
export const COLLM_DC_CONFIG_FIELDS: readonly string[] = Object.keys(dcSchema.shape);
/** Every accepted CoLLM-CC field name. */
export const COLLM_CC_CONFIG_FIELDS: readonly string[] = Object.keys(ccSchema.shape);

/** The zod schemas (for CLI/config tooling). */
export const collmDCConfigSchema = dcSchema;
export const collmCCConfigSchema = ccSchema;

/** Validates a CoLLM-DC (IAC) config and fills defaults; throws TrainerConfigError naming each bad field. */
export function parseCoLLMDCConfig(input: CoLLMDCConfigInput | Record<string, unknown> = {}): CoLLMDCConfig {
  return parseConfig('CoLLM-DC', dcSchema, input, COLLM_DC_CONFIG_FIELDS);
}

/** Validates a CoLLM-CC (MAAC) config and fills defaults; throws TrainerConfigError naming each bad field. */
export function parseCoLLMCCConfig(input: CoLLMCCConfigInput | Record<string, unknown> = {}): CoLLMCCConfig {
  return parseConfig('CoLLM-CC', ccSchema, input, COLLM_CC_CONFIG_FIELDS);
}

/**
 * The critic target a validated config asks for (`critic_target` with its parameter; absent:
 * `td`). Throws where the parameter is missing, which parsing already refuses.
 */
export function criticTargetOf(config: Pick<ActorCriticConfig, 'critic_target' | 'critic_target_n' | 'critic_lambda'>): CriticTarget {
  const kind = config.critic_target ?? 'td';
  if (kind === 'nstep') {
    if (config.critic_target_n === undefined) throw new Error('critic_target: nstep needs critic_target_n');
    return { kind, n: config.critic_target_n };
  }
  if (kind === 'lambda') {
    if (config.critic_lambda === undefined) throw new Error('critic_target: lambda needs critic_lambda');
    return { kind, lambda: config.critic_lambda };
  }
  return { kind };
}

/** What {@link comlrl136} sets. */
export interface Comlrl136Settings {
  update_epochs: 1;
  use_importance_ratio: false;
  ratio_clip_range: null;
  use_global_info: false;
  critic_history: 'current';
  recompute_targets: false;
  q_advantage: 'td';
  value_clip_separate: false;
}

/**
 * The settings that make an actor-critic config reproduce CoMLRL 1.3.6's update: a single pass,
 * −log π·A without a ratio, critics that read the current observations without m_t, targets and
 * δ from the values stored at rollout, the TD error as a Q critic's advantage, and value clipping
 * only on a shared head. Spread it into a config input.
 */
export function comlrl136(): Comlrl136Settings {
  return {
    update_epochs: 1,
    use_importance_ratio: false,
    ratio_clip_range: null,
    use_global_info: false,
    critic_history: 'current',
    recompute_targets: false,
    q_advantage: 'td',
    value_clip_separate: false,
  };
}

/** What {@link comlrlCompatible} sets: {@link comlrl136} plus CoMLRL's update order. */
export interface ComlrlCompatibleSettings extends Comlrl136Settings {
  update_order: 'agent';
}

/**
 * The settings that make an actor-critic config reproduce CoMLRL's update step for step (its
 * newest IACTrainer and MAACTrainer, checked by scripts/comlrl-parity.mjs against updates recorded
 * from CoMLRL): {@link comlrl136}'s, and the update agent by agent with a critic step after each
 * actor step (a centralized critic so steps once per agent). Spread it into a config input.
 */
export function comlrlCompatible(): ComlrlCompatibleSettings {
  return { ...comlrl136(), update_order: 'agent' };
}
