/**
 * The `coophe` task spec: CoopHumanEval with its Python sandbox, its options (`task:` python,
 * pool_size, variant) and the paper metrics (pass rate and pass@k over n sampled episodes per
 * problem, from the tests of the last turn played). The data is not shipped (no licence).
 */
import { z } from 'zod';
import type { CoopHEFeedbackMode } from '../../rewards/coophe/feedback.js';
import type { CoopHERewardBreakdown } from '../../rewards/coophe/reward.js';
import { loadCoopHERows, paperSplits } from '../../src/data/tasks.js';
import { passAtKMetrics, requireDatasetPath } from '../../src/tasks/metrics.js';
import { defineTask, type PlayedEpisode } from '../../src/tasks/spec.js';
import { mean } from '../../src/util/stats.js';
import { coopHECentralizedAdapter } from './centralized.js';
import { CoopHEEnv } from './index.js';

/** The follow-up modes (`external.mode`). */
export const COOPHE_FEEDBACK_MODES = ['level_feedback', 'plain', 'expert_edits'] as const satisfies readonly CoopHEFeedbackMode[];

function isCoopHEMode(mode: string): mode is CoopHEFeedbackMode {
  return COOPHE_FEEDBACK_MODES.some((m) => m === mode);
}

/** The `task:` section of a CoopHE run: the sandbox. */
export const coopHEOptionsSchema = z.strictObject({
  /** Python interpreter for CoopHE tests. Default `python3`. */
  python: z.string({ error: 'task.python must be a command or path' }).min(1).optional(),
  /** Concurrent test subprocesses. */
  pool_size: z
    .number({ error: 'task.pool_size must be an integer >= 1' })
    .int({ error: 'task.pool_size must be an integer >= 1' })
    .min(1, { error: 'task.pool_size must be an integer >= 1' })
    .optional(),
  /** Which reference CoopHE reward: `upstream` (math pre-injected, default) or `fork`. */
  variant: z.enum(['upstream', 'fork'], { error: "task.variant must be 'upstream' or 'fork'" }).optional(),
});

function breakdownAt(ep: PlayedEpisode, turn: number): CoopHERewardBreakdown | undefined {
  return ep.infos[turn]?.breakdown as CoopHERewardBreakdown | undefined;
}

/** Every test of the problem passed (a problem without extracted tests never passes). */
export function coopHEPassed(b: CoopHERewardBreakdown | undefined): boolean {
  return b !== undefined && (b.total_tests ?? 0) > 0 && b.passed_tests === b.total_tests;
}

/** CoopHE metrics of sampled episodes, `samples[j]` the n episodes of problem j. */
export function coopHEMetrics(samples: readonly (readonly PlayedEpisode[])[], ks: readonly number[]): Record<string, number> {
  const eps = samples.flat();
  const last = (e: PlayedEpisode) => breakdownAt(e, e.infos.length - 1);
  const out: Record<string, number> = {
    'coophe/pass_rate': mean(eps.map((e) => (coopHEPassed(last(e)) ? 1 : 0))),
    'coophe/test_pass_frac': mean(
      eps.map((e) => {
        const b = last(e);
        return b && (b.total_tests ?? 0) > 0 ? (b.passed_tests ?? 0) / (b.total_tests as number) : 0;
      }),
    ),
    'coophe/raw_reward': mean(eps.map((e) => last(e)?.reward ?? 0)),
    'coophe/aux_used_rate': mean(eps.map((e) => (last(e)?.main_uses_aux ? 1 : 0))),
    ...passAtKMetrics(samples.map((group) => group.map((e) => coopHEPassed(last(e)))), ks, 'coophe'),
  };
  const turns = Math.max(0, ...eps.map((e) => e.infos.length));
  if (turns > 1) {
    for (let t = 0; t < turns; t++) {
      const reached = eps.filter((e) => e.infos.length > t);
      out[`coophe/turn_${t + 1}/pass_rate`] = mean(reached.map((e) => (coopHEPassed(breakdownAt(e, t)) ? 1 : 0)));
    }
  }
  return out;
}

/** The `coophe` task (python3 must be available: the sandbox runs the tests). */
export const taskSpec = defineTask({
  name: 'coophe',
  label: 'CoopHE',
  metricsSummary: 'coophe/pass_rate (all tests pass), coophe/pass@k (unbiased estimator), test pass fraction',
  externalModes: COOPHE_FEEDBACK_MODES,
  externalOptions: ['sandbox_slice', 'external_prompt_passthrough'],
  options: coopHEOptionsSchema,
  data: 'required',
  defaultSplits: () => paperSplits.coophe,
  // pass@k needs k samples per problem.
  defaultEvalSamples: (ks) => Math.max(...ks),
  async setup(ctx) {
    const { dataset, external: ext, options: t } = ctx;
    const path = requireDatasetPath(
      dataset.path,
      'coophe',
      'your local CoopHumanEval file (JSON list or JSONL of {task_id, prompt, test, entry_point}); it is not shipped',
    );
    const trainTasks = await loadCoopHERows(path, dataset.train_split ?? paperSplits.coophe.train);
    const evalTasks = await loadCoopHERows(dataset.eval_path ?? path, dataset.eval_split ?? paperSplits.coophe.eval);
    const env = new CoopHEEnv({
      numTurns: ctx.numTurns,
      rewardOptions: {
        ...(t.python !== undefined ? { python: t.python } : {}),
        ...(t.pool_size !== undefined ? { concurrency: t.pool_size } : {}),
        ...(t.variant !== undefined ? { variant: t.variant } : {}),
      },
      ...(ext.mode !== undefined && isCoopHEMode(ext.mode) ? { feedbackMode: ext.mode } : {}),
      ...(ext.sandbox_slice !== undefined ? { sandboxSlice: ext.sandbox_slice } : {}),
      ...(ext.external_prompt_passthrough !== undefined ? { externalPromptPassthrough: ext.external_prompt_passthrough } : {}),
      rewardScale: ctx.reward.scale,
      rewardShift: ctx.reward.shift,
    });
    return {
      env,
      trainTasks,
      evalTasks,
      // During training: pass rate of the single eval episode per problem (pass@1 estimate).
      evalCallbacks: [(eps) => coopHEMetrics(eps.map((e) => [e]), [1])],
      paperMetrics: (samples, ks) => coopHEMetrics(samples, ks),
      close: async () => {},
      // CentralizedMAGRPO: one policy writes aux and the entry point, in <auxiliary> and <main>.
      centralized: coopHECentralizedAdapter,
    };
  },
});
