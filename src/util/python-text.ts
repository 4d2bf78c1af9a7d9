/**
 * Python 3 `str` and `re` semantics that the reference rewards depend on and that JavaScript does
 * not share. Each helper reproduces one CPython 3.11 behaviour exactly, so that the TLDR, HouseBuild
 * and CoopHE rewards agree with the originals on token counts, word sets, stripped lines, parsed
 * integers and printed floats. The reference runs its regexes on `str` patterns, where `\s`, `\w`
 * and `\b` are Unicode-aware and `.` stops only at `\n`; JavaScript differs on each, so patterns are
 * built from the `PY_*` classes below. Generic (no task knowledge), hence in src.
 */

/**
 * Body of a character class of the characters for which Python's `str.isspace()` is true (what
 * `\s` and `str.strip()` treat as space: bidirectional class WS/B/S or category Zs). Deliberately
 * not JS `\s`: that adds U+FEFF and lacks U+001C–U+001F and U+0085.
 */
export const PY_SPACE = '\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';

/**
 * Body of a character class for Python's `\w` on `str`: isalnum() (letters L*, and anything
 * numeric: Nd/Nl/No) or `_`. Deliberately not JS `\w`, which is ASCII-only even with the `u` flag;
 * combining marks are not `\w`.
 */
export const PY_WORD = '\\p{L}\\p{N}_';

/** Python's `.` without DOTALL: anything but `\n` (JS `.` also stops at `\r`, U+2028, U+2029). */
export const PY_DOT = '[^\\n]';

const WS_RUN_G = new RegExp(`[${PY_SPACE}]+`, 'gu');

/** True for a UTF-16 unit that is Python whitespace (all of them are in the BMP). */
function isSpaceUnit(c: number): boolean {
  return (
    (c >= 0x09 && c <= 0x0d) ||
    (c >= 0x1c && c <= 0x20) ||
    c === 0x85 ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000
  );
}

/** True when `ch` (one code point) is Python whitespace. */
export function pyIsSpace(ch: string): boolean {
  return ch.length === 1 && isSpaceUnit(ch.charCodeAt(0));
}

/** Python `s.split()` with no argument: split on runs of Python whitespace, no empty pieces. */
export function pySplit(s: string): string[] {
  const trimmed = pyStrip(s);
  if (trimmed === '') return [];
  return trimmed.split(WS_RUN_G);
}

/** Python `s.strip()` (no argument). */
export function pyStrip(s: string): string {
  return pyRStrip(pyLStrip(s));
}

/** Python `s.lstrip()` (no argument). */
export function pyLStrip(s: string): string {
  let i = 0;
  while (i < s.length && isSpaceUnit(s.charCodeAt(i))) i++;
  return i === 0 ? s : s.slice(i);
}

/** Python `s.rstrip()` (no argument). */
export function pyRStrip(s: string): string {
  // A scan, not /\s+$/: that regex is quadratic on long inner whitespace runs.
  let j = s.length;
  while (j > 0 && isSpaceUnit(s.charCodeAt(j - 1))) j--;
  return j === s.length ? s : s.slice(0, j);
}

/**
 * Python `s.lower()`. CPython applies the same contextual Final_Sigma rule as JS (`ΟΔΟΣ` → `οδος`,
 * checked against the vectors) and the same full mappings (`İ` → `i̇`, two code points), so JS
 * `toLowerCase()` (locale-free) is already exact; this wrapper names the dependency.
 */
export function pyLower(s: string): string {
  return s.toLowerCase();
}

/** Python `len(s)`: code points, not UTF-16 units (an astral emoji counts once). */
export function pyLen(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length - 1; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}

/** Python `s[start:end]`: a slice by code points, as Python slices strings. */
export function pySlice(s: string, start: number, end?: number): string {
  return [...s].slice(start, end).join('');
}

const PY_WORD_RUN = new RegExp(`[${PY_WORD}]+`, 'gu');

/** Python `re.findall(r"\b\w+\b", s)`: the maximal runs of Python word characters. */
export function pyFindWords(s: string): string[] {
  return s.match(PY_WORD_RUN) ?? [];
}

// str.splitlines() boundaries: \n \r \r\n \v \f \x1c \x1d \x1e \x85 \u2028 \u2029.
const LINE_BREAK = /\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/;

/** Python `s.splitlines()` (keepends=False): splits on every Unicode line boundary; a trailing one opens no extra empty line. */
export function pySplitLines(s: string): string[] {
  if (s === '') return [];
  const parts = s.split(new RegExp(LINE_BREAK.source, 'g'));
  if (parts.length > 1 && parts[parts.length - 1] === '') parts.pop();
  return parts;
}

const ASCII_INT = /^[+-]?[0-9]{1,15}$/;
const PY_INT_LITERAL = /^([+-]?)(\p{Nd}+(?:_\p{Nd}+)*)$/u;
const ND = /^\p{Nd}$/u;
const digitValueCache = new Map<number, number>();

/**
 * Decimal value of a Unicode Nd code point. Unicode encodes every decimal digit set as a run of ten
 * consecutive code points 0..9, and adjacent sets tile exactly, so the value is the offset from the
 * start of the contiguous Nd run modulo 10.
 */
