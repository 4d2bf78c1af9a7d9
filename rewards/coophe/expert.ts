/**
 * The `expert_edits` feedback mode's call to an outside model. The model is a user-supplied async
 * function; its reply must contain a JSON object `{"aux": …, "main": …}` (the last one counts).
 */
import { concatenateFunctions, extractImportsFromPrompt } from './extract.js';
import { pyStrip } from '../../src/util/python-text.js';

/** An expert model: prompt in, reply text out (e.g. a chat-completions call). */
export type ExpertModel = (prompt: string) => Promise<string>;

/** Edits proposed by the expert for each agent ("" when every attempt failed). */
export interface ExpertEdits {
  aux: string;
  main: string;
}

/**
 * The review request sent to the expert. It carries the task and the combined program (prompt
 * imports and every function of both completions) and asks for JSON with keys `aux` and `main`.
 * Written for comlrl; the reference's request wording differs (the follow-up prompt built from
 * the reply is the reference's).
 */
export function coopHEExpertPrompt(problemPrompt: string, auxCompletion: string, mainCompletion: string): string {
  const code = concatenateFunctions(auxCompletion, mainCompletion, extractImportsFromPrompt(problemPrompt));
  return [
    'You review Python code written by two cooperating agents for this task:',
    problemPrompt,
    'Agent "aux" writes a helper function aux(...); agent "main" writes the task function and may call aux.',
    '',
    'Reply with one JSON object with the string fields "aux" and "main", each holding the edit you propose for that agent:',
    '- a minimal correct implementation if the function is missing;',
    '- otherwise short edits that would make the unit tests pass;',
    '- "Perfect! No changes needed!" if nothing should change.',
    '',
    'Current code:',
    code,
    '',
  ].join('\n');
}

// JSON objects with at most one level of nested braces.
const JSON_OBJECT = /\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}/g;

/** The last parseable JSON object in `text`; throws when there is none. */
export function lastJsonObject(text: string): Record<string, unknown> {
  const found = text.match(JSON_OBJECT) ?? [];
  for (let i = found.length - 1; i >= 0; i--) {
    try {
      const value: unknown = JSON.parse(found[i]);
      if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
    } catch {
      // try the previous one
    }
  }
  throw new Error('no JSON object found in the expert reply');
}

/** Python `str()` of a JSON value, for non-string edit fields. */
function pyStr(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === null) return 'None';
  if (value === true) return 'True';
  if (value === false) return 'False';
  if (typeof value === 'number') return String(value);
  return JSON.stringify(value);
}

/**
 * Asks the expert up to `retries` times; a thrown error or a reply without JSON counts as a failed
 * attempt. When every attempt fails the edits are empty, as in the reference.
 */
export async function requestExpertEdits(
  expert: ExpertModel,
  problemPrompt: string,
  auxCompletion: string,
  mainCompletion: string,
  retries = 3,
  log?: (message: string) => void,
): Promise<ExpertEdits> {
  const prompt = coopHEExpertPrompt(problemPrompt, auxCompletion, mainCompletion);
  let lastError: unknown;
  for (let attempt = 0; attempt < retries; attempt++) {
    try {
      const parsed = lastJsonObject(await expert(prompt));
      return { aux: 'aux' in parsed ? pyStr(parsed.aux) : '', main: 'main' in parsed ? pyStr(parsed.main) : '' };
    } catch (err) {
      lastError = err;
    }
  }
  log?.(`CoopHE expert edits failed after ${retries} attempts: ${lastError instanceof Error ? lastError.message : String(lastError)}`);
  return { aux: '', main: '' };
}

/** The edit text as it appears in the follow-up prompt (stripped). */
export function formatEdit(edit: string): string {
  return pyStrip(edit);
}
