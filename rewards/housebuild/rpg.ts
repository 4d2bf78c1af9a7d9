/**
 * The HouseBuild "spiders and HP" state (tasks-reference §2.2). It is not a simulation: one state
 * is drawn at start-up for the whole run (`_prepare_rpg_state(cfg, seed)`), written into the
 * prompt, and used by the spider penalty. Attacks come from `random.Random(seed).randint(low,
 * high)`, reproduced with Python's generator so a seed gives the reference's attacks.
 */
import { PythonRandom } from './python-random.js';

/** The run's fixed spider/HP state (the reference's `_rpg_state`). */
export interface RpgState {
  readonly playerHp: number;
  readonly spiderNum: number;
  readonly spiderAtkLow: number;
  readonly spiderAtkHigh: number;
  /** One attack per spider, integers in [spiderAtkLow, spiderAtkHigh]. */
  readonly spiderAtkValues: readonly number[];
  /** Sum of the attacks (a Python float: printed `5.0`). */
  readonly spiderTotalDmg: number;
}

/** The `task.player` / `task.spider` config keys that define the state. */
export interface RpgConfig {
  /** `task.player.hp`; the scripts default to 20 when absent. */
  playerHp?: number;
  /** `task.spider.num`; default 0 (no spiders). */
  spiderNum?: number;
  /** `task.spider.atk_low` (falls back to `atk`, then 0). */
  atkLow?: number;
  /** `task.spider.atk_high` (falls back to `atk`, then `atkLow`). */
  atkHigh?: number;
  /** `task.spider.atk`: a single attack value used for both bounds. */
  atk?: number;
}

/** The paper's configs: 5 HP, 3 spiders with attacks in 1..3. */
export const HOUSEBUILD_PAPER_RPG_CONFIG: Readonly<RpgConfig> = Object.freeze({
  playerHp: 5,
  spiderNum: 3,
  atkLow: 1,
  atkHigh: 3,
});

function asInt(value: number | undefined, fallback: number): number {
  return value === undefined || !Number.isFinite(value) ? fallback : Math.trunc(value);
}

/**
 * Draws the run state from a seed, as `_prepare_rpg_state(cfg, seed)`: attacks are
 * `randint(low, high)` from a fresh `random.Random(seed)`, one per spider, bounds swapped when
 * reversed. The reference configs carry no seed (it comes from `secrets.randbits(32)`), so pass
 * the run's seed explicitly.
 */
export function prepareRpgState(config: RpgConfig, seed: number | bigint): RpgState {
  const playerHp = asInt(config.playerHp, 20);
  const spiderNum = Math.max(0, asInt(config.spiderNum, 0));
  let low = asInt(config.atkLow ?? config.atk, 0);
  let high = asInt(config.atkHigh ?? config.atk, low);
  if (high < low) [low, high] = [high, low];
  const rng = new PythonRandom(seed);
  const values: number[] = [];
  for (let i = 0; i < spiderNum; i++) values.push(rng.randint(low, high));
  let total = 0;
  for (const v of values) total += v;
  return {
    playerHp,
    spiderNum,
    spiderAtkLow: low,
    spiderAtkHigh: high,
    spiderAtkValues: values,
    spiderTotalDmg: total,
  };
}

/**
 * The penalty when no agent kills the spiders: `min(1, dmg/hp) · 0.1` if damage and HP are both
 * positive, else 0. With 5 HP: damage 3 → 0.06, 4 → 0.08, ≥5 → 0.1.
 */
export function spiderPenaltyAmount(state: RpgState | null | undefined): number {
  const hp = state?.playerHp || 0;
  const dmg = state?.spiderTotalDmg || 0;
  if (dmg > 0 && hp > 0) return Math.min(1.0, dmg / hp) * 0.1;
  return 0.0;
}
