/**
 * `npm run bench -- critic-fit`: the paper bench's gate. Can CoLLM-CC's critic learn the value of
 * the histories its training run shows it, within that run's critic updates? Each fit
 * (bench/critic-fit.ts) trains the pretrained critic with a fresh value head on on-policy episodes
 * of the run's actors, with the run's own update schedule (the CoLLM-CC arm's config: flushes,
 * minibatches, update epochs, learning rate, value_loss_coef, value clip), and measures on
 * held-out histories of the same actors the explained variance within turns, over the turns
 * t ≥ 1 (bench/turn-ev.ts: a per-turn constant scores 0, so the turn index earns nothing).
 *
 * The gate fits every variant for {@link GateBudget.seeds} seeds (actors, value head, sampling,
 * minibatch order) × {@link GateBudget.inits} critic initialisations (the pretrained checkpoint's
 * init seed before pretraining: the weights a vocabulary order also moves). A critic input passes a
 * variant when the mean of its seeds × inits figures, less two standard errors, is ≥ {@link GATE_EV};
 * it passes the gate when it passes every gated variant: one whose held-out values vary within turns
 * well beyond their sampling noise ({@link CEILING_FLOOR}). The gate passes when one input does. Printed beside each figure: a per-turn constant
 * (each turn's mean training return: 0 by construction here, and what the old pooled EV gave it),
 * the ceiling, and what the best line through m_t's score explains.
 *
 * The gate fits each critic input a CC arm of the bench gives its critic ({@link GATE_ARMS}): the
 * paper's text critic (history and m_t as text) and the one that also reads m_t as numbers
 * (`critic_global_features`). Each has its own verdict; the λ-returns arms read the same inputs, and
 * the gate's Monte-Carlo targets are λ = 1, so their critics' gate is their input's.
 *
 * The bench's vocabulary order ($COMLRL_CRITIC_VOCAB_ORDER, bench/paper-runs.ts) changes every
 * word's initial weights; the gate's verdict must not move with it.
 */
import type { CriticLM } from '../src/critic/value-model.js';
import { HiddenCueRelayEnv } from '../envs/hidden-cue/relay.js';
import { parseCoLLMCCConfig } from '../trainers/collm/config.js';
import { fitOnPolicy, onPolicyData, type CriticFitResult, type GateTarget, type OnPolicyBudget } from './critic-fit.js';
import { ACTOR_SAMPLING, actorCriticConfig, PAPER_ARMS, paperActors, trainTasks, type PaperArm, type PaperVariant } from './paper-runs.js';
import { spreadOf, type Spread } from './turn-ev.js';

/** The mean − 2·SE bar of a variant's gate figure. */
export const GATE_EV = 0.5;

/** The gate's budget. */
export interface GateBudget {
  /** Run seeds (1, 2, 3: the bench's first seeds). */
  readonly seeds: readonly number[];
  /** Init seeds of the pretrained critic (0: the checkpoint the bench's runs use). */
  readonly inits: readonly number[];
  /** Held-out episodes per seed (every turn a row). */
  readonly heldOutEpisodes: number;
  /** Continuations per held-out history for its value. */
  readonly continuations: number;
  /** What the critic regresses on. */
  readonly target: GateTarget;
}

/** The full gate's budget: 3 seeds × 2 inits, 64 held-out episodes with 16 continuations each. */
export const GATE_FULL: GateBudget = { seeds: [1, 2, 3], inits: [0, 1], heldOutEpisodes: 64, continuations: 16, target: 'mc' };
/** `--quick`: the same seeds × inits, few held-out rows (for checking the plumbing; its figures mean little). */
export const GATE_QUICK: GateBudget = { seeds: [1, 2, 3], inits: [0, 1], heldOutEpisodes: 8, continuations: 4, target: 'mc' };

const armOf = (id: string): PaperArm => {
  const arm = PAPER_ARMS.find((a) => a.id === id);
  if (!arm) throw new Error(`critic-fit gate: no arm '${id}'`);
  return arm;
};

/** The arms whose critics the gate fits, one per critic input: the text critic (the paper's) and the one that also reads numeric m_t. */
export const GATE_ARMS: readonly PaperArm[] = [armOf('cc-pre'), armOf('cc-pre-mt')];

/** The gate arm whose critic input `arm` gives its critic, or null where the gate does not speak for it (MAGRPO, DC, the controls, the random-init critic). */
export function gateArmFor(arm: PaperArm): string | null {
  if (arm.method !== 'collm-cc' || arm.critic !== 'pretrained' || arm.control !== undefined) return null;
  return arm.features === true ? 'cc-pre-mt' : 'cc-pre';
}

/** One fit: a critic input (its gate arm), a variant, a critic init, a run seed. */
export interface GateRow {
  /** The gate arm ({@link GATE_ARMS}) whose config the critic was fitted with; a row without one is the text critic's ('cc-pre'). */
  readonly arm?: string;
  readonly variant: string;
  readonly init: number;
  readonly seed: number;
  readonly result: CriticFitResult;
}

