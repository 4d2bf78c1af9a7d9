/**
 * HouseBuild first-turn prompts (tasks-reference §2.3): the system prompt, the agent-1 / agent-2 /
 * single-agent user templates with the task's layers, bbox, spider threat and resource limits,
 * and the context the follow-up feedback texts are built from.
 */
import { pyFloatRepr, pyRStrip } from '../../src/util/python-text.js';
import { formatLayersText } from './layers.js';
import { allowedBlocksFor, type HouseBuildTaskOptions } from './reward.js';
import type { RpgState } from './rpg.js';
import type { HouseBuildTaskSpec } from './task.js';
import { AIR_BLOCKS, computeResourceLimits, normalizeBlockId } from './world.js';

/** The system prompt of every HouseBuild config. */
export const HOUSEBUILD_SYSTEM_PROMPT =
  'You are a Minecraft building agent.\n' +
  'Output must be Minecraft commands only (no markdown, no code fences, no extra text).\n' +
  'This is strict: any non-command text is invalid.';

/** Which user template: one of the two team agents, or the single-agent baseline. */
export type HouseBuildPromptRole = 'agent1' | 'agent2' | 'single';

/** Options of the prompt builders. */
export interface HouseBuildPromptOptions extends HouseBuildTaskOptions {
  /** The run's spider/HP state (null: no spiders, placeholders print 0 and `[]`). */
  rpgState: RpgState | null;
  /** Agents in the team; sets the resource limits (default 2). */
  numAgents?: 1 | 2;
  /** `prompt.include_air_rects`: list air rectangles in the layers (default false). */
  includeAirRects?: boolean;
}

/** The placeholder values `_rpg_placeholders` derives from the state. */
function rpgPlaceholders(state: RpgState | null): { spiderNum: string; playerHp: string; spiderAtk: string; spiderDmg: string } {
  if (!state) return { spiderNum: '0', playerHp: '0', spiderAtk: '[]', spiderDmg: '0' };
  return {
    spiderNum: String(state.spiderNum),
    playerHp: String(state.playerHp),
    spiderAtk: `[${state.spiderAtkValues.map(String).join(', ')}]`,
    // A Python float: 5.0, not 5.
    spiderDmg: pyFloatRepr(state.spiderTotalDmg),
  };
}

/**
 * `Resource limits per agent (air unlimited):` and `- <block>: <limit>` in inventory order, or ''
 * when resources are unlimited.
 */
export function resourceLimitsText(task: HouseBuildTaskSpec, numAgents: number, limitedResource = true): string {
  if (!limitedResource) return '';
  const limits = computeResourceLimits(task, numAgents);
  const lines: string[] = [];
  for (const [, block] of task.inventory) {
    const b = normalizeBlockId(block);
    if (AIR_BLOCKS.has(b) || limits[b] === undefined) continue;
    lines.push(`- ${b}: ${limits[b]}`);
  }
  return lines.length ? `Resource limits per agent (air unlimited):\n${lines.join('\n')}` : '';
}

function bboxJson(v: readonly number[]): string {
  return `[${v.join(',')}]`;
}

