/**
 * CoopHE's centralized adapter (CentralizedMAGRPO, single-turn): one policy writes both the helper
 * `aux` and the entry-point function. The joint prompt gives the auxiliary and main agents' own
 * prompts and asks for the two snippets inside `<auxiliary>` … `</auxiliary>` and `<main>` …
 * `</main>`, showing the entry point's signature from the problem.
 *
 * Parsing keeps CoMLRL's CoopHE protocol, which is lenient because code models stray from the
 * format. The readers below are tried in order, and the first that finds both snippets wins:
 *   1. the tags;
 *   2. heading lines `Auxiliary:` / `Aux code:` / `Main output:` (optionally `#`-prefixed), each
 *      snippet running to the other heading or the end;
 *   3. a JSON object with `auxiliary` (or `aux`) and `main` (also inside a ```json fence);
 *   4. the first two fenced code blocks;
 *   5. the functions themselves: `def aux(` and `def <entry_point>(` (else the first other `def`),
 *      each running until the next top-level line that starts a def/class or a section label.
 * When no reader finds both, each role takes the first snippet any reader found for it ('' when
 * none); when nothing at all is found the completion does not parse (both roles respond with '').
 * A snippet wrapped whole in a ```python fence is unwrapped, and every snippet is trimmed.
 */
import type { CoopHERow } from '../../src/data/schemas.js';
import type { CentralizedAdapter } from '../../src/decpomdp/centralized.js';
import type { CoMLRLState } from '../../src/decpomdp/comlrl-adapter.js';

/** Two snippets (undefined: this reader did not find that role's). */
type Found = readonly [aux: string | undefined, main: string | undefined];

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** `def name(params)` of the entry point, read from the problem's prompt. */
export function coopHEMainSignature(row: Pick<CoopHERow, 'prompt' | 'entry_point'>): string {
  const name = row.entry_point.trim();
  const declared = new RegExp(`def\\s+${escapeRegExp(name)}\\s*\\(([^)]*)\\)`).exec(row.prompt);
  return declared !== null ? `def ${name}(${declared[1].trim()})` : `def ${name}(...)`;
}

function tagged(text: string): Found {
  const section = (tag: string) => new RegExp(`<\\s*${tag}\\s*>([\\s\\S]*?)<\\s*/\\s*${tag}\\s*>`, 'i').exec(text)?.[1];
  return [section('auxiliary'), section('main')];
}

function headed(text: string): Found {
  const aux = /^[ \t]*(?:#{1,6}[ \t]*)?(?:auxiliary|aux)[ \t]*(?:code|output)?[ \t]*:[ \t]*$/im.exec(text);
  const main = /^[ \t]*(?:#{1,6}[ \t]*)?main[ \t]*(?:code|output)?[ \t]*:[ \t]*$/im.exec(text);
  const after = (m: RegExpExecArray) => m.index + m[0].length;
  if (aux === null || main === null) return [aux !== null ? text.slice(after(aux)) : undefined, main !== null ? text.slice(after(main)) : undefined];
  return aux.index < main.index ? [text.slice(after(aux), main.index), text.slice(after(main))] : [text.slice(after(aux)), text.slice(after(main), aux.index)];
}

function json(text: string): Found {
  let value = text.trim();
  const fenced = /^```(?:json)?\s*([\s\S]*?)```$/i.exec(value);
  if (fenced !== null) value = fenced[1].trim();
  const candidates = [value];
  const open = value.indexOf('{');
  const close = value.lastIndexOf('}');
  if (open >= 0 && close > open) candidates.push(value.slice(open, close + 1));
  for (const c of candidates) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(c);
    } catch {
      continue;
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) continue;
    const fields: Record<string, unknown> = { ...parsed };
    const aux = fields.auxiliary ?? fields.aux;
    const main = fields.main;
    // Python's str() of a non-string value; null counts as absent, as there.
    const str = (v: unknown) => (v === undefined || v === null ? undefined : typeof v === 'string' ? v : JSON.stringify(v));
    if (str(aux) !== undefined || str(main) !== undefined) return [str(aux), str(main)];
  }
  return [undefined, undefined];
}

