/** The plots of a run (src/logging/plots.ts) with the run's title and its task's random-play line. */
import { writePlots, type PlotFiles } from '../../src/logging/plots.js';
import type { MetricValue } from '../../src/logging/metrics.js';
import type { RunConfig } from '../schemas.js';
import type { TaskSetup } from '../tasks.js';

/** Writes the run's figures and plots.html into `runDir` (see `writePlots`). */
export function writeRunPlots(runDir: string, rows: readonly Readonly<Record<string, MetricValue>>[], config: RunConfig, task: Pick<TaskSetup, 'randomPlayReward'>): Promise<PlotFiles[]> {
  const random = task.randomPlayReward;
  return writePlots(runDir, rows, {
    title: `${config.dataset.task} · ${config.trainer}`,
    ...(random ? { randomPlay: { perTurn: random, label: 'uniform random play' } } : {}),
  });
}
