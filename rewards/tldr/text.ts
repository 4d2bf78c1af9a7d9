/**
 * The text measurements shared by the TLDR reward and its eval logger, with the reference's
 * Python semantics (see `src/util/python-text.ts`).
 */
import { TLDR_TRANSITION_CATEGORIES } from './constants.js';
import { pyFindWords, pyLower, pySplit } from '../../src/util/python-text.js';

/** Whitespace tokens: `len(text.split())`, 0 for empty or all-whitespace text. */
export function countTokens(text: string): number {
  return pySplit(text).length;
}

/** `re.findall(r"\b\w+\b", text.lower())` with Python's Unicode `\w` and per-code-point lowering. */
export function lowerWords(text: string): string[] {
  return pyFindWords(pyLower(text));
}

/** The set of lowered words, without the given stopwords when a list is passed. */
export function wordSet(text: string, stopwords?: ReadonlySet<string>): Set<string> {
  const set = new Set<string>();
  for (const w of lowerWords(text)) if (!stopwords || !stopwords.has(w)) set.add(w);
  return set;
}

/** Jaccard similarity of the two texts' stopword-free word sets; 1.0 when both sets are empty. */
export function jaccardSimilarity(text1: string, text2: string, stopwords: ReadonlySet<string>): number {
  return jaccardOfSets(wordSet(text1, stopwords), wordSet(text2, stopwords));
}

/** The copy of `s` without the stopwords. */
export function withoutStopwords(s: ReadonlySet<string>, stopwords: ReadonlySet<string>): Set<string> {
  const out = new Set<string>();
  for (const w of s) if (!stopwords.has(w)) out.add(w);
  return out;
}

/** Jaccard similarity of two word sets: 1.0 when both are empty, else |∩| / |∪|. */
export function jaccardOfSets(s1: ReadonlySet<string>, s2: ReadonlySet<string>): number {
  if (s1.size === 0 && s2.size === 0) return 1.0;
  let intersection = 0;
  for (const w of s1) if (s2.has(w)) intersection++;
  const union = s1.size + s2.size - intersection;
  if (union === 0) return 0.0;
  return intersection / union;
}

/** Transition categories and phrases found in a text. */
export interface TransitionMatches {
  /** Category names found, sorted (the reference keeps a set). */
  readonly categories: string[];
  /** Every matching phrase, category by category in the reference's order (repeats included). */
  readonly phrases: string[];
}

/**
 * Finds transition phrases in the lowered text. Deliberately a plain substring test, as in the
 * reference: `so` matches "also", `as` matches "was", and punctuation inside a phrase breaks it.
 */
export function findTransitions(text: string): TransitionMatches {
  const lower = pyLower(text);
  const categories: string[] = [];
  const phrases: string[] = [];
  for (const category of TLDR_TRANSITION_CATEGORIES) {
    let found = false;
    for (const phrase of category.phrases) {
      if (lower.includes(phrase)) {
        found = true;
        phrases.push(phrase);
      }
    }
    if (found) categories.push(category.name);
  }
  categories.sort();
  return { categories, phrases };
}

/** Level-4 transition scale: 0 for no category, else min(0.4 + min((k−1)·0.05, 0.6), 1.0). */
export function transitionScale(numCategories: number): number {
  if (numCategories <= 0) return 0.0;
  let scale = 0.4;
  scale += Math.min((numCategories - 1) * 0.05, 0.6);
  return Math.min(scale, 1.0);
}

/** Level-2 band of the length ratio c2/c1; `null` outside [1.1, 5.0] (the reward stops there). */
export function lengthRatioBand(ratio: number): number | null {
  // The denominators are written as the reference writes them: (1.6 - 1.1) is 0.5000000000000001.
  if (1.6 <= ratio && ratio <= 3.2) return 1.0;
  if (1.1 <= ratio && ratio < 1.6) return (ratio - 1.1) / (1.6 - 1.1);
  if (3.2 < ratio && ratio <= 5.0) return 1.0 - (ratio - 3.2) / (5.0 - 3.2);
  return null;
}

/** Level-3 band of the unique-word ratio; `null` below 1.3 (the reward stops there). */
export function uniqueRatioBand(ratio: number): number | null {
  if (ratio >= 2.0) return 0.5;
  if (1.3 <= ratio && ratio < 2.0) return ((ratio - 1.3) / (2.0 - 1.3)) * 0.5;
  return null;
}