/** The user prompt for one role (without the system prompt), right-stripped as the reference does. */
export function houseBuildUserPrompt(task: HouseBuildTaskSpec, role: HouseBuildPromptRole, opts: HouseBuildPromptOptions): string {
  const blocks = allowedBlocksFor(task, role === 'agent2' ? 1 : 0, opts)
    .map((b) => `- ${b}`)
    .join('\n');
  const rpg = rpgPlaceholders(opts.rpgState);
  const intro =
    role === 'single'
      ? 'Build the 3D structure from the provided y-axis slices.\n\n'
      : `You are Agent ${role === 'agent1' ? 1 : 2} in a 2-person Minecraft building team. ` +
        'You will place SOME of the blocks for the final build.\n\n' +
        'Task: Build the 3D structure from the provided y-axis slices.\n\n';
  const body =
    intro +
    'Available blocks (use ONLY these):\n' +
    `${blocks}\n\n` +
    'Layers (ascending WORLD y). Each layer is a set of rectangles in WORLD (x,z) coords:\n' +
    '- Format: y=ABS_Y: {(x1, ABS_Y, z1, x2, ABS_Y, z2 block_id), (x1, ABS_Y, z1, x2, ABS_Y, z2 block_id)}\n' +
    `${formatLayersText(task, { worldFrom: task.bboxFrom, includeAir: opts.includeAirRects ?? false })}\n\n` +
    'WORLD bbox (inclusive):\n' +
    `- from: ${bboxJson(task.bboxFrom)}\n` +
    `- to:   ${bboxJson(task.bboxTo)}\n\n` +
    `Threat check: There are ${rpg.spiderNum} spiders nearby; you have ${rpg.playerHp} HP. ` +
    `Spider attack list: ${rpg.spiderAtk}, total damage dmg=${rpg.spiderDmg}. ` +
    'If you want to kill them, output exactly one line: /kill. All other commands should be normal building commands.\n\n' +
    'Constraints:\n' +
    '- Output ONLY Minecraft commands, one per line.\n' +
    '- Allowed commands: /fill and /kill\n' +
    '- Fill format: /fill x1 y1 z1 x2 y2 z2 block\n' +
    '- Use absolute integer coordinates only (no ~).\n' +
    '- Use ONLY blocks from the legend.\n' +
    '- Every coordinate must be within the bbox.';
  const limits = resourceLimitsText(task, opts.numAgents ?? 2, opts.limitedResource ?? true);
  const user = pyRStrip(body);
  return limits ? `${user}\n\n${limits}` : user;
}

/** A chat message for a tokenizer's chat template. */
export interface HouseBuildChatMessage {
  role: 'system' | 'user';
  content: string;
}

/**
 * The first-turn messages `[system, user]` the configs render through the tokenizer's chat
 * template with `add_generation_prompt=True` (`prompt.use_chat_template: true`).
 */
export function houseBuildPromptMessages(
  task: HouseBuildTaskSpec,
  role: HouseBuildPromptRole,
  opts: HouseBuildPromptOptions,
): HouseBuildChatMessage[] {
  return [
    { role: 'system', content: pyRStrip(HOUSEBUILD_SYSTEM_PROMPT) },
    { role: 'user', content: houseBuildUserPrompt(task, role, opts) },
  ];
}

/** The first-turn prompt without a chat template: system prompt, blank line, user prompt. */
export function houseBuildFirstTurnPrompt(task: HouseBuildTaskSpec, role: HouseBuildPromptRole, opts: HouseBuildPromptOptions): string {
  return `${pyRStrip(HOUSEBUILD_SYSTEM_PROMPT)}\n\n${houseBuildUserPrompt(task, role, opts)}`;
}

/**
 * What the follow-up texts read (the payload the reference's context resolver returns for a
 * task): prompts, geometry, allowed blocks, caps, resource text and the run state.
 */
export interface HouseBuildFeedbackContext {
  readonly systemPrompt: string;
  readonly userPromptSingle: string;
  readonly userPromptAgent1: string;
  readonly userPromptAgent2: string;
  readonly task: HouseBuildTaskSpec;
  readonly allowedBlocksAgent1: readonly string[];
  readonly allowedBlocksAgent2: readonly string[];
  /** `task.max_commands` (all agents together). */
  readonly maxCommandsTotal: number;
  readonly limitedResource: boolean;
  /** The resource-limit block of the user prompts ('' when unlimited). */
  readonly resourceLimitsText: string;
  readonly rpgState: RpgState | null;
}

/** Builds the follow-up context of a task, as the training script registers it. */
export function houseBuildFeedbackContext(task: HouseBuildTaskSpec, opts: HouseBuildPromptOptions): HouseBuildFeedbackContext {
  return {
    systemPrompt: pyRStrip(HOUSEBUILD_SYSTEM_PROMPT),
    userPromptSingle: houseBuildUserPrompt(task, 'single', opts),
    userPromptAgent1: houseBuildUserPrompt(task, 'agent1', opts),
    userPromptAgent2: houseBuildUserPrompt(task, 'agent2', opts),
    task,
    allowedBlocksAgent1: allowedBlocksFor(task, 0, opts),
    allowedBlocksAgent2: allowedBlocksFor(task, 1, opts),
    maxCommandsTotal: opts.maxCommands ?? 600,
    limitedResource: opts.limitedResource ?? true,
    resourceLimitsText: resourceLimitsText(task, opts.numAgents ?? 2, opts.limitedResource ?? true),
    rpgState: opts.rpgState,
  };
}
