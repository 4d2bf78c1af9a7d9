/**
 * The TLDR coordination reward (LLM_Collab_Writing `tldr_combined_reward`, tasks-reference §1.1):
 * four gated levels, structural → length ratio → vocabulary → style, for a pair (summary,
 * elaboration). The first failing gate stops and returns what has been accumulated.
 */
import { TLDR_STOPWORDS } from './constants.js';
import { pyLen } from '../../src/util/python-text.js';
import {
  countTokens,
  findTransitions,
  jaccardOfSets,
  lengthRatioBand,
  transitionScale,
  uniqueRatioBand,
  wordSet,
  withoutStopwords,
} from './text.js';

/**
 * Every quantity the reward computes, under the reference's variable names (the keys of
 * `vectors/tldr.json → breakdown`). Keys of a level are present only when that level was reached.
 */
export interface TLDRRewardBreakdown {
  /** The reward (also returned by `tldrReward`). */
  reward: number;
  /** Highest level reached, 1..4. */
  last_level_reached: 1 | 2 | 3 | 4;
  token_count1: number;
  token_count2: number;
  /** Unique lowered words of c1, stopwords included (deliberately, despite the docstring). */
  unique_words1: number;
  unique_words2: number;
  /** unique_words2 / unique_words1, or 0.0 when c1 has no words. */
  unique_words_ratio: number;
  c1_in_range: boolean;
  c2_in_range: boolean;
  level1_reward?: number;
  len1?: number;
  len2?: number;
  length_ratio?: number;
  level2_reward?: number;
  proceed_to_level3?: boolean;
  level3_reward?: number;
  proceed_to_level4?: boolean;
  num_categories?: number;
  categories_found?: string[];
  transition_words_found?: string[];
  transition_reward_scale?: number;
  jaccard_score_raw?: number;
  jaccard_score_capped?: number;
  jaccard_score_normalized?: number;
  transition_component?: number;
  jaccard_component?: number;
  level4_reward?: number;
}

/** The reward for one (summary, elaboration) pair with every level's quantities. */
export function tldrRewardBreakdown(completion1: string, completion2: string): TLDRRewardBreakdown {
  let reward = 0.0;
  const tokenCount1 = countTokens(completion1);
  const tokenCount2 = countTokens(completion2);
  const words1 = wordSet(completion1);
  const words2 = wordSet(completion2);
  const uniqueWords1 = words1.size;
  const uniqueWords2 = words2.size;
  const b: TLDRRewardBreakdown = {
    reward,
    last_level_reached: 1,
    token_count1: tokenCount1,
    token_count2: tokenCount2,
    unique_words1: uniqueWords1,
    unique_words2: uniqueWords2,
    unique_words_ratio: uniqueWords1 > 0 ? uniqueWords2 / uniqueWords1 : 0.0,
    c1_in_range: 8 <= tokenCount1 && tokenCount1 <= 256,
    c2_in_range: 8 <= tokenCount2 && tokenCount2 <= 256,
  };

  // Level 1: both completions hold 8..256 whitespace tokens.
  if (!(b.c1_in_range && b.c2_in_range)) return b;
  b.level1_reward = 0.5;
  reward += b.level1_reward;
  b.reward = reward;

  // Level 2: character-length ratio, code points as Python's len().
  b.last_level_reached = 2;
  const len1 = pyLen(completion1);
  const len2 = pyLen(completion2);
  b.len1 = len1;
  b.len2 = len2;
  if (len1 === 0) return b; // unreachable after level 1, kept as the reference has it
  const lengthRatio = len2 / len1;
  b.length_ratio = lengthRatio;
  const level2 = lengthRatioBand(lengthRatio);
  b.level2_reward = level2 ?? 0.0;
  b.proceed_to_level3 = level2 !== null;
  // At exactly 1.1 or 5.0 the band is 0 but the gate still opens (deliberate, as the reference).
  if (level2 === null) return b;
  reward += level2;
  b.reward = reward;

  // Level 3: unique-word ratio (stopwords included).
  b.last_level_reached = 3;
  const level3 = uniqueWords1 === 0 ? null : uniqueRatioBand(b.unique_words_ratio);
  b.level3_reward = level3 ?? 0.0;
  b.proceed_to_level4 = level3 !== null;
  if (level3 === null) return b;
  reward += level3;
  b.reward = reward;

  // Level 4: transition categories in c2 plus a capped Jaccard overlap of content words.
  b.last_level_reached = 4;
  const transitions = findTransitions(completion2);
  b.num_categories = transitions.categories.length;
  b.categories_found = transitions.categories;
  b.transition_words_found = transitions.phrases;
  b.transition_reward_scale = transitionScale(b.num_categories);
  b.jaccard_score_raw = jaccardOfSets(withoutStopwords(words1, TLDR_STOPWORDS), withoutStopwords(words2, TLDR_STOPWORDS));
  b.jaccard_score_capped = Math.min(b.jaccard_score_raw, 0.03);
  b.jaccard_score_normalized = b.jaccard_score_capped / 0.03;
  b.transition_component = 0.4 * b.transition_reward_scale;
  b.jaccard_component = 0.6 * b.jaccard_score_normalized;
  b.level4_reward = b.transition_component + b.jaccard_component;
  reward += b.level4_reward;
  b.reward = reward;
  return b;
}

/**
 * The TLDR reward for one pair: `completion1` from the summary agent, `completion2` from the
 * elaboration agent, each the agent's last-turn completion as generated (no stripping). Range
 * [0, 2.98].
 */
export function tldrReward(completion1: string, completion2: string): number {
  return tldrRewardBreakdown(completion1, completion2).reward;
}

/**
 * The list form the reference takes (`tldr_combined_reward(completions1, completions2)`): one
 * reward per aligned pair. Unequal lengths are an error here (the reference's zip would silently
 * drop the tail).
 */
export function tldrRewards(completions1: readonly string[], completions2: readonly string[]): number[] {
  if (completions1.length !== completions2.length) {
    throw new Error(
      `tldrRewards: completions1 has ${completions1.length} items but completions2 has ${completions2.length}`,
    );
  }
  return completions1.map((c1, i) => tldrReward(c1, completions2[i]));
}
