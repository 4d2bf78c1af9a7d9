/**
 * The `toy-coord` task spec: the two-agent word task for tiny models (items built in code, no data).
 */
import { defineTask } from '../../src/tasks/spec.js';
import { episodeReward, lastRawReward, sliceItems } from '../../src/tasks/metrics.js';
import { mean } from '../../src/util/stats.js';
import { toyCentralizedAdapter } from './centralized.js';
import { ToyCoordEnv } from './env.js';
import { toyRandomBaseline, toyTasks, toyTrainTasks, type ToyTask } from './task.js';

/** The `toy-coord` task. */
export const taskSpec = defineTask({
  name: 'toy-coord',
  label: 'toy-coord',
  metricsSummary: 'toy/reward_mean, toy/success_rate',
  externalModes: [],
  externalOptions: [],
  data: 'builtin',
  // Four episodes per cue keep a sampled evaluation's noise small; eval cues repeat training cues by design.
  evalRepeatsTrain: true,
  async setup(ctx) {
    const { scale, shift } = ctx.reward;
    const env = new ToyCoordEnv({
      numTurns: ctx.numTurns,
      ...(scale !== 1 || shift !== 0 ? { rewardProcessor: (r: number) => r * scale + shift } : {}),
    });
    // Sparse: only the last turn pays (the mean of the turns' scores, each 16/225 in expectation);
    // the processor is affine, so it maps the expectation.
    const randomPlayReward = Array.from({ length: ctx.numTurns }, (_, k) => (k === ctx.numTurns - 1 ? toyRandomBaseline : 0) * scale + shift);
    return {
      env,
      trainTasks: sliceItems<ToyTask>(toyTrainTasks, ctx.dataset.train_split, 'dataset.train_split'),
      evalTasks: sliceItems(toyTasks(16, 'toy-eval'), ctx.dataset.eval_split, 'dataset.eval_split'),
      evalCallbacks: [],
      paperMetrics: (samples) => {
        const eps = samples.flat();
        return {
          'toy/reward_mean': mean(eps.map(episodeReward)),
          // An episode succeeds when its last turn scores 1: both agents said the same answer.
          'toy/success_rate': mean(eps.map((e) => (lastRawReward(e) >= 1 ? 1 : 0))),
        };
      },
      close: async () => {},
      centralized: toyCentralizedAdapter,
      randomPlayReward,
    };
  },
});
