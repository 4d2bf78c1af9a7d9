/**
 * Text processing of the CoopHE reward (reference `code_utils`): cleaning model output down to
 * function blocks, picking one function by name, prompt imports, the combined program and the
 * test asserts. Every quirk below is deliberate: it decides which code the reward runs.
 */
import { PY_DOT, PY_SPACE, PY_WORD, escapeRegExp, pyLStrip, pyStrip, replaceAllLiteral } from '../../src/util/python-text.js';

const S = `[${PY_SPACE}]`;
const W = `[${PY_WORD}]`;

const FENCE_PYTHON = new RegExp(`\`\`\`python${S}*\\n?`, 'gu');
const FENCE = new RegExp(`\`\`\`${S}*\\n?`, 'gu');
const DEF_LINE = new RegExp(`^${S}*def${S}+${W}+${S}*\\(`, 'u');
const ANY_DEF = new RegExp(`def${S}+${W}+${S}*\\(`, 'u');
// "Prose" lines: capitalised word start, sentence punctuation at the end.
const PROSE = new RegExp(`^[A-Z][a-z]${PY_DOT}*[.!?:]$`, 'u');
const CODE_MARKERS = ['def ', 'return ', 'if ', 'for ', 'while ', '=', '(', ')', '[', ']'];
const RETURN = new RegExp(`return${S}+`, 'u');
const FROM_IMPORT = new RegExp(`^from${S}+[${PY_WORD}.]+${S}+import${S}+${PY_DOT}*$`, 'u');
const PLAIN_IMPORT = new RegExp(`^import${S}+[${PY_WORD}.,${PY_SPACE}]+$`, 'u');
const CHECK_BODY = /def check\(candidate\):([\s\S]*?)(?=\n\ndef|$)/;
const ASSERT_WITH_CANDIDATE = new RegExp(`^assert${S}+${PY_DOT}*candidate`, 'u');

function indentOf(line: string): number {
  return line.length - pyLStrip(line).length;
}

function isBlockLine(line: string, baseIndent: number): boolean {
  return line.startsWith(' '.repeat(baseIndent + 1)) || line.startsWith('\t');
}

/**
 * Reduces a model completion to its function definitions (reference `cleanup_code`).
 *
 * Markdown fences are removed; a `def` line opens a block and closes the previous one — nested
 * defs included, so a nested function splits its parent (deliberate). Inside a block, blank lines,
 * lines indented past the def (or by a tab) and docstring openers (with the rest of a multi-line
 * docstring) are kept; anything else closes the block and is dropped, so imports, globals,
 * decorators, classes and top-level calls disappear. Prose-looking lines are then dropped.
 * Returns "" when no `def` is left.
 */
export function cleanupCode(code: string): string {
  if (!code) return '';
  const text = code.replace(FENCE_PYTHON, '').replace(FENCE, '');
  const lines = text.split('\n');
  const blocks: string[] = [];
  let current: string[] = [];
  let inFunction = false;
  let baseIndent = 0;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const stripped = pyStrip(line);
    if (DEF_LINE.test(line)) {
      if (inFunction && current.length > 0) blocks.push(current.join('\n'));
      current = [line];
      inFunction = true;
      baseIndent = indentOf(line);
    } else if (inFunction) {
      if (stripped === '' || isBlockLine(line, baseIndent)) {
        current.push(line);
      } else if (stripped.startsWith('"""') || stripped.startsWith("'''")) {
        current.push(line);
        const quote = stripped.startsWith('"""') ? '"""' : "'''";
        if (!(stripped.endsWith(quote) && stripped.length > 3)) {
          // Multi-line docstring at the def's level: take lines up to the one holding the quote.
          i++;
          while (i < lines.length) {
            current.push(lines[i]);
            if (lines[i].includes(quote)) break;
            i++;
          }
        }
      } else {
        if (current.length > 0) blocks.push(current.join('\n'));
        current = [];
        inFunction = false;
      }
    }
  }
  if (inFunction && current.length > 0) blocks.push(current.join('\n'));

  const kept = blocks
    .join('\n\n')
    .split('\n')
    .filter((line) => {
      const s = pyStrip(line);
      const prose =
        s !== '' &&
        !s.startsWith('#') &&
        !s.startsWith('"""') &&
        !s.startsWith("'''") &&
        // The marker test looks at the unstripped line, as the reference does.
        !CODE_MARKERS.some((m) => line.includes(m)) &&
        PROSE.test(s);
      return !prose;
    });
  const result = pyStrip(kept.join('\n'));
  return ANY_DEF.test(result) ? result : '';
}

