/**
 * The few Python 3 `str` and `re` semantics the CoopHE text processing depends on. The reference
 * runs its regexes on `str` patterns, where `\s`, `\w` and `\b` are Unicode-aware and `.` stops
 * only at `\n`; JavaScript differs on each, so patterns here are built from these classes.
 */

/** Body of a character class matching what Python's `\s` (and `str.strip()`) treat as space. */
export const PY_SPACE = '\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';

/** Body of a character class for Python's `\w` on `str`: letters, numbers (Nd/Nl/No), `_`. */
export const PY_WORD = '\\p{L}\\p{N}_';

/** Python's `.` without DOTALL: anything but `\n` (JS `.` also stops at `\r`, U+2028, U+2029). */
export const PY_DOT = '[^\\n]';

const LEADING = new RegExp(`^[${PY_SPACE}]+`, 'u');
const TRAILING = new RegExp(`[${PY_SPACE}]+$`, 'u');

/** Python `s.lstrip()`. */
export function pyLStrip(s: string): string {
  return s.replace(LEADING, '');
}

/** Python `s.strip()`. */
export function pyStrip(s: string): string {
  return pyLStrip(s).replace(TRAILING, '');
}

/** Python `str.splitlines()` (no keepends): splits on every Unicode line boundary. */
export function pySplitLines(s: string): string[] {
  if (s === '') return [];
  const parts = s.split(/\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/u);
  // A trailing boundary does not open an empty last line.
  if (parts.length > 0 && parts[parts.length - 1] === '') parts.pop();
  return parts;
}

/** Escapes `s` for use as a literal inside a RegExp (Python `re.escape` analogue). */
export function escapeRegExp(s: string): string {
  // Only syntax characters: with the `u` flag any other escaped character is an error.
  return s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}

/** Replaces every occurrence of `needle` (a plain string, no `$` patterns). */
export function replaceAllLiteral(s: string, needle: string, replacement: string): string {
  return s.split(needle).join(replacement);
}
