import { describe, expect, it } from 'vitest';
import {
  HOUSEBUILD_PAPER_RPG_CONFIG,
  houseBuildFeedbackContext,
  houseBuildFirstTurnPrompt,
  houseBuildFollowUpPrompts,
  houseBuildReward,
  houseBuildRewardBreakdown,
  parseHouseBuildTask,
  prepareRpgState,
  type HouseBuildTaskSpec,
  type RpgState,
} from '../rewards/housebuild/index.js';
import { readFixtureJson, readRepoJson } from './shared-fixtures.js';

interface PyRpgState {
  player_hp: number;
  spider_num: number;
  spider_atk_low: number;
  spider_atk_high: number;
  spider_atk_values: number[];
  spider_total_dmg: number;
}

interface HouseBuildCase {
  name: string;
  task_id: string;
  agent1: string;
  agent2: string;
  rpg_state: PyRpgState;
  limited_resource: boolean;
  num_agents: 1 | 2;
  expected_reward: number;
  breakdown: Record<string, unknown>;
}

interface FollowUp {
  scenario: string;
  mode: string;
  agent_completions: string[];
  flags: { limit: number; original_prompt: boolean; previous_response: boolean; prompt_history_len: number };
  prompts: string[];
}

// A committed copy of ../shared/vectors/housebuild.json (MIT; test/fixtures/housebuild/NOTICE.md).
const vectors = readFixtureJson<{
  cases: HouseBuildCase[];
  prompts: {
    rpg_state_cfg_used_for_prompts: PyRpgState;
    prepare_rpg_state_by_seed: Record<string, PyRpgState>;
    first_turn_prompts_no_chat_template: Record<string, { agent1: string; agent2: string }>;
    external_context_0002: Record<string, unknown>;
    followup_prompts_0002: FollowUp[];
  };
}>('housebuild/vectors.json');
// The task set the package ships (the same file as ../shared/data/housebuild/data.json).
const rows = readRepoJson<unknown[]>('data/housebuild/data.json');
const tasks = new Map<string, HouseBuildTaskSpec>(rows.map((r) => parseHouseBuildTask(r)).map((t) => [t.taskId, t]));

function rpg(s: PyRpgState): RpgState {
  return {
    playerHp: s.player_hp,
    spiderNum: s.spider_num,
    spiderAtkLow: s.spider_atk_low,
    spiderAtkHigh: s.spider_atk_high,
    spiderAtkValues: s.spider_atk_values,
    spiderTotalDmg: s.spider_total_dmg,
  };
}

describe('HouseBuild reward against the reference vectors', () => {
  it('loads the 10 shipped tasks with a 6×7×7 bbox', () => {
    expect([...tasks.keys()]).toHaveLength(10);
    for (const t of tasks.values()) {
      expect(t.bboxFrom).toEqual([0, 0, 0]);
      expect(t.bboxTo).toEqual([5, 6, 6]);
    }
  });

  for (const c of vectors.cases) {
    it(`${c.name}: reward and breakdown`, () => {
      const task = tasks.get(c.task_id) as HouseBuildTaskSpec;
      const outputs = c.num_agents === 1 ? [c.agent1] : [c.agent1, c.agent2];
      const opts = { limitedResource: c.limited_resource };
      expect(houseBuildReward(task, outputs, rpg(c.rpg_state), opts)).toBe(c.expected_reward);
      const b = houseBuildRewardBreakdown(task, outputs, rpg(c.rpg_state), opts) as unknown as Record<string, unknown>;
      for (const [key, expected] of Object.entries(c.breakdown)) {
        if (key === 'metrics') {
          for (const [mk, mv] of Object.entries(expected as Record<string, number>)) {
            expect((b.metrics as Record<string, number>)[mk], `metrics.${mk}`).toBe(mv);
          }
        } else if (typeof expected === 'number') {
          expect(b[key], key).toBe(expected);
        } else {
          expect(b[key], key).toEqual(expected);
        }
      }
    });
  }
});

describe('HouseBuild run state from a seed (Python MT19937)', () => {
  for (const [seed, expected] of Object.entries(vectors.prompts.prepare_rpg_state_by_seed)) {
    it(`seed ${seed}`, () => {
      expect(prepareRpgState(HOUSEBUILD_PAPER_RPG_CONFIG, Number(seed))).toEqual(rpg(expected));
    });
  }
});

describe('HouseBuild prompts against the reference vectors', () => {
  const state = rpg(vectors.prompts.rpg_state_cfg_used_for_prompts);
  const opts = { rpgState: state, limitedResource: true, numAgents: 2 as const };

  for (const [taskId, expected] of Object.entries(vectors.prompts.first_turn_prompts_no_chat_template)) {
    it(`first turn, ${taskId}`, () => {
      const task = tasks.get(taskId) as HouseBuildTaskSpec;
      expect(houseBuildFirstTurnPrompt(task, 'agent1', opts)).toBe(expected.agent1);
      expect(houseBuildFirstTurnPrompt(task, 'agent2', opts)).toBe(expected.agent2);
    });
  }

  const ctx = houseBuildFeedbackContext(tasks.get('house_build_0002') as HouseBuildTaskSpec, opts);

  it('builds the follow-up context the training script registers', () => {
    const ref = vectors.prompts.external_context_0002;
    expect(ctx.systemPrompt).toBe(ref.system_prompt);
    expect(ctx.userPromptSingle).toBe(ref.user_prompt_single);
    expect(ctx.userPromptAgent1).toBe(ref.user_prompt_agent1);
    expect(ctx.userPromptAgent2).toBe(ref.user_prompt_agent2);
    expect(ctx.allowedBlocksAgent1).toEqual(ref.allowed_blocks_agent1);
    expect(ctx.allowedBlocksAgent2).toEqual(ref.allowed_blocks_agent2);
    expect(ctx.maxCommandsTotal).toBe(ref.max_commands_total);
    expect(ctx.limitedResource).toBe(ref.limited_resource);
    expect(ctx.resourceLimitsText).toBe(ref.resource_limits_text);
  });

  for (const f of vectors.prompts.followup_prompts_0002) {
    it(`follow-up ${f.mode}, ${f.scenario}`, () => {
      const prompts = houseBuildFollowUpPrompts(f.mode, ctx, f.agent_completions, {
        turn: f.flags.prompt_history_len + 1,
        limit: f.flags.limit,
        originalPrompt: f.flags.original_prompt,
        previousResponse: f.flags.previous_response,
      });
      expect(prompts).toHaveLength(f.prompts.length);
      prompts.forEach((p, i) => expect(p, `agent ${i + 1}`).toBe(f.prompts[i]));
    });
  }
});
