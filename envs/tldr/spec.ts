/** The `tldr` task spec: TLDR summaries (data: a local export of trl-lib/tldr). */
import { tldrAggregateMetrics, tldrLoggerMetrics } from '../../rewards/tldr/logger.js';
import { loadTLDRRows, paperSplits } from '../../src/data/tasks.js';
import { lastRawReward, requireDatasetPath } from '../../src/tasks/metrics.js';
import { taggedRolesAdapter } from '../../src/decpomdp/centralized.js';
import type { PlayedEpisode } from '../../src/tasks/spec.js';
import { defineTask } from '../../src/tasks/spec.js';
import { mean } from '../../src/util/stats.js';
import { TLDREnv } from './index.js';

/** The paper's TLDR splits: CoLLM-DC (IAC) uses 1000 rows, MAGRPO and CoLLM-CC 1100. */
function splits(trainer: string): { train: string; eval: string } {
  return trainer === 'collm-dc' ? paperSplits.tldr.iac : paperSplits.tldr.magrpo;
}

/** The `tldr` task. */
export const taskSpec = defineTask({
  name: 'tldr',
  label: 'TLDR',
  metricsSummary: 'tldr/score (the four-level reward) and the eval logger means',
  externalModes: [],
  externalOptions: [],
  data: 'required',
  defaultSplits: splits,
  async setup(ctx) {
    const path = requireDatasetPath(ctx.dataset.path, 'tldr');
    const s = splits(ctx.trainer);
    const trainTasks = await loadTLDRRows(path, ctx.dataset.train_split ?? s.train);
    const evalTasks = await loadTLDRRows(ctx.dataset.eval_path ?? path, ctx.dataset.eval_split ?? s.eval);
    const env = new TLDREnv({ rewardScale: ctx.reward.scale, rewardShift: ctx.reward.shift });
    const score = (eps: readonly PlayedEpisode[]): Record<string, number> => {
      // The TLDR score is the raw four-level reward of the pair (range [0, 2.98]); the logger's
      // ungated/gated level means come with it, as the Writing repo's eval logger reports them.
      const completions = eps.map((e) => e.completions[e.completions.length - 1]);
      const logger = tldrAggregateMetrics(completions.map(([c1, c2]) => tldrLoggerMetrics(c1 ?? '', c2 ?? '')));
      const out: Record<string, number> = { 'tldr/score': mean(eps.map(lastRawReward)) };
      for (const [k, v] of Object.entries(logger)) if (Number.isFinite(v)) out[`tldr/${k}`] = v;
      return out;
    };
    return {
      env,
      trainTasks,
      evalTasks,
      evalCallbacks: [(eps) => ({ 'tldr/score': mean(eps.map(lastRawReward)) })],
      paperMetrics: (samples) => score(samples.flat()),
      close: async () => {},
      // CentralizedMAGRPO: one policy writes both summaries, each after its tag (role 0 the concise one).
      centralized: taggedRolesAdapter({ roleNames: ['Summary', 'Elaboration'] }),
    };
  },
});
