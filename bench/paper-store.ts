/**
 * Where the paper bench (bench/paper.ts) keeps its work, so that a run of hours can stop and go on:
 * a folder with the bench's settings, the pretrained critic, and one JSON file per finished
 * training run (written whole or not at all). `--resume` opens a folder a stopped bench left and
 * runs only what is missing; more seeds or arms may be added on a resume, but the budgets
 * (epochs, evaluations, pretraining) must match, since runs of different budgets do not compare.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { PretrainBudget } from './critic-pretrain.js';
import type { PaperAnswer, RunJob } from './paper-jobs.js';

/** A finished training run, as the store keeps it. */
export type StoredRun = PaperAnswer & { kind: 'run' };

/** What must be equal for stored runs to be compared with new ones. */
export interface StoreBudget {
  readonly epochs: number;
  readonly segments: number;
  readonly pretrain: PretrainBudget;
  /** The critic vocabulary's order (bench/paper-runs.ts `CRITIC_VOCAB_ORDERS`). */
  readonly vocab: string;
}

const SETTINGS = 'settings.json';

/** The file name of a run: arm, variant and seed (`sparse H=4` → `sparse-H4`). */
export function runFileName(job: Pick<RunJob, 'arm' | 'variant' | 'seed'>): string {
  return `${job.arm}__${job.variant.replace(/ /g, '-').replace(/=/g, '')}__s${job.seed}.json`;
}

/** Writes `text` to `file` through a temporary file and a rename, so a stop never leaves half a file. */
function writeWhole(file: string, text: string): void {
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, text);
  fs.renameSync(tmp, file);
}

/** A bench's folder of finished work. */
export class PaperStore {
  private constructor(
    readonly dir: string,
    readonly budget: StoreBudget,
  ) {}

  /**
   * Opens `dir` for a bench with `budget`. A new folder (missing or empty) is set up; a folder
   * holding a bench's work is opened only with `resume`, and only when its budget equals
   * `budget` — otherwise the error names the folder and the differing setting, and nothing is
   * touched.
   */
  static open(dir: string, budget: StoreBudget, options: { resume: boolean }): PaperStore {
    const settings = path.join(dir, SETTINGS);
    const used = fs.existsSync(dir) && fs.readdirSync(dir).length > 0;
    if (used && !fs.existsSync(settings)) throw new Error(`paper bench: ${dir} is not empty and holds no ${SETTINGS}: not a paper bench folder; choose another --out`);
    if (used && !options.resume) throw new Error(`paper bench: ${dir} already holds a bench's runs: pass --resume to go on with them, or choose another --out`);
    if (used) {
      const stored = JSON.parse(fs.readFileSync(settings, 'utf8')) as StoreBudget;
      for (const key of ['epochs', 'segments', 'vocab'] as const) {
        if (stored[key] !== budget[key]) throw new Error(`paper bench: ${dir} was run with ${key} ${stored[key]}, this bench uses ${budget[key]}: its runs do not compare; choose another --out`);
      }
      if (JSON.stringify(stored.pretrain) !== JSON.stringify(budget.pretrain)) throw new Error(`paper bench: ${dir} pretrained its critic with ${JSON.stringify(stored.pretrain)}, this bench uses ${JSON.stringify(budget.pretrain)}; choose another --out`);
    } else {
      fs.mkdirSync(path.join(dir, 'runs'), { recursive: true });
      writeWhole(settings, JSON.stringify(budget, null, 2) + '\n');
    }
    return new PaperStore(dir, budget);
  }

  /** The checkpoint folder of the critic pretrained from init `init`. */
  pretrainedDir(init: number): string {
    return path.join(this.dir, `pretrained-i${init}`);
  }

  /**
   * Init `init`'s pretraining losses when it finished in an earlier invocation and its checkpoint
   * is still in the folder, else null. A folder carried without its checkpoints (the runs and gate
   * files alone) pretrains them again: the pretraining is seeded, so it writes the same weights.
   */
  pretrained(init: number): { firstLoss: number; lastLoss: number; seconds: number } | null {
    const f = path.join(this.dir, `pretrained-i${init}.json`);
    const checkpoint = ['config.json', 'model.safetensors', 'tokenizer.json'].every((name) => fs.existsSync(path.join(this.pretrainedDir(init), name)));
    return fs.existsSync(f) && checkpoint ? (JSON.parse(fs.readFileSync(f, 'utf8')) as { firstLoss: number; lastLoss: number; seconds: number }) : null;
  }

  /** Records that the critic in {@link pretrainedDir}(init) is complete. */
  markPretrained(init: number, result: { firstLoss: number; lastLoss: number; seconds: number }): void {
    writeWhole(path.join(this.dir, `pretrained-i${init}.json`), JSON.stringify(result) + '\n');
  }

  /** The gate's fits of `variant` and run seed `seed` under `budget` when an earlier invocation made them, else null. */
  gateRows<R>(variant: string, seed: number, budget: unknown): R[] | null {
    const f = this.gateFile(variant, seed);
    if (!fs.existsSync(f)) return null;
    const kept = JSON.parse(fs.readFileSync(f, 'utf8')) as { budget: unknown; rows: R[] };
    return JSON.stringify(kept.budget) === JSON.stringify(budget) ? kept.rows : null;
  }

  /** Keeps the gate's fits of one variant and run seed, with the gate budget they were made under. */
  saveGateRows(variant: string, seed: number, budget: unknown, rows: readonly unknown[]): void {
    writeWhole(this.gateFile(variant, seed), JSON.stringify({ budget, rows }) + '\n');
  }

  private gateFile(variant: string, seed: number): string {
    return path.join(this.dir, `gate__${variant.replace(/ /g, '-').replace(/=/g, '')}__s${seed}.json`);
  }

  /** A value the bench chose and must keep on a resume (the λ of the sweep), else null. */
  choice(name: string): number | null {
    const f = path.join(this.dir, `choice-${name}.json`);
    return fs.existsSync(f) ? (JSON.parse(fs.readFileSync(f, 'utf8')) as { value: number }).value : null;
  }

  setChoice(name: string, value: number, why: string): void {
    writeWhole(path.join(this.dir, `choice-${name}.json`), JSON.stringify({ value, why }) + '\n');
  }

  /** Whether `job` finished in this folder. */
  has(job: Pick<RunJob, 'arm' | 'variant' | 'seed'>): boolean {
    return fs.existsSync(path.join(this.dir, 'runs', runFileName(job)));
  }

  /** Keeps a finished run. */
  save(run: StoredRun): void {
    writeWhole(path.join(this.dir, 'runs', runFileName(run)), JSON.stringify(run) + '\n');
  }

  /** Every finished run in the folder. A file that does not parse is named in the error (nothing is deleted). */
  runs(): StoredRun[] {
    const dir = path.join(this.dir, 'runs');
    return fs
      .readdirSync(dir)
      .filter((f) => f.endsWith('.json'))
      .sort()
      .map((f) => {
        try {
          return JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as StoredRun;
        } catch (e) {
          throw new Error(`paper bench: ${path.join(dir, f)} does not parse (${(e as Error).message}); move it away to rerun that run`);
        }
      });
  }
}
