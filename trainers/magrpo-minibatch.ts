/**
 * MAGRPO's buffer → minibatches (the actor-critic trainers plan theirs with src/buffer's
 * planMinibatches, which adds update epochs): CoMLRL processes a full rollout buffer by turn group (ascending turn), and
 * within a group shuffles the samples and cuts them into minibatches of `train_batch_size`, with one
 * optimizer step per minibatch and a single pass. comlrl shuffles with a seeded stream.
 */
import type { Rng } from '../src/util/rng.js';
import { planMinibatches } from '../src/buffer/replay.js';
import { groupItemsByTurn } from '../src/util/stats.js';

/** Splits items into groups keyed by `turnOf`, returned in ascending turn order; order inside a group is kept. */
export const groupByTurn: <T>(items: readonly T[], turnOf: (item: T) => number) => { turn: number; items: T[] }[] = groupItemsByTurn;

/**
 * Shuffles a copy of `items` with `rng` and cuts it into chunks of `batchSize` (the last may be
 * shorter): one turn group of {@link planMinibatches} (the same draws, so the same batches).
 */
export function shuffledMinibatches<T>(items: readonly T[], batchSize: number, rng: Rng): T[][] {
  if (!Number.isInteger(batchSize) || batchSize < 1) throw new Error(`minibatch size must be an integer >= 1, got ${batchSize}`);
  return planMinibatches(items.map(() => 0), { batchSize, epochs: 1, rng }).map((b) => b.indices.map((i) => items[i]));
}
