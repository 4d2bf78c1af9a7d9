/**
 * The `housebuild` task spec: HouseBuild (Minecraft), its options (`task:` block budgets, spiders)
 * and metrics (IoU, HP). The 10 tasks ship with comlrl (data/housebuild).
 */
import { z } from 'zod';
import { HOUSEBUILD_FEEDBACK_MODES, parseHouseBuildFeedbackMode } from '../../rewards/housebuild/feedback/index.js';
import type { HouseBuildRewardBreakdown } from '../../rewards/housebuild/reward.js';
import type { RpgConfig } from '../../rewards/housebuild/rpg.js';
import { loadHouseBuildTasks, paperSplits } from '../../src/data/tasks.js';
import { lastInfo, lastRawReward } from '../../src/tasks/metrics.js';
import { defineTask, type PlayedEpisode } from '../../src/tasks/spec.js';
import { mean } from '../../src/util/stats.js';
import { houseBuildCentralizedAdapter } from './centralized.js';
import { HouseBuildEnv } from './index.js';

const int = (key: string, min: number) =>
  z.number({ error: `${key} must be an integer >= ${min}` }).int({ error: `${key} must be an integer >= ${min}` }).min(min, { error: `${key} must be an integer >= ${min}` });

/** The `task:` section of a HouseBuild run (tasks-reference §2.6). */
export const houseBuildOptionsSchema = z.strictObject({
  block_agent1: z.array(z.string(), { error: 'task.block_agent1 must be a list of block ids' }).optional(),
  block_agent2: z.array(z.string(), { error: 'task.block_agent2 must be a list of block ids' }).optional(),
  max_commands: int('task.max_commands', 1).optional(),
  limited_resource: z.boolean({ error: 'task.limited_resource must be true or false' }).optional(),
  player: z.strictObject({ hp: z.number({ error: 'task.player.hp must be a number' }).refine(Number.isFinite, { error: 'task.player.hp must be a finite number' }) }).optional(),
  spider: z
    .strictObject({
      num: int('task.spider.num', 0),
      atk_low: int('task.spider.atk_low', 0),
      atk_high: int('task.spider.atk_high', 0),
    })
    .refine((s) => s.atk_high >= s.atk_low, { error: 'task.spider.atk_high must be >= task.spider.atk_low' })
    .optional(),
  /** Seed of the run's spider attacks (the reference draws one per run). Default: the run seed. */
  rpg_seed: int('task.rpg_seed', 0).optional(),
});

/** HouseBuild's options after validation. */
export type HouseBuildOptions = z.output<typeof houseBuildOptionsSchema>;

function rpgConfigOf(t: HouseBuildOptions): RpgConfig | undefined {
  if (t.player === undefined && t.spider === undefined) return undefined;
  return {
    playerHp: t.player?.hp ?? 5,
    spiderNum: t.spider?.num ?? 3,
    atkLow: t.spider?.atk_low ?? 1,
    atkHigh: t.spider?.atk_high ?? 3,
  };
}

/** The `housebuild` task. */
export const taskSpec = defineTask({
  name: 'housebuild',
  label: 'HouseBuild',
  metricsSummary: 'housebuild/iou, housebuild/hp (HP left after the spiders), score_match, kill rate',
  externalModes: HOUSEBUILD_FEEDBACK_MODES,
  externalOptions: ['original_prompt', 'previous_response', 'lim'],
  options: houseBuildOptionsSchema,
  data: 'packaged',
  defaultSplits: () => paperSplits.housebuild,
  async setup(ctx) {
    const splits = paperSplits.housebuild;
    const { dataset, external: ext, options: t } = ctx;
    const trainTasks = await loadHouseBuildTasks(dataset.path, dataset.train_split ?? splits.train);
    const evalTasks = await loadHouseBuildTasks(dataset.eval_path ?? dataset.path, dataset.eval_split ?? splits.eval);
    const rpgConfig = rpgConfigOf(t);
    const env = new HouseBuildEnv({
      numTurns: ctx.numTurns,
      seed: t.rpg_seed ?? ctx.seed,
      ...(rpgConfig ? { rpgConfig } : {}),
      ...(t.block_agent1 ? { blockAgent1: t.block_agent1 } : {}),
      ...(t.block_agent2 ? { blockAgent2: t.block_agent2 } : {}),
      ...(t.max_commands !== undefined ? { maxCommands: t.max_commands } : {}),
      ...(t.limited_resource !== undefined ? { limitedResource: t.limited_resource } : {}),
      ...(ext.mode ? { feedbackMode: parseHouseBuildFeedbackMode(ext.mode) } : {}),
      ...(ext.original_prompt !== undefined ? { originalPrompt: ext.original_prompt } : {}),
      ...(ext.previous_response !== undefined ? { previousResponse: ext.previous_response } : {}),
      ...(ext.lim !== undefined ? { limit: ext.lim } : {}),
      rewardScale: ctx.reward.scale,
      rewardShift: ctx.reward.shift,
    });
    const hp0 = env.rpgState?.playerHp ?? 0;
    const dmg = env.rpgState?.spiderTotalDmg ?? 0;
    const metrics = (eps: readonly PlayedEpisode[]): Record<string, number> => {
      const final = eps.map((e) => lastInfo(e).breakdown as HouseBuildRewardBreakdown | undefined);
      const ok = final.filter((b): b is HouseBuildRewardBreakdown => b !== undefined);
      // HP after the spiders attack: intact when either agent issued /kill, else hp − total damage.
      const hp = ok.map((b) => (b.has_kill || dmg <= 0 ? hp0 : Math.max(0, hp0 - dmg)));
      return {
        'housebuild/iou': mean(ok.map((b) => b.metrics.iou)),
        'housebuild/score_match': mean(ok.map((b) => b.metrics.score_match)),
        'housebuild/hp': mean(hp),
        'housebuild/hp_frac': hp0 > 0 ? mean(hp) / hp0 : Number.NaN,
        'housebuild/kill_rate': mean(ok.map((b) => (b.has_kill ? 1 : 0))),
        'housebuild/raw_reward': mean(eps.map(lastRawReward)),
      };
    };
    return {
      env,
      trainTasks,
      evalTasks,
      evalCallbacks: [(eps) => metrics(eps)],
      paperMetrics: (samples) => metrics(samples.flat()),
      close: async () => {},
      // CentralizedMAGRPO: one policy writes both builders' commands, in <agent_0> and <agent_1>.
      centralized: houseBuildCentralizedAdapter,
    };
  },
});
