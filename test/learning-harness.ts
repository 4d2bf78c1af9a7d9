/**
 * The learning tests' shared run loop: fresh tiny agents, a trainer built on them, a measure of the
 * trained policies taken before and after training (the exact expected reward of test/exact-eval.ts
 * in most tests), and cleanup whatever happens; then the same run over seeds and the bars a
 * learning run and its mutation are held to (mean − 3 SE at or above the bar, mean + 3 SE below).
 */
import { expect } from 'vitest';
import type { Agent } from '../src/decpomdp/agent.js';
import type { RolloutNode } from '../trainers/magrpo/trainer.js';
import { toyWords } from '../envs/toy/index.js';
import { lowerBound, meanAndSE, upperBound } from './exact-eval.js';
import { disposeAgents, negatedReturns, tinyAgents, type TinyAgentSpec } from './magrpo-helpers.js';

/** Two tiny word-level qwen3 agents on the toy vocabulary (hidden 32, 1 layer), `a0` from seed a and `a1` from seed b. */
export function toyAgentPair(a: number, b: number): TinyAgentSpec[] {
  return [
    { name: 'a0', arch: 'qwen3', seed: a, words: [...toyWords], hiddenSize: 32, numLayers: 1 },
    { name: 'a1', arch: 'qwen3', seed: b, words: [...toyWords], hiddenSize: 32, numLayers: 1 },
  ];
}

/** Sampling under which test/exact-eval.ts is exact: one token at temperature 1, no top-p / top-k. */
export const ONE_WORD_SAMPLING = { max_new_tokens: 1, temperature: 1, top_p: 1, top_k: 0 } as const;

/** What the harness needs of a trainer. */
export interface TrainableRun {
  train(): Promise<unknown>;
  dispose(): void;
}

/** One learning run. */
export interface LearningRunOptions<Tr extends TrainableRun, M> {
  /** Where the agents' checkpoints are written (one folder per agent). */
  readonly dir: string;
  readonly agents: readonly TinyAgentSpec[];
  /** The trainer on the freshly loaded agents. */
  readonly trainer: (agents: Agent[]) => Tr;
  /** Taken before and after training (after `afterTrain`). */
  readonly measure?: (agents: readonly Agent[]) => Promise<M>;
  /** Run after `train()` (e.g. a final `evaluate()`). */
  readonly afterTrain?: (trainer: Tr) => Promise<unknown>;
}

/** A run's measures before and after training, and its wall time. */
export interface LearningRunResult<M> {
  readonly before: M | undefined;
  readonly after: M | undefined;
  readonly seconds: number;
}

/** Builds the agents and the trainer, measures, trains, measures again; always frees both. */
export async function learningRun<Tr extends TrainableRun, M = number>(opts: LearningRunOptions<Tr, M>): Promise<LearningRunResult<M>> {
  const agents = await tinyAgents(opts.dir, opts.agents);
  const t0 = performance.now();
  let trainer: Tr | undefined;
  try {
    trainer = opts.trainer(agents);
    const before = await opts.measure?.(agents);
    await trainer.train();
    await opts.afterTrain?.(trainer);
    const after = await opts.measure?.(agents);
    return { before, after, seconds: (performance.now() - t0) / 1000 };
  } finally {
    trainer?.dispose();
    disposeAgents(agents);
  }
}

/** `run(seed)` for each seed in turn (the runs share 2 cores: never in parallel). */
export async function overSeeds(seeds: readonly number[], run: (seed: number) => Promise<number>): Promise<number[]> {
  const out: number[] = [];
  for (const seed of seeds) out.push(await run(seed));
  return out;
}

/** The learning runs clear the bar: mean − 3 SE ≥ bar. */
export function expectClears(label: string, finals: readonly number[], bar: number): void {
  console.log(`${label}: ${finals.map((f) => f.toFixed(3)).join(', ')}; ${JSON.stringify(meanAndSE(finals))}, mean − 3 SE = ${lowerBound(finals).toFixed(3)} (bar ${bar})`);
  expect(lowerBound(finals)).toBeGreaterThanOrEqual(bar);
}

/** The mutation's runs fall short: each run, and mean + 3 SE, below the bar. */
export function expectFallsShort(label: string, finals: readonly number[], bar: number): void {
  console.log(`${label}: ${finals.map((f) => f.toFixed(3)).join(', ')}; ${JSON.stringify(meanAndSE(finals))}, mean + 3 SE = ${upperBound(finals).toFixed(4)} (bar ${bar})`);
  for (const f of finals) expect(f).toBeLessThan(bar);
  expect(upperBound(finals)).toBeLessThan(bar);
}

/** A trainer of the MAGRPO family: anything that expands a rollout tree per task. */
export interface TreeTrainer<T, S> {
  rolloutTree(task: T): Promise<RolloutNode<S>>;
}

/**
 * The sign-flipped mutation for any trainer of the MAGRPO family (MAGRPO, the REINFORCE family,
 * CentralizedMAGRPO): its trees are expanded with the true rewards, then their returns are negated
 * before the samples are taken. In the modes linear in the returns (mean, raw, rloo; and under the
 * z-score) that is exactly −A; under max it is ReMax on the negated reward (the baseline becomes
 * the group's worst return), so each update still pushes away from the better completions.
 */
export function signFlipAdvantages<T, S, Tr extends TreeTrainer<T, S>>(trainer: Tr): Tr {
  const expand = trainer.rolloutTree.bind(trainer);
  trainer.rolloutTree = async (task: T) => negatedReturns(await expand(task));
  return trainer;
}