/** A pretrained critic of one init. */
export interface GateCritic {
  readonly init: number;
  /** Loads a fresh copy of the pretrained critic: a fit trains the LM it is given in place, so every fit gets its own. */
  load(): Promise<CriticLM>;
}

/** A row's gate arm. */
export const gateArmOf = (r: GateRow): string => r.arm ?? 'cc-pre';

/**
 * Every gate arm's and init's fit on one variant and seed: the seed's actors play the histories
 * once, then each critic fits them with its arm's config. `epochs` = the run's epochs (flushes);
 * `scratch` holds the actors' checkpoints; `arms` = the gate arms to fit (ids of {@link GATE_ARMS}).
 */
export async function gateFits(
  variant: PaperVariant,
  seed: number,
  epochs: number,
  critics: readonly GateCritic[],
  budget: Pick<GateBudget, 'heldOutEpisodes' | 'continuations' | 'target'>,
  scratch: string,
  arms: readonly string[] = GATE_ARMS.map((a) => a.id),
): Promise<GateRow[]> {
  const h = variant.horizon;
  const configs = arms.map((id) => {
    if (!GATE_ARMS.some((a) => a.id === id)) throw new Error(`critic-fit gate: '${id}' is not a gate arm (${GATE_ARMS.map((a) => a.id).join(', ')})`);
    return { arm: id, config: parseCoLLMCCConfig(actorCriticConfig(armOf(id), h, seed, epochs)) };
  });
  const discount = configs[0]?.config.discount ?? 1;
  const agents = await paperActors(scratch, `gate-${variant.payment}${h}-s${seed}`, seed);
  try {
    const env = new HiddenCueRelayEnv({ numTurns: h, payment: variant.payment });
    const plan: OnPolicyBudget = { flushes: epochs, heldOutEpisodes: budget.heldOutEpisodes, continuations: budget.continuations };
    const data = await onPolicyData(env, agents, trainTasks(h), plan, ACTOR_SAMPLING, discount, seed);
    const rows: GateRow[] = [];
    for (const { arm, config } of configs) {
      for (const c of critics) {
        const lm = await c.load();
        try {
          rows.push({ arm, variant: variant.name, init: c.init, seed, result: await fitOnPolicy(lm, agents, data, { config, target: budget.target }) });
        } finally {
          lm.model.dispose();
        }
      }
    }
    return rows;
  } finally {
    for (const a of agents) a.model.dispose();
  }
}

/** The last gate figure of a fit. */
export const finalGateEV = (r: GateRow): number => r.result.gateEV[r.result.gateEV.length - 1];

/**
 * A variant is gated only where its held-out values vary within turns beyond their sampling noise:
 * mean ceiling ≥ this. Where they do not (the dense relay under the init actors: past turns are
 * paid already and the actors barely react to the history, so every history of a turn has nearly
 * one value), the within-turn figure divides by noise and says nothing about the critic.
 */
export const CEILING_FLOOR = 0.5;

/** One critic input's verdict on one variant. */
export interface VariantVerdict {
  /** The gate arm (critic input). */
  readonly arm: string;
  readonly variant: string;
  /** The final gate figures over seeds × inits. */
  readonly spread: Spread;
  /** Per init, over seeds. */
  readonly byInit: ReadonlyMap<number, Spread>;
  /** Mean {@link CriticFitResult.ceiling} over the fits. */
  readonly ceiling: number;
  /** Mean {@link CriticFitResult.scoreLine} over the fits. */
  readonly scoreLine: number;
  /** `pass`: mean − 2·SE ≥ {@link GATE_EV}; `fail` otherwise (NaN figures fail); `not gated`: ceiling below {@link CEILING_FLOOR}. */
  readonly verdict: 'pass' | 'fail' | 'not gated';
}

/** The verdict of each gate arm on each variant, arms in {@link GATE_ARMS} order, variants in the order they first appear in `rows`. */
export function gateVerdicts(rows: readonly GateRow[]): VariantVerdict[] {
  const names = [...new Set(rows.map((r) => r.variant))];
  const arms = GATE_ARMS.map((a) => a.id).filter((id) => rows.some((r) => gateArmOf(r) === id));
  return arms.flatMap((arm) => names.flatMap((variant) => {
    const mine = rows.filter((r) => r.variant === variant && gateArmOf(r) === arm);
    if (mine.length === 0) return [];
    const spread = spreadOf(mine.map(finalGateEV));
    const inits = [...new Set(mine.map((r) => r.init))].sort((a, b) => a - b);
    const byInit = new Map(inits.map((i) => [i, spreadOf(mine.filter((r) => r.init === i).map(finalGateEV))]));
    const ceiling = spreadOf(mine.map((r) => r.result.ceiling)).mean;
    const scoreLine = spreadOf(mine.map((r) => r.result.scoreLine)).mean;
    const verdict: VariantVerdict['verdict'] = !(ceiling >= CEILING_FLOOR) ? 'not gated' : spread.mean - 2 * spread.se >= GATE_EV ? 'pass' : 'fail';
    return [{ arm, variant, spread, byInit, ceiling, scoreLine, verdict }];
  }));
}

