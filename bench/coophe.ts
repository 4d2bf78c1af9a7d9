/**
 * CoopHE reward throughput: a batch of 16 (aux, main) pairs on one 5-assert problem, scored one
 * after another (one sandboxed runner at a time, the judge process reused) and through the
 * runner's pool. Figures only.
 */
import { CoopHERewardRunner, type CoopHEPair, type CoopHEProblem } from '../rewards/coophe/index.js';

// A problem written for this benchmark (the CoopHE data set carries no licence).
const PROBLEM: CoopHEProblem = {
  task_id: 'bench/0',
  prompt: 'def count_vowels(s):\n    """Return the number of vowels (a, e, i, o, u; any case) in s.\n    >>> count_vowels("Hello")\n    2\n    """\n',
  test: [
    'def check(candidate):',
    "    assert candidate('Hello') == 2",
    "    assert candidate('') == 0",
    "    assert candidate('AEIOU') == 5",
    "    assert candidate('rhythm') == 0",
    "    assert candidate('Programming Language') == 7",
  ].join('\n'),
  entry_point: 'count_vowels',
};

const AUX = 'def aux(c):\n    return c.lower() in "aeiou"\n';
const MAINS = [
  'def count_vowels(s):\n    total = 0\n    for c in s:\n        if aux(c):\n            total += 1\n    return total\n',
  'def count_vowels(s):\n    return sum(1 for c in s if aux(c))\n',
  'def count_vowels(s):\n    n = len([c for c in s if aux(c)])\n    return n\n',
  'def count_vowels(s):\n    return len(s)\n',
];

function pairs(): CoopHEPair[] {
  return Array.from({ length: 16 }, (_, i) => ({ aux: AUX, main: MAINS[i % MAINS.length], problem: PROBLEM }));
}

/** Sequential vs pooled CoopHE scoring of 16 pairs: rewards/s and per-call latency (ms). */
export async function benchCoopHE(): Promise<Record<string, number>> {
  const constructStart = performance.now();
  const pooled = new CoopHERewardRunner({ log: () => undefined });
  const constructMs = performance.now() - constructStart;
  const sequential = new CoopHERewardRunner({ concurrency: 1, log: () => undefined });
  const batch = pairs();

  await sequential.rewardBatch(batch.slice(0, 2)); // warm the interpreter's file cache

  const latencies: number[] = [];
  const seqStart = performance.now();
  for (const p of batch) {
    const t = performance.now();
    await sequential.reward(p.aux, p.main, p.problem);
    latencies.push(performance.now() - t);
  }
  const seqMs = performance.now() - seqStart;

  const poolStart = performance.now();
  await pooled.rewardBatch(batch);
  const poolMs = performance.now() - poolStart;

  latencies.sort((a, b) => a - b);
  const textOnlyStart = performance.now();
  const reps = 200;
  for (let i = 0; i < reps; i++) await sequential.reward(AUX, 'def other(s):\n    return 0\n', PROBLEM);
  const textOnlyMs = (performance.now() - textOnlyStart) / reps;
  // Idle judge processes would otherwise linger (unreferenced) until their idle timeout.
  pooled.sandbox.close();
  sequential.sandbox.close();

  return {
    coophe_sequential_rewards_per_s: (batch.length / seqMs) * 1000,
    coophe_sequential_latency_ms_mean: seqMs / batch.length,
    coophe_sequential_latency_ms_p50: latencies[Math.floor(latencies.length / 2)],
    coophe_sequential_latency_ms_max: latencies[latencies.length - 1],
    coophe_pooled_rewards_per_s: (batch.length / poolMs) * 1000,
    coophe_pooled_batch_ms: poolMs,
    coophe_pool_size: pooled.sandbox.concurrency,
    coophe_no_subprocess_reward_ms: textOnlyMs,
    coophe_runner_construction_ms: constructMs,
  };
}
