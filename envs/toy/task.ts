/**
 * A small cooperative word task for tiny random-init models: both agents see a cue word and must
 * answer with the same word from the cue's answer set. Two answers per cue make it a real
 * coordination game (two equilibria per cue) rather than two independent lookups.
 */

/** Cue words, one per task. */
export const toyCues = ['red', 'blue', 'green', 'gold'] as const;
export type ToyCue = (typeof toyCues)[number];

/** The answers that count for each cue. */
export const toyAnswers: Readonly<Record<ToyCue, readonly [string, string]>> = {
  red: ['apple', 'rose'],
  blue: ['sky', 'sea'],
  green: ['leaf', 'frog'],
  gold: ['sun', 'coin'],
};

/** Words that only appear in prompts (`cue <w>`, `partner <w|none>`). */
export const toyPromptWords = ['cue', 'partner', 'none'] as const;

/**
 * The whole vocabulary of prompts and answers (15 words), for
 * `writeTinyTokenizer(dir, { kind: 'word', words: toyWords })`.
 */
export const toyWords: readonly string[] = [
  ...toyPromptWords,
  ...toyCues,
  ...toyCues.flatMap((c) => toyAnswers[c]),
];

/** One toy task. */
export interface ToyTask {
  readonly id: string;
  readonly cue: ToyCue;
}

/** `n` tasks cycling through the cues in order (red, blue, green, gold, red, …). */
export function toyTasks(n: number, prefix = 'toy'): ToyTask[] {
  return Array.from({ length: n }, (_, i) => ({ id: `${prefix}-${i}`, cue: toyCues[i % toyCues.length] }));
}

/** Training tasks: 16 items, each cue four times. */
export const toyTrainTasks: readonly ToyTask[] = toyTasks(16, 'toy-train');
/** Evaluation tasks: each cue once. */
export const toyEvalTasks: readonly ToyTask[] = toyTasks(toyCues.length, 'toy-eval');

/**
 * The word an agent said: the first whitespace-separated piece of the decoded completion,
 * lowercased (word-level tokenizers decode with spaces; special tokens never match a word).
 */
export function toyFirstWord(completion: string): string | null {
  const first = completion.split(/\s+/).find((w) => w !== '');
  return first === undefined ? null : first.toLowerCase();
}

/**
 * Joint score of one turn's words: 0.25 per agent whose word is in the cue's answer set, plus 0.5
 * when both said the same answer. Range [0, 1]; 1 only for an agreed answer.
 */
export function toyScore(cue: ToyCue, word1: string | null, word2: string | null): number {
  const answers: readonly string[] = toyAnswers[cue];
  const ok1 = word1 !== null && answers.includes(word1);
  const ok2 = word2 !== null && answers.includes(word2);
  return (ok1 ? 0.25 : 0) + (ok2 ? 0.25 : 0) + (ok1 && word1 === word2 ? 0.5 : 0);
}

/**
 * Expected {@link toyScore} of a uniform random policy (each agent's first word drawn uniformly
 * and independently from the W = 15 `toyWords`; |S| = 2 answers per cue):
 *   E = 2 · 0.25 · |S|/W + 0.5 · Σ_{s∈S} (1/W)² = 0.5 · 2/15 + 0.5 · 2/225 = 1/15 + 1/225 = 16/225 ≈ 0.0711.
 * The same value is the expected final-turn reward of the multi-turn variant (a mean of such
 * scores). A random-init model that also emits special tokens or stops early scores at most
 * about this, so a learning test can ask for a clear margin above it.
 */
export const toyRandomBaseline: number = (() => {
  const w = toyWords.length;
  const s = 2;
  return (2 * 0.25 * s) / w + (0.5 * s) / (w * w);
})();
