/**
 * CoopHE wiring for the CLI: the environment with its Python sandbox, and the paper metrics (pass
 * rate and pass@k over n sampled episodes per problem, from the tests of the last turn played).
 */
import { CoopHEEnv } from '../envs/coophe/index.js';
import type { CoopHERewardBreakdown } from '../rewards/coophe/reward.js';
import type { CoopHEFeedbackMode } from '../rewards/coophe/feedback.js';
import type { TypedRunConfig as RunConfig } from './schemas.js';
import { loadCoopHERows, paperSplits } from '../src/data/tasks.js';
import type { LLMDecPOMDP } from '../src/decpomdp/types.js';
import { passAtKMetrics, rewardScaleShift, type AnyEpisode, type TaskSetup } from './tasks.js';

function breakdownAt(ep: AnyEpisode, turn: number): CoopHERewardBreakdown | undefined {
  return ep.infos[turn]?.breakdown as CoopHERewardBreakdown | undefined;
}

/** Every test of the problem passed (a problem without extracted tests never passes). */
export function coopHEPassed(b: CoopHERewardBreakdown | undefined): boolean {
  return b !== undefined && (b.total_tests ?? 0) > 0 && b.passed_tests === b.total_tests;
}

function mean(xs: readonly number[]): number {
  return xs.length === 0 ? Number.NaN : xs.reduce((a, b) => a + b, 0) / xs.length;
}

/** CoopHE metrics of sampled episodes, `samples[j]` the n episodes of problem j. */
export function coopHEMetrics(samples: readonly (readonly AnyEpisode[])[], ks: readonly number[]): Record<string, number> {
  const eps = samples.flat();
  const last = (e: AnyEpisode) => breakdownAt(e, e.infos.length - 1);
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

/** Builds the CoopHE task of a run config (python3 must be available: the sandbox runs the tests). */
export async function setupCoopHE(config: RunConfig): Promise<TaskSetup> {
  const path = config.dataset.path;
  if (path === undefined) {
    throw new Error("dataset.path is required for task 'coophe': point it at your local CoopHumanEval file (JSON list or JSONL of {task_id, prompt, test, entry_point}); it is not shipped");
  }
  const trainTasks = await loadCoopHERows(path, config.dataset.train_split ?? paperSplits.coophe.train);
  const evalTasks = await loadCoopHERows(config.dataset.eval_path ?? path, config.dataset.eval_split ?? paperSplits.coophe.eval);
  const { scale, shift } = rewardScaleShift(config);
  const t = config.task;
  const ext = config.external;
  const numTurns = config.trainerConfig.num_turns;
  const env = new CoopHEEnv({
    numTurns,
    rewardOptions: {
      ...(t.python !== undefined ? { python: t.python } : {}),
      ...(t.pool_size !== undefined ? { concurrency: t.pool_size } : {}),
      ...(t.variant !== undefined ? { variant: t.variant } : {}),
    },
    ...(ext.mode !== undefined ? { feedbackMode: ext.mode as CoopHEFeedbackMode } : {}),
    ...(ext.sandbox_slice !== undefined ? { sandboxSlice: ext.sandbox_slice } : {}),
    ...(ext.external_prompt_passthrough !== undefined ? { externalPromptPassthrough: ext.external_prompt_passthrough } : {}),
    rewardScale: scale,
    rewardShift: shift,
  });
  return {
    task: 'coophe',
    env: env as unknown as LLMDecPOMDP<unknown, unknown>,
    trainTasks,
    evalTasks,
    // During training: pass rate of the single eval episode per problem (pass@1 estimate).
    evalCallbacks: [(eps) => coopHEMetrics(eps.map((e) => [e]), [1])],
    paperMetrics: (samples, ks) => coopHEMetrics(samples, ks),
    close: async () => {},
  };
}
