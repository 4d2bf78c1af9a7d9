/**
 * The TLDR eval logger (LLM_Collab_Writing `loggers/tldr_logger.py` at the vectors' commit,
 * tasks-reference §1.3). It is not the reward and deliberately differs from it: its stopword list
 * has `high` instead of `were`, its unique-word counts exclude stopwords, every level is computed
 * ungated, and its gated total gates on "previous level > 0" (so a level-2 band of exactly 0 stops
 * it, where the reward goes on).
 */
import { TLDR_LOGGER_STOPWORDS } from './constants.js';
import { numpyMean } from './numpy-mean.js';
import { pyLen } from '../../src/util/python-text.js';
import { countTokens, findTransitions, jaccardOfSets, lengthRatioBand, transitionScale, uniqueRatioBand, wordSet } from './text.js';

/** One pair's logger metrics, under the reference's keys (`vectors/tldr.json → logger_metrics`). */
export interface TLDRLoggerMetrics {
  completions1_num_tokens: number;
  completions2_num_tokens: number;
  completions1_length: number;
  completions2_length: number;
  completions1_num_unique_words: number;
  completions2_num_unique_words: number;
  level1_reward: number;
  c1_in_token_range: boolean;
  c2_in_token_range: boolean;
  length_ratio: number;
  level2_reward: number;
  unique_words_ratio: number;
  level3_reward: number;
  jaccard_score: number;
  num_transition_categories: number;
  /** Sorted (the reference lists a set in arbitrary order). */
  transition_categories_found: string[];
  num_transition_words: number;
  jaccard_reward: number;
  transition_reward: number;
  level4_reward: number;
  gated_total_reward: number;
  ungated_total_reward: number;
  tokens_ratio: number;
  optimal_length_ratio: boolean;
  optimal_unique_words_ratio: boolean;
  has_transition_words: boolean;
}

/** The eval logger's metrics for one (summary, elaboration) pair. */
export function tldrLoggerMetrics(completion1: string, completion2: string): TLDRLoggerMetrics {
  const tokens1 = countTokens(completion1);
  const tokens2 = countTokens(completion2);
  const length1 = pyLen(completion1);
  const length2 = pyLen(completion2);
  const content1 = wordSet(completion1, TLDR_LOGGER_STOPWORDS);
  const content2 = wordSet(completion2, TLDR_LOGGER_STOPWORDS);
  const unique1 = content1.size;
  const unique2 = content2.size;

  const c1InRange = 8 <= tokens1 && tokens1 <= 256;
  const c2InRange = 8 <= tokens2 && tokens2 <= 256;
  const level1 = c1InRange && c2InRange ? 0.5 : 0.0;

  const lengthRatio = length1 === 0 ? 0.0 : length2 / length1;
  const level2 = length1 === 0 ? 0.0 : (lengthRatioBand(lengthRatio) ?? 0.0);

  const uniqueRatio = unique1 === 0 ? 0.0 : unique2 / unique1;
  const level3 = unique1 === 0 ? 0.0 : (uniqueRatioBand(uniqueRatio) ?? 0.0);

  const jaccard = jaccardOfSets(content1, content2);
  const transitions = findTransitions(completion2);
  const numCategories = transitions.categories.length;
  const jaccardReward = 0.6 * (Math.min(jaccard, 0.03) / 0.03);
  const transitionReward = 0.4 * transitionScale(numCategories);
  const level4 = jaccardReward + transitionReward;

  let gated = 0.0;
  if (level1 > 0) {
    gated += level1;
    if (level2 > 0) {
      gated += level2;
      if (level3 > 0) {
        gated += level3;
        gated += level4;
      }
    }
  }

  return {
    completions1_num_tokens: tokens1,
    completions2_num_tokens: tokens2,
    completions1_length: length1,
    completions2_length: length2,
    completions1_num_unique_words: unique1,
    completions2_num_unique_words: unique2,
    level1_reward: level1,
    c1_in_token_range: c1InRange,
    c2_in_token_range: c2InRange,
    length_ratio: lengthRatio,
    level2_reward: level2,
    unique_words_ratio: uniqueRatio,
    level3_reward: level3,
    jaccard_score: jaccard,
    num_transition_categories: numCategories,
    transition_categories_found: transitions.categories,
    num_transition_words: transitions.phrases.length,
    jaccard_reward: jaccardReward,
    transition_reward: transitionReward,
    level4_reward: level4,
    gated_total_reward: gated,
    ungated_total_reward: level1 + level2 + level3 + level4,
    tokens_ratio: tokens1 > 0 ? tokens2 / tokens1 : 0.0,
    optimal_length_ratio: 1.6 <= lengthRatio && lengthRatio <= 3.2,
    optimal_unique_words_ratio: uniqueRatio >= 2.0,
    has_transition_words: numCategories > 0,
  };
}

/** The logger over lists, as the reference takes them (lengths must agree). */
export function tldrLoggerMetricsBatch(
  completions1: readonly string[],
  completions2: readonly string[],
): TLDRLoggerMetrics[] {
  if (completions1.length !== completions2.length) {
    throw new Error(
      `tldrLoggerMetricsBatch: completions1 has ${completions1.length} items but completions2 has ${completions2.length}`,
    );
  }
  return completions1.map((c1, i) => tldrLoggerMetrics(c1, completions2[i]));
}

const MEAN_KEYS: ReadonlyArray<readonly [string, keyof TLDRLoggerMetrics]> = [
  ['summary_tokens', 'completions1_num_tokens'],
  ['elaboration_tokens', 'completions2_num_tokens'],
  ['summary_chars', 'completions1_length'],
  ['elaboration_chars', 'completions2_length'],
  ['summary_unique_words', 'completions1_num_unique_words'],
  ['elaboration_unique_words', 'completions2_num_unique_words'],
  ['structure_reward', 'level1_reward'],
  ['length_reward', 'level2_reward'],
  ['diversity_reward', 'level3_reward'],
  ['jaccard_score', 'jaccard_score'],
  ['jaccard_reward', 'jaccard_reward'],
  ['transition_categories', 'num_transition_categories'],
  ['transition_reward', 'transition_reward'],
  ['gated_total_reward', 'gated_total_reward'],
  ['ungated_total_reward', 'ungated_total_reward'],
  ['length_ratio', 'length_ratio'],
  ['tokens_ratio', 'tokens_ratio'],
  ['unique_words_ratio', 'unique_words_ratio'],
  ['optimal_length_rate', 'optimal_length_ratio'],
  ['optimal_unique_words_rate', 'optimal_unique_words_ratio'],
  ['has_transition_words_rate', 'has_transition_words'],
];

/**
 * The logged means (`aggregate_tldr_metrics_for_logging`): `turn_1/tldr/<name>` → mean over
 * samples, with numpy's pairwise summation so the float matches `np.mean`. Empty input → `{}`.
 */
export function tldrAggregateMetrics(metrics: readonly TLDRLoggerMetrics[]): Record<string, number> {
  const out: Record<string, number> = {};
  if (metrics.length === 0) return out;
  for (const [name, key] of MEAN_KEYS) {
    out[`turn_1/tldr/${name}`] = numpyMean(metrics.map((m) => Number(m[key])));
  }
  return out;
}
