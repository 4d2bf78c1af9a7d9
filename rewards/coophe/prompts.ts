/**
 * First-turn prompts of the two CoopHE agents (reference `aux_function_formatter` and
 * `main_function_formatter`). Plain strings, no chat template; `{prompt}` is the raw problem.
 */
import { PY_SPACE, PY_WORD, pyStrip } from '../../src/util/python-text.js';
import type { CoopHEProblem } from './problem.js';

/** What both formatters return when the problem has no parameters or no entry point. */
export const COOPHE_PROMPT_ERROR = 'Error: Could not extract function information from prompt.';

const SIGNATURE = new RegExp(`def[${PY_SPACE}]+[${PY_WORD}]+[${PY_SPACE}]*\\(([^)]+)\\)`, 'u');

/**
 * Parameters of the first `def` in the problem prompt, split on commas and stripped. Annotations
 * with commas (`Dict[str, int]`) are split too (deliberate: the reference does the same).
 */
export function extractFunctionParams(prompt: string): string[] {
  const match = SIGNATURE.exec(prompt);
  if (!match) return [];
  return match[1]
    .split(',')
    .map((p) => pyStrip(p))
    .filter((p) => p !== '');
}

const INSTRUCTIONS = [
  'IMPORTANT INSTRUCTIONS:',
  '- Output ONLY the function code, no explanations or examples',
  '- Do NOT include markdown code blocks (```python)',
  '- Do NOT include any text before or after the function',
  '- Do NOT include test cases or example usage',
];

/** The closing format block of both prompts, around the agent's `def` line. */
function formatBlock(defLine: string): string[] {
  // The reference writes "\n" escapes inside its template: the format block has no indentation.
  return ['Your output should follow this format:', '', defLine, ' # your function code here', 'return result', ''];
}

/** The aux (helper) agent's first-turn prompt. */
export function coopHEAuxPrompt(problem: Pick<CoopHEProblem, 'prompt' | 'entry_point'>): string {
  const params = extractFunctionParams(problem.prompt);
  if (params.length === 0 || !problem.entry_point) return COOPHE_PROMPT_ERROR;
  return [
    'Create a helper function for this coding problem.',
    '',
    'Problem:',
    problem.prompt,
    '',
    ...INSTRUCTIONS,
    "- Create a helper function named 'aux' that can assist the main function",
    '- The function should return useful data for solving the problem',
    '',
    ...formatBlock('def aux(...):'),
  ].join('\n');
}

/** The main agent's first-turn prompt. */
export function coopHEMainPrompt(problem: Pick<CoopHEProblem, 'prompt' | 'entry_point'>): string {
  const params = extractFunctionParams(problem.prompt);
  if (params.length === 0 || !problem.entry_point) return COOPHE_PROMPT_ERROR;
  return [
    'Solve this coding problem by implementing the required function.',
    '',
    'Problem:',
    problem.prompt,
    '',
    'You have access to a helper function: aux(...)',
    '',
    ...INSTRUCTIONS,
    '- Do NOT redefine the aux() function',
    `- Implement ONLY the '${problem.entry_point}' function as specified`,
    '- You can call aux() to assign value to a variable within your function if helpful',
    '',
    ...formatBlock(`def ${problem.entry_point}(${params.join(', ')}):`),
  ].join('\n');
}
