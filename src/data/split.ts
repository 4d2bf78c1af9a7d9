/**
 * Hugging Face split-slice syntax (`train`, `train[:1000]`, `train[100:200]`, `test[:50%]`,
 * `train[-10%:]`, `train[:10%](pct1_dropremainder)`, `train[:100]+test[:100]`), resolved the way
 * `datasets` resolves it so a config copied from the papers selects the same rows.
 * An empty split name (`[:8]`) selects from a file that holds a single unnamed table.
 */

/** How percent boundaries become row indices (HF `ReadInstruction` rounding). */
export type PercentRounding = 'closest' | 'pct1_dropremainder';

/** One `name[from:to]` part of a split spec, not yet resolved against a row count. */
export interface SplitSlice {
  /** Split name; '' when the spec had none (a flat file's only table). */
  split: string;
  /** Start boundary (may be negative), null when omitted. */
  from: number | null;
  /** End boundary (exclusive, may be negative), null when omitted. */
  to: number | null;
  /** Boundaries are row counts or percentages. */
  unit: 'rows' | 'percent';
  rounding: PercentRounding;
}

const PART = /^([^[\]()+\s]*)(?:\[\s*(?:(-?\d+)(%)?)?\s*:\s*(?:(-?\d+)(%)?)?\s*\])?(?:\((closest|pct1_dropremainder)\))?$/;

/**
 * Parses a split spec into its `+`-joined slices.
 * @throws Error naming the spec when it is not valid slice syntax.
 */
export function parseSplitSpec(spec: string): SplitSlice[] {
  const text = spec.trim();
  if (text === '') throw new Error(`split spec is empty`);
  return text.split('+').map((raw) => {
    const part = raw.trim();
    const m = PART.exec(part);
    if (!m) {
      throw new Error(
        `split spec '${spec}': cannot parse '${part}' (expected name, name[from:to] or name[from%:to%])`,
      );
    }
    const [, name, fromText, fromPct, toText, toPct, rounding] = m;
    const hasSlice = part.includes('[');
    if (name === '' && !hasSlice) throw new Error(`split spec '${spec}': empty part`);
    // HF rejects mixed units in one slice; so do we, so the meaning is never ambiguous.
    if (fromText !== undefined && toText !== undefined && Boolean(fromPct) !== Boolean(toPct)) {
      throw new Error(`split spec '${spec}': '${part}' mixes percent and row boundaries`);
    }
    const percent = Boolean(fromPct) || Boolean(toPct);
    if (rounding !== undefined && !percent) {
      throw new Error(`split spec '${spec}': rounding '${rounding}' needs percent boundaries`);
    }
    const from = fromText === undefined ? null : Number(fromText);
    const to = toText === undefined ? null : Number(toText);
    if (percent) {
      for (const b of [from, to]) {
        if (b !== null && Math.abs(b) > 100) {
          throw new Error(`split spec '${spec}': percent boundary ${b}% is outside [-100, 100]`);
        }
      }
    }
    return {
      split: name,
      from,
      to,
      unit: percent ? 'percent' : 'rows',
      rounding: (rounding as PercentRounding | undefined) ?? 'closest',
    };
  });
}

/** Python's round(): halves go to the even neighbour (HF rounds percent boundaries with it). */
function roundHalfEven(x: number): number {
  const f = Math.floor(x);
  const diff = x - f;
  if (diff > 0.5) return f + 1;
  if (diff < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

function percentToRows(boundary: number, numRows: number, rounding: PercentRounding): number {
  return rounding === 'closest'
    ? roundHalfEven((boundary * numRows) / 100)
    : boundary * Math.trunc(numRows / 100);
}

/** Resolves a slice against a split of `numRows` rows into absolute `[start, end)` (end ≥ start). */
export function resolveSlice(slice: SplitSlice, numRows: number): { start: number; end: number } {
  let from: number;
  let to: number;
  if (slice.unit === 'percent') {
    from = slice.from === null ? 0 : percentToRows(slice.from, numRows, slice.rounding);
    to = slice.to === null ? numRows : percentToRows(slice.to, numRows, slice.rounding);
  } else {
    from = slice.from ?? 0;
    to = slice.to ?? numRows;
  }
  if (from < 0) from = Math.max(numRows + from, 0);
  if (to < 0) to = Math.max(numRows + to, 0);
  from = Math.min(from, numRows);
  to = Math.min(to, numRows);
  return { start: from, end: Math.max(from, to) };
}

/** Applies one slice to rows; returns `[originalIndex, row]` pairs so errors can name the row. */
export function sliceWithIndex<T>(rows: readonly T[], slice: SplitSlice): Array<[number, T]> {
  const { start, end } = resolveSlice(slice, rows.length);
  const out: Array<[number, T]> = [];
  for (let i = start; i < end; i++) out.push([i, rows[i]]);
  return out;
}