/** Whether the critic input of gate arm `arm` passes: it passes every variant it is gated on (and one is gated). */
export function gateArmPasses(rows: readonly GateRow[], arm: string): boolean {
  const gated = gateVerdicts(rows).filter((x) => x.arm === arm && x.verdict !== 'not gated');
  return gated.length > 0 && gated.every((x) => x.verdict === 'pass');
}

/** The gate arms whose critic input passes ({@link gateArmPasses}). */
export function passingGateArms(rows: readonly GateRow[]): string[] {
  return GATE_ARMS.map((a) => a.id).filter((id) => gateArmPasses(rows, id));
}

/** Whether the gate passes: some critic input passes every variant it is gated on. */
export function gatePasses(rows: readonly GateRow[]): boolean {
  return passingGateArms(rows).length > 0;
}

/** How the reports name a gate arm's critic input. */
export function inputLabel(arm: string): string {
  return arm === 'cc-pre-mt' ? 'text + numeric m_t' : arm === 'cc-pre' ? 'text' : arm;
}

const f3 = (x: number) => (Number.isNaN(x) ? 'NaN' : x.toFixed(3));

/** What the report's heading states. */
export interface GateReportContext {
  readonly lr: number;
  readonly batch: number;
  readonly target: GateTarget;
  /** The critic vocabulary's order (bench/paper-runs.ts `CRITIC_VOCAB_ORDERS`). */
  readonly vocabOrder: string;
}

/** The gate's report: one line per fit, one per variant's verdict, the gate's verdict last. */
export function gateReport(rows: readonly GateRow[], c: GateReportContext): string[] {
  const out: string[] = [];
  out.push(
    `## Critic-fit gate: does CoLLM-CC's critic learn the value of its run's on-policy histories? (the run's schedule: lr ${c.lr}, minibatches of ${c.batch}; ${c.target === 'mc' ? 'Monte-Carlo return' : 'one-step TD'} targets; vocabulary order ${c.vocabOrder}; figure: held-out explained variance within turns, t ≥ 1; a critic input passes with mean − 2·SE ≥ ${GATE_EV} on every variant whose held-out ceiling is ≥ ${CEILING_FLOOR}; the gate passes when one input does)`,
  );
  out.push('');
  out.push('| critic input | variant | init | seed | steps | gate EV at flushes | per-turn EV, t = 0 … H−1 | pooled EV (old) | per-turn constant: gate EV · pooled EV | ceiling | m_t score, best line | seconds |');
  out.push('|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const x = r.result;
    const at = x.at.map((f, i) => `${f}: ${f3(x.gateEV[i])}`).join(' · ');
    out.push(`| ${inputLabel(gateArmOf(r))} | ${r.variant} | ${r.init} | ${r.seed} | ${x.steps} | ${at} | ${x.perTurnEV.map(f3).join(' ')} | ${f3(x.pooledEV)} | ${f3(x.baseline.gateEV)} · ${f3(x.baseline.pooledEV)} | ${f3(x.ceiling)} | ${f3(x.scoreLine)} | ${x.seconds.toFixed(0)} |`);
  }
  out.push('');
  out.push('| critic input | variant | gate EV, mean ± SE [min, max] over seeds × inits | per init: mean [min, max] | mean − 2·SE | ceiling | m_t score, best line | verdict |');
  out.push('|---|---|---|---|---|---|---|---|');
  for (const v of gateVerdicts(rows)) {
    const s = v.spread;
    const inits = [...v.byInit].map(([i, b]) => `init ${i}: ${f3(b.mean)} [${f3(b.min)}, ${f3(b.max)}]`).join(' · ');
    out.push(`| ${inputLabel(v.arm)} | ${v.variant} | ${f3(s.mean)} ± ${f3(s.se)} [${f3(s.min)}, ${f3(s.max)}] (n = ${s.n}) | ${inits} | ${f3(s.mean - 2 * s.se)} | ${f3(v.ceiling)} | ${f3(v.scoreLine)} | ${v.verdict} |`);
  }
  out.push('');
  for (const arm of GATE_ARMS.filter((a) => rows.some((r) => gateArmOf(r) === a.id))) out.push(`gate, ${inputLabel(arm.id)}: ${gateArmPasses(rows, arm.id) ? 'PASSED' : 'FAILED'}`);
  out.push(`gate: ${gatePasses(rows) ? 'PASSED' : 'FAILED'}`);
  return out;
}