function digitValue(cp: number): number {
  if (cp >= 0x30 && cp <= 0x39) return cp - 0x30;
  const cached = digitValueCache.get(cp);
  if (cached !== undefined) return cached;
  let start = cp;
  while (start > 0 && ND.test(String.fromCodePoint(start - 1))) start--;
  const value = (cp - start) % 10;
  digitValueCache.set(cp, value);
  return value;
}

/**
 * Python `int(s)` for base 10, or null where Python raises ValueError. Deliberately as permissive as
 * Python: surrounding whitespace, a `+`/`-` sign, single underscores between digits (`0_5`) and any
 * Unicode decimal digits (`٥`) are accepted; `1.0`, `0x5`, `1__0` and more than 4300 digits are
 * not. Values beyond 2^53 lose precision (the callers only compare them with a small bbox).
 */
export function pyInt(s: string): number | null {
  // Fast path for plain ASCII integers, the usual case.
  if (ASCII_INT.test(s)) {
    const v = Number(s);
    return v === 0 ? 0 : v;
  }
  const m = PY_INT_LITERAL.exec(pyStrip(s));
  if (!m) return null;
  // CPython 3.11 refuses decimal strings of more than 4300 digits (sys.int_info.default_max_str_digits).
  if ([...m[2]].filter((ch) => ch !== '_').length > 4300) return null;
  let value = 0;
  for (const ch of m[2]) {
    if (ch === '_') continue;
    value = value * 10 + digitValue(ch.codePointAt(0) as number);
  }
  if (m[1] === '-' && value !== 0) value = -value;
  return value;
}

/** Shortest round-trip digits of a finite positive double and the decimal exponent of the first one. */
function shortestDigits(x: number): { digits: string; exp: number } {
  // Number::toString picks the shortest round-trip digits, ties to the closest, as Python repr does.
  const s = String(x);
  const eAt = s.indexOf('e');
  if (eAt >= 0) {
    const mant = s.slice(0, eAt).replace('.', '');
    return { digits: mant.replace(/0+$/, '') || '0', exp: Number(s.slice(eAt + 1)) };
  }
  const dot = s.indexOf('.');
  const intPart = dot >= 0 ? s.slice(0, dot) : s;
  const frac = dot >= 0 ? s.slice(dot + 1) : '';
  if (intPart === '0') {
    const zeros = frac.length - frac.replace(/^0+/, '').length;
    return { digits: frac.slice(zeros).replace(/0+$/, ''), exp: -(zeros + 1) };
  }
  return { digits: (intPart + frac).replace(/0+$/, ''), exp: intPart.length - 1 };
}

/**
 * Python `repr(x)` / `str(x)` for a float: shortest round-trip digits, fixed notation for decimal
 * exponents in [-4, 16), otherwise `d.ddde+XX`; integral values keep a `.0` (`5.0`).
 */
export function pyFloatRepr(x: number): string {
  if (Number.isNaN(x)) return 'nan';
  if (x === Infinity) return 'inf';
  if (x === -Infinity) return '-inf';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const sign = x < 0 ? '-' : '';
  const { digits, exp } = shortestDigits(Math.abs(x));
  if (exp >= -4 && exp < 16) {
    if (exp < 0) return `${sign}0.${'0'.repeat(-exp - 1)}${digits}`;
    if (digits.length <= exp + 1) return `${sign}${digits}${'0'.repeat(exp + 1 - digits.length)}.0`;
    return `${sign}${digits.slice(0, exp + 1)}.${digits.slice(exp + 1)}`;
  }
  const mant = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
  const e = Math.abs(exp);
  return `${sign}${mant}e${exp < 0 ? '-' : '+'}${e < 10 ? '0' : ''}${e}`;
}

/**
 * Python `'%.Nf' % x` / `f"{x:.Nf}"`: the exact binary value rounded half-to-even. JS `toFixed` also
 * rounds the exact value but sends exact ties up (`0.03125 → 0.0313`, Python `0.0312`); only those
 * ties are corrected here.
 */
export function pyFormatFixed(x: number, digits: number): string {
  if (!Number.isFinite(x)) return pyFloatRepr(x);
  if (Object.is(x, -0)) return `-${(0).toFixed(digits)}`;
  const plain = x.toFixed(digits);
  if (Math.abs(x) >= 1e21) return plain;
  // toFixed(100) is exact for every double with at most 100 fractional decimal digits; an exact tie
  // at `digits` places has digits+1 of them, so it always shows up here.
  const exact = Math.abs(x).toFixed(100);
  const dot = exact.indexOf('.');
  const tail = exact.slice(dot + 1 + digits);
  if (!/^50*$/.test(tail)) return plain;
  const kept = exact.slice(0, dot + 1 + digits);
  const lastDigit = Number(kept[kept.length - 1] === '.' ? kept[kept.length - 2] : kept[kept.length - 1]);
  if (lastDigit % 2 === 1) return plain; // toFixed already went up, to the even neighbour
  const down = digits === 0 ? kept.slice(0, -1) : kept;
  return (x < 0 ? '-' : '') + down;
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
