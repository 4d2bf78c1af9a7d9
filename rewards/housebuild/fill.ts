/**
 * How the reference reads a command line, shared by the validator, the simulator and the
 * resource budget so that all three agree. Internal: not re-exported from the package.
 */
import { pyInt, pyLower, pyLStrip, pySplit, pyStrip } from '../../src/util/python-text.js';

/** The command text after `/`: stripped, then one leading `/` and the spaces after it dropped. */
export function commandText(line: string): string {
  const s = pyStrip(line);
  return s.startsWith('/') ? pyLStrip(s.slice(1)) : s;
}

/** The whitespace tokens of a command line (`commandText` split); first token is the command. */
export function commandTokens(line: string): string[] {
  return pySplit(commandText(line));
}

/** A `fill` line with at least 8 tokens. */
export interface FillTokens {
  /** x1 y1 z1 x2 y2 z2 as Python `int()` reads them; null where it raises. */
  readonly coords: (number | null)[];
  /** Token 8 as written (callers normalise it). */
  readonly block: string;
}

/** The `fill` command of a line (any case, ≥ 8 tokens), or null for anything else. */
export function parseFill(line: string): FillTokens | null {
  const tokens = commandTokens(line);
  if (tokens.length < 8 || pyLower(tokens[0]) !== 'fill') return null;
  return { coords: tokens.slice(1, 7).map(pyInt), block: tokens[7] };
}

/** `(|dx|+1)(|dy|+1)(|dz|+1)` of corners x1 y1 z1 x2 y2 z2: what a fill is charged against a budget. */
export function fillVolume([x1, y1, z1, x2, y2, z2]: readonly number[]): number {
  return (Math.abs(x2 - x1) + 1) * (Math.abs(y2 - y1) + 1) * (Math.abs(z2 - z1) + 1);
}
