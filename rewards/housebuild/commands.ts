/**
 * Command extraction and validation for HouseBuild (tasks-reference §2.1 steps 1–2): what the
 * reference accepts from an agent's text, in which order the checks run (the order sets the
 * rejection reason), and how accepted commands are normalised.
 */
import { PY_SPACE, pyInt, pyLower, pySplitLines, pyStrip } from '../../src/util/python-text.js';
import { commandText, commandTokens, fillVolume } from './fill.js';
import { AIR_BLOCKS, boundsOf, normalizeBlockId } from './world.js';

// Python `\s` is its Unicode whitespace set and `\d` any Unicode decimal digit (Nd).
const LANG_TAG = new RegExp(`^[${PY_SPACE}]*[a-zA-Z0-9_-]+[${PY_SPACE}]*\\n`, 'u');
const LIST_MARKER = new RegExp(`^[${PY_SPACE}]*(?:[-*]+|\\p{Nd}+[.)])[${PY_SPACE}]*`, 'u');

/**
 * Keeps only the first fenced block when the text has one (at least two "```"): its content is
 * stripped and a first line that is a bare word is dropped as a language tag. Deliberate quirk:
 * that also drops a bare `kill` written without a slash on the first line.
 */
export function stripMarkdownFences(text: string): string {
  const raw = pyStrip(text ?? '');
  if (!raw || !raw.includes('```')) return raw;
  const parts = raw.split('```');
  if (parts.length < 3) return raw;
  return pyStrip(pyStrip(parts[1]).replace(LANG_TAG, ''));
}

/**
 * `extract_command_lines`: the (first fenced block of the) text split into Python lines, each
 * stripped, with one leading list marker (`-`, `*`, `1.`, `2)`) removed; empty lines dropped.
 */
export function extractCommandLines(text: string): string[] {
  const lines: string[] = [];
  for (const line of pySplitLines(stripMarkdownFences(text))) {
    let s = pyStrip(line);
    if (!s) continue;
    s = pyStrip(s.replace(LIST_MARKER, ''));
    if (s) lines.push(s);
  }
  return lines;
}

/** A line the validator refused, with the reference's reason text. */
export interface RejectedCommand {
  line: string;
  reason: string;
}

/** What one agent's lines become. */
export interface ValidatedCommands {
  /** Normalised commands (`/fill x1 y1 z1 x2 y2 z2 block` or `/kill …`), in input order. */
  accepted: string[];
  rejected: RejectedCommand[];
}

/** Inputs of `validateCommands`; one agent at a time (budgets and caps are per agent). */
export interface ValidateCommandsOptions {
  /** Blocks this agent may place; `air` is always allowed in addition. */
  allowedBlocks: readonly string[];
  bboxFrom: readonly number[];
  bboxTo: readonly number[];
  /** Accepted-command cap for this agent (`/kill` counts). */
  maxCommands: number;
  /** Per-block volume budget for this agent; absent or empty: unlimited. */
  resourceLimits?: Readonly<Record<string, number>> | null;
}

/**
 * `validate_and_normalize_mc_commands`. Checks, in order: command cap; `kill` (any case, any
 * arguments) accepted; other commands rejected; `fill` needs 8 tokens; coordinates are Python
 * ints not starting with `~`/`^`; block (prefix `minecraft:` dropped, case-sensitive) allowed;
 * both corners in the bbox; no fill mode token; resource budget (volume charged on every
 * accepted fill, overlaps included, never refunded; air unlimited).
 */
export function validateCommands(lines: readonly string[], opts: ValidateCommandsOptions): ValidatedCommands {
  const allowed = new Set(opts.allowedBlocks.map(normalizeBlockId));
  allowed.add('air');
  const limits = new Map<string, number>();
  for (const [k, v] of Object.entries(opts.resourceLimits ?? {})) {
    if (Number.isInteger(v) && v >= 0) limits.set(normalizeBlockId(k), v);
  }
  const used = new Map<string, number>();
  const b = boundsOf(opts.bboxFrom, opts.bboxTo);
  const inBox = (x: number, y: number, z: number) =>
    b.minX <= x && x <= b.maxX && b.minY <= y && y <= b.maxY && b.minZ <= z && z <= b.maxZ;

  const accepted: string[] = [];
  const rejected: RejectedCommand[] = [];
  for (const line of lines) {
    if (accepted.length >= opts.maxCommands) {
      rejected.push({ line, reason: `exceeds max_commands=${opts.maxCommands}` });
      continue;
    }
    const parts = commandTokens(line ?? '');
    if (parts.length === 0) continue;
    const cmd = pyLower(parts[0]);

    if (cmd === 'kill') {
      accepted.push(parts.length > 1 ? `/kill ${parts.slice(1).join(' ')}` : '/kill');
      continue;
    }
    if (cmd !== 'fill') {
      rejected.push({ line, reason: `unsupported command: ${cmd}` });
      continue;
    }
    if (parts.length < 8) {
      rejected.push({ line, reason: 'fill needs: /fill x1 y1 z1 x2 y2 z2 block' });
      continue;
    }
    // Relative (~) and local (^) coordinates are refused before Python int() is tried.
    const coords = parts.slice(1, 7).map((t) => (/^[~^]/.test(pyStrip(t)) ? null : pyInt(t)));
    if (coords.some((c) => c === null)) {
      rejected.push({ line, reason: 'fill coords must be absolute integers (no ~)' });
      continue;
    }
    const [x1, y1, z1, x2, y2, z2] = coords as number[];
    const block = normalizeBlockId(parts[7]);
    if (!allowed.has(block)) {
      rejected.push({ line, reason: `block not allowed: ${block}` });
      continue;
    }
    if (!(inBox(x1, y1, z1) && inBox(x2, y2, z2))) {
      rejected.push({ line, reason: 'fill coord out of bbox' });
      continue;
    }
    if (parts.length > 8) {
      rejected.push({ line, reason: 'fill modes (replace/keep/...) not allowed' });
      continue;
    }
    if (limits.size > 0 && !AIR_BLOCKS.has(block)) {
      const limit = limits.get(block);
      if (limit !== undefined) {
        const volume = fillVolume(coords as number[]);
        const before = used.get(block) ?? 0;
        if (before + volume > limit) {
          rejected.push({ line, reason: `exceeds resource limit for ${block}: ${before + volume}>${limit}` });
          continue;
        }
        used.set(block, before + volume);
      }
    }
    accepted.push(`/fill ${x1} ${y1} ${z1} ${x2} ${y2} ${z2} ${block}`);
  }
  return { accepted, rejected };
}

/** True when an accepted command, after `/`, starts with `kill` (any case): the spider check. */
export function hasKill(commands: readonly string[]): boolean {
  return commands.some((cmd) => pyLower(commandText(cmd ?? '')).startsWith('kill'));
}
