/**
 * Level 4 of the CoopHE reward (reference `code_utils`): does main call aux, is main a thin
 * wrapper over it, and the (narrow) deduction for an aux call whose value is dropped.
 */
import { PY_SPACE, PY_WORD, escapeRegExp, pyStrip } from '../../src/util/python-text.js';

const S = `[${PY_SPACE}]`;
const W = `[${PY_WORD}]`;
// Python `\b` before a word character: the previous character is not a (Unicode) word character.
const WORD_START = `(?<!${W})`;

/**
 * True when `main` calls `auxName` (reference `check_aux_function_usage`). A regex over the raw
 * text, so a call in a comment or a string counts too (deliberate).
 */
export function checkAuxFunctionUsage(main: string, auxName = 'aux'): boolean {
  if (!main || !auxName) return false;
  const name = escapeRegExp(auxName);
  const patterns = [
    new RegExp(`${WORD_START}${name}${S}*\\(`, 'u'),
    new RegExp(`=${S}*${name}${S}*\\(`, 'u'),
    new RegExp(`${WORD_START}${name}${S}*\\([^)]*\\)`, 'u'),
  ];
  return patterns.some((p) => p.test(main));
}

/**
 * True when `main` is a thin wrapper over aux (reference `is_wrapper_function`). Blank lines,
 * comments, `def` lines and docstrings are dropped first; then a wrapper is an empty body, a single
 * `return …aux…` line, or `v = aux(…)` followed by exactly `return v`.
 *
 * Docstring skipping keeps the reference's flaw (deliberate): a line that starts with triple quotes
 * while already inside a docstring re-opens it, so a closing `"""` on its own line hides every later
 * line that holds no triple quote, and such a main counts as a wrapper.
 */
export function isWrapperFunction(main: string, auxName = 'aux'): boolean {
  if (!main || !auxName) return false;
  const code: string[] = [];
  let inDocstring = false;
  for (const line of main.split('\n')) {
    const s = pyStrip(line);
    if (!s) continue;
    if (s.startsWith('"""') || s.startsWith("'''")) {
      const quote = s.startsWith('"""') ? '"""' : "'''";
      if (!(s.endsWith(quote) && s.length > 3)) inDocstring = true;
      continue;
    }
    if (inDocstring) {
      if (s.includes('"""') || s.includes("'''")) inDocstring = false;
      continue;
    }
    if (s.startsWith('#') || s.startsWith('def ')) continue;
    code.push(s);
  }
  if (code.length === 0) return true;
  if (code.length === 1) return code[0].startsWith('return ') && code[0].includes(auxName);
  if (code.length === 2) {
    const assign = new RegExp(`(${W}+)${S}*=${S}*${escapeRegExp(auxName)}${S}*\\(`, 'u').exec(code[0]);
    return assign !== null && code[1] === `return ${assign[1]}`;
  }
  return false;
}

/** Result of {@link checkAuxCallWithoutAssignment}. */
export interface IgnoredAuxCalls {
  found: boolean;
  /** `Line N: <stripped line>` for each flagged line (1-based within main). */
  calls: string[];
}

/**
 * The −0.5 deduction's detector (reference `check_aux_call_without_assignment`). Its regexes lack
 * their `*` quantifiers, so it fires only for a stripped line that is exactly `aux`, one whitespace
 * character, `(`, one character other than `)`, `)` — e.g. `aux (n)`; `aux(n)` or `aux (n, x)`
 * pass. Reproduced as is (deliberate: it defines the reward).
 */
export function checkAuxCallWithoutAssignment(main: string, auxName = 'aux'): IgnoredAuxCalls {
  if (!main || !main.includes(auxName)) return { found: false, calls: [] };
  const name = escapeRegExp(auxName);
  const call = new RegExp(`${name}${S}\\([^)]\\)`, 'u');
  // The reference's other two "bad patterns" need leading or trailing whitespace on a stripped
  // line and so never match; only the exact one-character form remains.
  const standalone = new RegExp(`^${name}${S}\\([^)]\\)$`, 'u');
  const calls: string[] = [];
  main.split('\n').forEach((line, index) => {
    const s = pyStrip(line);
    if (!s || s.startsWith('#')) return;
    if (call.test(s) && standalone.test(s)) calls.push(`Line ${index + 1}: ${s}`);
  });
  return { found: calls.length > 0, calls };
}