/**
 * The first function named `name` in the cleaned `code` (reference `extract_specific_function`):
 * from its def line up to the first line that is neither blank nor indented past the def. A
 * later def of the same name inside it (nested) restarts the capture, as in the reference.
 */
export function extractSpecificFunction(code: string, name: string): string {
  if (!code || !name) return '';
  const cleaned = cleanupCode(code);
  const target = new RegExp(`^${S}*def${S}+${escapeRegExp(name)}${S}*\\(`, 'u');
  let lines: string[] = [];
  let inTarget = false;
  let baseIndent = 0;
  for (const line of cleaned.split('\n')) {
    if (target.test(line)) {
      lines = [line];
      inTarget = true;
      baseIndent = indentOf(line);
    } else if (inTarget) {
      if (pyStrip(line) === '' || isBlockLine(line, baseIndent)) lines.push(line);
      else break;
    }
  }
  return pyStrip(lines.join('\n'));
}

/** Result of the level-1 check for one function. */
export interface FunctionDefinitionCheck {
  passed: boolean;
  message: string;
}

/**
 * Level 1 for one function (reference `check_function_definition`): defined, and its text
 * contains `return` followed by whitespace anywhere — comments and docstrings count, while
 * `return(x)` does not (deliberate).
 */
export function checkFunctionDefinition(code: string, name: string, description: string): FunctionDefinitionCheck {
  const func = extractSpecificFunction(code, name);
  if (!func) return { passed: false, message: `${description} not defined` };
  if (!RETURN.test(func)) return { passed: false, message: `${description} missing return statement` };
  return { passed: true, message: `${description} properly defined with return statement` };
}

/** Import lines of the problem prompt (stripped, deduplicated, in order), joined by newlines. */
export function extractImportsFromPrompt(prompt: string): string {
  if (!prompt) return '';
  const seen = new Set<string>();
  for (const raw of prompt.split('\n')) {
    const line = pyStrip(raw);
    if (FROM_IMPORT.test(line) || PLAIN_IMPORT.test(line)) seen.add(line);
  }
  return [...seen].join('\n');
}

/** The program the reward runs: imports, cleaned aux, cleaned main, blank-line separated. */
export function concatenateFunctions(aux: string, main: string, imports = ''): string {
  const parts: string[] = [];
  if (imports) parts.push(imports);
  const auxClean = cleanupCode(aux);
  if (auxClean) parts.push(auxClean);
  const mainClean = cleanupCode(main);
  if (mainClean) parts.push(mainClean);
  return parts.join('\n\n');
}

/**
 * The asserts of `def check(candidate):` (reference `extract_test_cases`): its body runs to the
 * first `\n\ndef` or the end; every stripped line that starts with `assert` + whitespace and
 * mentions `candidate` is kept once, and every `candidate` substring — inside string literals
 * too (deliberate) — becomes the entry point.
 *
 * The reference tries four patterns in turn; the last (`assert\s+…candidate…`) accepts every line
 * the first three accept, so it alone decides.
 */
export function extractTestCases(testCode: string, entryPoint: string): string[] {
  if (!testCode || !entryPoint) return [];
  const match = CHECK_BODY.exec(testCode);
  if (!match) return [];
  const seen = new Set<string>();
  for (const raw of pyStrip(match[1]).split('\n')) {
    const line = pyStrip(raw);
    if (line.startsWith('assert') && line.includes('candidate') && ASSERT_WITH_CANDIDATE.test(line)) {
      seen.add(line);
    }
  }
  return [...seen].map((t) => replaceAllLiteral(t, 'candidate', entryPoint));
}
