/**
 * Comparing what comlrl computed with what CoMLRL recorded: per quantity the largest absolute and
 * relative difference over every value compared, against a tolerance; structural differences (a
 * step CoMLRL took that comlrl did not, a row comlrl never scored) are failures of their quantity.
 */

/** A bound on |comlrl − CoMLRL|: absolute, or relative to |CoMLRL|. */
export type Tolerance = { readonly abs: number } | { readonly rel: number };

/**
 * The tolerances of a float32 port, from the vectors' README ("Tolerance": about 10× the measured
 * float32-vs-float64 difference of CoMLRL's own reruns over all twelve cases, public and hidden).
 */
export const TOLERANCES = {
  tokenLogProb: { abs: 5e-5 },
  logProbSum: { abs: 1e-4 },
  loss: { abs: 1e-4 },
  estimate: { abs: 1e-5 },
  gradNorm: { rel: 1e-4 },
  gradL2: { rel: 1e-4 },
  deltaL2: { rel: 5e-4 },
  deltaFirst8: { abs: 1e-5 },
  gradFirst8: { abs: 1e-4 },
  exact: { abs: 0 },
} as const satisfies Record<string, Tolerance>;

/** One quantity's row of the table. */
export interface QuantityResult {
  readonly quantity: string;
  readonly n: number;
  readonly maxAbs: number;
  readonly maxRel: number;
  readonly tolerance: Tolerance;
  /** Where the largest difference is (for the reader), or what did not line up. */
  readonly where: string;
  readonly problems: readonly string[];
  readonly ok: boolean;
}

interface Acc {
  tolerance: Tolerance;
  n: number;
  maxAbs: number;
  maxRel: number;
  where: string;
  worst: number;
  problems: string[];
}

/** Collects comparisons by quantity, in the order quantities first appear. */
export class Comparison {
  private readonly rows = new Map<string, Acc>();

  private acc(quantity: string, tolerance: Tolerance): Acc {
    let a = this.rows.get(quantity);
    if (!a) {
      a = { tolerance, n: 0, maxAbs: 0, maxRel: 0, where: '', worst: -1, problems: [] };
      this.rows.set(quantity, a);
    }
    return a;
  }

  /** Compares value lists of equal length (a length mismatch is a problem of the quantity). */
  values(quantity: string, where: string, expected: readonly number[], actual: readonly number[], tolerance: Tolerance): void {
    const a = this.acc(quantity, tolerance);
    if (expected.length !== actual.length) {
      a.problems.push(`${where}: ${actual.length} values, CoMLRL ${expected.length}`);
      return;
    }
    expected.forEach((e, i) => {
      const d = Math.abs(actual[i] - e);
      const rel = d / Math.max(Math.abs(e), 1e-30);
      a.n++;
      if (!(d <= a.maxAbs)) a.maxAbs = Number.isNaN(d) ? Infinity : d;
      if (rel > a.maxRel) a.maxRel = rel;
      // The reported place is where the difference counts most against the tolerance.
      const score = 'abs' in tolerance ? d : rel;
      if (score > a.worst || Number.isNaN(score)) {
        a.worst = Number.isNaN(score) ? Infinity : score;
        a.where = expected.length > 1 ? `${where}[${i}]` : where;
      }
    });
  }

  /** Compares two token-id or text lists exactly. */
  same(quantity: string, where: string, expected: readonly (number | string)[], actual: readonly (number | string)[]): void {
    const a = this.acc(quantity, TOLERANCES.exact);
    a.n++;
    if (expected.length !== actual.length || expected.some((e, i) => e !== actual[i])) {
      a.problems.push(`${where}: comlrl ${JSON.stringify(actual).slice(0, 120)}, CoMLRL ${JSON.stringify(expected).slice(0, 120)}`);
    }
  }

  /** Records a structural difference under a quantity. */
  problem(quantity: string, message: string, tolerance: Tolerance = TOLERANCES.exact): void {
    this.acc(quantity, tolerance).problems.push(message);
  }

  /** The table rows. */
  results(): QuantityResult[] {
    return [...this.rows.entries()].map(([quantity, a]) => {
      const within = 'abs' in a.tolerance ? a.maxAbs <= a.tolerance.abs : a.maxRel <= a.tolerance.rel;
      return { quantity, n: a.n, maxAbs: a.maxAbs, maxRel: a.maxRel, tolerance: a.tolerance, where: a.problems[0] ?? a.where, problems: a.problems, ok: within && a.problems.length === 0 };
    });
  }
}

/** The table of one case, as text. */
export function formatResults(caseName: string, results: readonly QuantityResult[]): string {
  const fmt = (x: number) => (x === 0 ? '0' : x.toExponential(2));
  const tol = (t: Tolerance) => ('abs' in t ? `abs ${fmt(t.abs)}` : `rel ${fmt(t.rel)}`);
  const head = ['quantity', 'n', 'max abs', 'max rel', 'tolerance', 'ok', 'worst at / problem'];
  const body = results.map((r) => [r.quantity, String(r.n), fmt(r.maxAbs), fmt(r.maxRel), tol(r.tolerance), r.ok ? 'yes' : 'NO', r.where]);
  const widths = head.map((h, c) => Math.max(h.length, ...body.map((row) => (c === 6 ? 0 : row[c].length))));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]))).join('  ');
  return [`case ${caseName}`, line(head), ...body.map(line)].join('\n');
}
