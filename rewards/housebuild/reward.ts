/**
 * The HouseBuild reward (LLM_Collab_Minecraft `get_reward_function`, tasks-reference §2.1): each
 * agent's commands are validated separately (own command cap, own resource budget), agent 1's
 * accepted fills are applied before agent 2's on an all-air world, the result is matched cell by
 * cell against the target, and a spider penalty is subtracted when nobody emitted `/kill`.
 */
import { extractCommandLines, hasKill, validateCommands, type RejectedCommand } from './commands.js';
import { spiderPenaltyAmount, type RpgState } from './rpg.js';
import type { HouseBuildTaskSpec } from './task.js';
import { computeResourceLimits, scoreWorld, simulateCommands, type HouseBuildMatchMetrics } from './world.js';
import { pyStrip } from '../../src/util/python-text.js';

/** Task-config options shared by the reward, the prompts and the feedback texts. */
export interface HouseBuildTaskOptions {
  /**
   * `task.limited_resource`: per-agent block budgets `ceil(c/n) + floor(c/2n)`. Default `true`
   * (every shipped config; the reference code's own default is false).
   */
  limitedResource?: boolean;
  /** `task.max_commands`, shared by the agents (agent 1 gets the remainder). Default 600. */
  maxCommands?: number;
  /** `task.block_agent1`: blocks agent 1 may use. Default: the task's inventory blocks. */
  blockAgent1?: readonly string[];
  /** `task.block_agent2`: blocks agent 2 may use. Default: the task's inventory blocks. */
  blockAgent2?: readonly string[];
}

/** `unique_block_list`: stripped, non-empty, first occurrence kept. */
export function uniqueBlockList(values: Iterable<string>): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const v of values) {
    const s = pyStrip(String(v));
    if (!s || seen.has(s)) continue;
    seen.add(s);
    out.push(s);
  }
  return out;
}

/** The blocks an agent (0 or 1) may use: its override list, else the inventory's blocks. */
export function allowedBlocksFor(task: HouseBuildTaskSpec, agentIndex: number, opts: HouseBuildTaskOptions = {}): string[] {
  const override = uniqueBlockList((agentIndex === 0 ? opts.blockAgent1 : opts.blockAgent2) ?? []);
  return override.length > 0 ? override : uniqueBlockList(task.inventory.map(([, v]) => v));
}

/** Command caps per agent: `max(1, total // n)` each, agent 1 also gets `total % n`. */
export function commandCaps(maxCommandsTotal: number, numAgents: number): number[] {
  const n = Math.max(1, Math.trunc(numAgents));
  const per = Math.max(1, Math.floor(maxCommandsTotal / n));
  const caps = new Array<number>(n).fill(per);
  caps[0] += maxCommandsTotal % n;
  return caps;
}

/** One agent's part of the breakdown. */
export interface HouseBuildAgentBreakdown {
  extracted_lines: string[];
  accepted: string[];
  rejected: RejectedCommand[];
}

/** Everything the reward computed, under the keys of `vectors/housebuild.json → breakdown`. */
export interface HouseBuildRewardBreakdown {
  /** score_mean − spider_penalty. */
  reward: number;
  /** Per-agent budgets, or null when resources are unlimited. */
  resource_limits_per_agent: Record<string, number> | null;
  max_commands_per_agent: number[];
  agents: HouseBuildAgentBreakdown[];
  metrics: HouseBuildMatchMetrics;
  /** Some agent's accepted commands include `/kill`. */
  has_kill: boolean;
  spider_penalty: number;
}

/** Inputs of the evaluation core, resolved (shared with the score-feedback text). */
export interface HouseBuildJointEvaluation {
  allowedBlocks: readonly (readonly string[])[];
  maxCommandsPerAgent: readonly number[];
  resourceLimits: Readonly<Record<string, number>> | null;
  /** Apply the spider penalty (the two-agent reward does; the single-agent reward does not). */
  applySpiderPenalty: boolean;
}

/** Validates every agent, simulates agent 1's then agent 2's accepted fills, scores, penalises. */
export function evaluateHouseBuild(
  task: HouseBuildTaskSpec,
  agentOutputs: readonly string[],
  runState: RpgState | null | undefined,
  ev: HouseBuildJointEvaluation,
): HouseBuildRewardBreakdown {
  const agents: HouseBuildAgentBreakdown[] = agentOutputs.map((text, i) => {
    const lines = extractCommandLines(text ?? '');
    const { accepted, rejected } = validateCommands(lines, {
      allowedBlocks: ev.allowedBlocks[i],
      bboxFrom: task.bboxFrom,
      bboxTo: task.bboxTo,
      maxCommands: ev.maxCommandsPerAgent[i],
      resourceLimits: ev.resourceLimits,
    });
    return { extracted_lines: lines, accepted, rejected };
  });
  const merged = agents.flatMap((a) => a.accepted);
  const metrics = scoreWorld(task, simulateCommands(merged, task.bboxFrom, task.bboxTo));
  const killed = agents.some((a) => hasKill(a.accepted));
  const penalty = ev.applySpiderPenalty && !killed ? spiderPenaltyAmount(runState) : 0.0;
  return {
    reward: metrics.score_mean - penalty,
    resource_limits_per_agent: ev.resourceLimits ? { ...ev.resourceLimits } : null,
    max_commands_per_agent: [...ev.maxCommandsPerAgent],
    agents,
    metrics,
    has_kill: killed,
    spider_penalty: penalty,
  };
}

/**
 * The reward with its breakdown. `agentOutputs` holds one completion per agent: two for the
 * MAGRPO/actor-critic setting (spider penalty applies), one for the single-agent GRPO baseline
 * (all commands to one agent, no penalty). `runState` is the run's spider/HP state
 * (`prepareRpgState`); null means no spiders.
 */
export function houseBuildRewardBreakdown(
  task: HouseBuildTaskSpec,
  agentOutputs: readonly string[],
  runState: RpgState | null | undefined,
  options: HouseBuildTaskOptions = {},
): HouseBuildRewardBreakdown {
  const n = agentOutputs.length;
  if (n !== 1 && n !== 2) throw new Error(`houseBuildReward: expected 1 or 2 agent outputs, got ${n}`);
  const maxCommands = options.maxCommands ?? 600;
  if (!Number.isInteger(maxCommands) || maxCommands < 0) {
    throw new Error(`houseBuildReward: options.maxCommands must be a non-negative integer, got ${maxCommands}`);
  }
  const limited = options.limitedResource ?? true;
  return evaluateHouseBuild(task, agentOutputs, runState, {
    allowedBlocks: agentOutputs.map((_, i) => allowedBlocksFor(task, i, options)),
    // Single agent: the whole cap, no max(1, …) split.
    maxCommandsPerAgent: n === 1 ? [maxCommands] : commandCaps(maxCommands, n),
    resourceLimits: limited ? computeResourceLimits(task, n) : null,
    applySpiderPenalty: n === 2,
  });
}

/** The HouseBuild reward for one joint action, range [−0.1, 1.0]. See `houseBuildRewardBreakdown`. */
export function houseBuildReward(
  task: HouseBuildTaskSpec,
  agentOutputs: readonly string[],
  runState: RpgState | null | undefined,
  options: HouseBuildTaskOptions = {},
): number {
  return houseBuildRewardBreakdown(task, agentOutputs, runState, options).reward;
}