function fencedBlocks(text: string): Found {
  const blocks = [...text.matchAll(/```(?:python)?\s*([\s\S]*?)```/gi)].map((m) => m[1]);
  return blocks.length >= 2 ? [blocks[0], blocks[1]] : [undefined, undefined];
}

/** The function `name` from its `def` line to the next line at or left of its indent that opens a def/class or a section label. */
function pythonFunction(text: string, name: string): string | undefined {
  const start = new RegExp(`^[ \\t]*def\\s+${escapeRegExp(name)}\\s*\\(`, 'm').exec(text);
  if (start === null) return undefined;
  const lines = text.slice(start.index).split(/\r\n|\r|\n/);
  const indentOf = (line: string) => line.length - line.replace(/^[ \t]+/, '').length;
  const base = indentOf(lines[0]);
  const kept = [lines[0]];
  for (const line of lines.slice(1)) {
    const s = line.trim();
    if (s !== '' && indentOf(line) <= base && (/^(def|class)\s+/.test(s) || /^<?\/?(?:auxiliary|main)>?:?$/i.test(s) || /^(?:auxiliary|aux|main)\s*(?:code|output)?\s*:/i.test(s))) break;
    kept.push(line);
  }
  return kept.join('\n').trim();
}

function functions(text: string, entryPoint: string): Found {
  const aux = pythonFunction(text, 'aux');
  let main = entryPoint !== '' ? pythonFunction(text, entryPoint) : undefined;
  if (main === undefined) {
    const other = [...text.matchAll(/^[ \t]*def\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(/gm)].map((m) => m[1]).find((n) => n !== 'aux');
    if (other !== undefined) main = pythonFunction(text, other);
  }
  return [aux, main];
}

/** A snippet trimmed, and unwrapped when a ```python fence wraps it whole. */
function clean(snippet: string): string {
  const v = snippet.trim();
  const fenced = /^```(?:python)?\s*([\s\S]*?)```$/i.exec(v);
  return fenced !== null ? fenced[1].trim() : v;
}

/** CoopHE's [aux, main] from a joint completion (see the module comment); null when nothing is found. */
export function parseCoopHECompletion(completion: string, entryPoint: string): [string, string] | null {
  const readers: ((text: string) => Found)[] = [tagged, headed, json, fencedBlocks, (t) => functions(t, entryPoint.trim())];
  let firstAux: string | undefined;
  let firstMain: string | undefined;
  for (const read of readers) {
    const [a, m] = read(completion).map((s) => (s === undefined ? undefined : clean(s)));
    firstAux ??= a;
    firstMain ??= m;
    if (a !== undefined && m !== undefined) return [a, m];
  }
  if (firstAux === undefined && firstMain === undefined) return null;
  return [firstAux ?? '', firstMain ?? ''];
}

/** See the module comment. */
export const coopHECentralizedAdapter: CentralizedAdapter<CoMLRLState<CoopHERow>> = {
  buildPrompt(state, rolePrompts) {
    if (rolePrompts.length !== 2) throw new Error(`coophe centralized adapter: CoopHE has 2 roles (auxiliary, main), got ${rolePrompts.length} prompts`);
    return [
      'You write the code of two cooperating agents at once: the auxiliary agent and the main agent. Their two snippets run together.',
      `The auxiliary agent's own prompt:\n${rolePrompts[0]}`,
      `The main agent's own prompt:\n${rolePrompts[1]}`,
      [
        'Rules:',
        '- Write two complete snippets: the auxiliary one defines the helper aux(...); the main one defines only the function the problem asks for, and may call aux.',
        '- No placeholders (required_function, ..., result, pass), explanations, examples, tests or markdown fences.',
        '- Put each snippet inside its tags, exactly as below, so the two can be told apart.',
      ].join('\n'),
      `<auxiliary>\ndef aux(...):\n    # the helper\n</auxiliary>\n\n<main>\n${coopHEMainSignature(state.item)}:\n    # the solution, which may call aux\n</main>`,
    ].join('\n\n');
  },
  parseCompletion(completion, state, numRoles) {
    if (numRoles !== 2) throw new Error(`coophe centralized adapter: CoopHE has 2 roles (auxiliary, main), got ${numRoles}`);
    return parseCoopHECompletion(completion, state.item.entry_point);
  },
};
