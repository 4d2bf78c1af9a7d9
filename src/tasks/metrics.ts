/** Small pieces the task specs' metrics and item selection share. */
import { parseSplitSpec, sliceWithIndex } from '../data/split.js';
import { meanPassAtK } from '../eval/passk.js';
import type { PlayedEpisode } from './spec.js';

/** Sum of an episode's rewards (the demo and summaries report its mean). */
export function episodeReward(ep: PlayedEpisode): number {
  return ep.rewards.reduce((a, b) => a + b, 0);
}

/** The info of an episode's last played turn. */
export function lastInfo(ep: PlayedEpisode): Readonly<Record<string, unknown>> {
  return ep.infos[ep.infos.length - 1] ?? {};
}

/** The raw (unprocessed) reward of the last turn, from the env's info (`rawReward`), else the reward. */
export function lastRawReward(ep: PlayedEpisode): number {
  const raw = lastInfo(ep).rawReward;
  return typeof raw === 'number' ? raw : (ep.rewards[ep.rewards.length - 1] ?? Number.NaN);
}

/**
 * pass@k for every k ≤ n, from per-item counts of passing samples (`passed[j][s]` is whether sample s
 * of eval item j passed).
 */
export function passAtKMetrics(passed: readonly (readonly boolean[])[], ks: readonly number[], prefix: string): Record<string, number> {
  const out: Record<string, number> = {};
  if (passed.length === 0) return out;
  const counts = passed.map((p) => ({ n: p.length, c: p.filter(Boolean).length }));
  const n = Math.min(...counts.map((c) => c.n));
  for (const k of ks) if (k <= n) out[`${prefix}/pass@${k}`] = meanPassAtK(counts, k);
  return out;
}

/**
 * Applies an HF-style slice spec without split name (e.g. `[:8]`) to in-memory items (tasks whose
 * items are built in code); `key` names the config key in errors. No spec: every item.
 */
export function sliceItems<T>(items: readonly T[], spec: string | undefined, key: string): T[] {
  if (spec === undefined) return [...items];
  let slices;
  try {
    slices = parseSplitSpec(spec);
  } catch (err) {
    throw new Error(`${key}: ${(err as Error).message}`);
  }
  return slices.flatMap((s) => sliceWithIndex(items, s).map(([, row]) => row));
}

/** The dataset path a task that needs data reads; errors name the key and what to point it at. */
export function requireDatasetPath(path: string | undefined, task: string, what = 'a local JSON, JSONL or Parquet file (or a hub-layout directory)'): string {
  if (path === undefined) throw new Error(`dataset.path is required for task '${task}': point it at ${what}`);
  return path;
}
