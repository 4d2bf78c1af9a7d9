/**
 * TLDR agent prompts (LLM_Collab_Writing formatters, tasks-reference §1.4). The task is
 * single-turn with no external feedback; the raw strings are the model input (no chat template in
 * the Writing scripts). Both texts end with a newline.
 */
import { PY_SPACE, pyLen, pySlice, pyStrip } from '../../src/util/python-text.js';

/** What a formatter returns for an empty or missing `prompt` field. */
export const TLDR_MISSING_PROMPT = 'Error: No prompt provided.';

/** Agent 1 (concise summary) prompt for a dataset row's `prompt` (the Reddit post). */
export function tldrSummaryPrompt(prompt: string | null | undefined): string {
  if (!prompt) return TLDR_MISSING_PROMPT;
  return (
    'Create a concise summary response to this post.\n\n' +
    `Query:\n${prompt}\n\n` +
    'IMPORTANT INSTRUCTIONS:\n' +
    '- Provide a brief, focused summary in one sentence or a few sentences\n' +
    '- Be factual and informative\n'
  );
}

/** Agent 2 (detailed elaboration) prompt for a dataset row's `prompt`. */
export function tldrElaborationPrompt(prompt: string | null | undefined): string {
  if (!prompt) return TLDR_MISSING_PROMPT;
  return (
    'Create a detailed summary response to this post.\n\n' +
    `Original Query:\n${prompt}\n\n` +
    'IMPORTANT INSTRUCTIONS:\n' +
    '- Use more unique words\n' +
    '- Use some transition words to improve flow\n'
  );
}

/** The two agents' formatters over a `trl-lib/tldr` row, in agent order. */
export const tldrFormatters: readonly [
  (row: { prompt?: string | null }) => string,
  (row: { prompt?: string | null }) => string,
] = [(row) => tldrSummaryPrompt(row.prompt), (row) => tldrElaborationPrompt(row.prompt)];

/** Number of turns the TLDR task allows; the reference trainers raise for any other value. */
export const TLDR_NUM_TURNS = 1;

/** Throws, as the reference trainers do, unless `numTurns` is 1 (TLDR has no external feedback). */
export function checkTldrNumTurns(numTurns: number): void {
  if (numTurns !== TLDR_NUM_TURNS) {
    throw new Error(`num_turns: TLDR is single-turn (no external feedback); set num_turns to 1, got ${numTurns}`);
  }
}

/**
 * The completion each agent's reward input is taken from: its last-turn completion as is
 * (no stripping). With one turn this is the only completion.
 */
export function tldrRewardInput(turnCompletions: readonly string[]): string {
  return turnCompletions.length > 0 ? turnCompletions[turnCompletions.length - 1] : '';
}

const PARAGRAPH_SPLIT = '[PARAGRAPH_SPLIT]';
// Python's `\s` is its Unicode whitespace set, not JS `\s`.
const PARA2 = new RegExp(`Paragraph 2:[${PY_SPACE}]*`, 'iu');
const LEADING_PARA1 = new RegExp(`^Paragraph 1:[${PY_SPACE}]*`, 'iu');
const LEADING_PARA2 = new RegExp(`^Paragraph 2:[${PY_SPACE}]*`, 'iu');

/**
 * The GRPO single-agent baseline's split of one response into (summary, elaboration): strip; split
 * on the first `[PARAGRAPH_SPLIT]`; else at a case-insensitive `Paragraph 2:`; else at
 * `len // 3` code points (at least 1); then drop leading `Paragraph 1:` / `Paragraph 2:` labels.
 */
export function splitGrpoResponse(response: string): [string, string] {
  const text = pyStrip(response);
  let para1: string;
  let para2: string;
  const at = text.indexOf(PARAGRAPH_SPLIT);
  if (at >= 0) {
    para1 = pyStrip(text.slice(0, at));
    para2 = pyStrip(text.slice(at + PARAGRAPH_SPLIT.length));
  } else {
    const m = PARA2.exec(text);
    if (m) {
      para1 = pyStrip(text.slice(0, m.index));
      para2 = pyStrip(text.slice(m.index + m[0].length));
    } else {
      const mid = Math.floor(pyLen(text) / 3) || 1;
      para1 = pyStrip(pySlice(text, 0, mid));
      para2 = pyStrip(pySlice(text, mid));
    }
  }
  para1 = para1.replace(LEADING_PARA1, '');
  para2 = para2.replace(LEADING_PARA2, '');
  return [para1, para2];
}
