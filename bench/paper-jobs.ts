/**
 * The paper bench's units of work and the worker process that runs them: pretraining a critic
 * (bench/critic-pretrain.ts), one critic-fit gate row (bench/critic-fit.ts), one training run
 * (bench/paper-runs.ts). A worker (`node dist/bench/run.js --paper-worker`) reads one job per line
 * on stdin and answers each with one `PAPER_JSON {...}` line on stdout, so the parent hands out
 * jobs as workers free up.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { initBackend, setBackendLogger } from '../src/backend/init.js';
import { createTinyModel } from '../src/model/tiny.js';
import { loadCausalLM } from '../src/model/load.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { criticTextSource, pretrainCritic, type PretrainBudget } from './critic-pretrain.js';
import { gateFits, type GateBudget, type GateCritic, type GateRow } from './critic-gate.js';
import { cpuSince, CRITIC_SIZE, criticWords, PAPER_ARMS, PAPER_VARIANTS, paperRun, type CriticVocabOrder, type PaperRunResult } from './paper-runs.js';

/** Pretrains the critic of init seed `seed` (its weights before pretraining and its text stream), with the vocabulary in `vocab` order, into `out`. */
export interface PretrainJob {
  readonly kind: 'pretrain';
  readonly seed: number;
  readonly vocab: CriticVocabOrder;
  readonly out: string;
  readonly budget: PretrainBudget;
}

/** The gate's fits of one variant and run seed: one per gate arm (critic input) and pretrained critic (init). */
export interface GateJob {
  readonly kind: 'gate';
  readonly variant: string;
  readonly seed: number;
  /** The gate arms to fit (bench/critic-gate.ts GATE_ARMS ids). */
  readonly arms: readonly string[];
  /** The run's epochs (the gate's flushes). */
  readonly epochs: number;
  readonly critics: readonly { readonly init: number; readonly dir: string }[];
  readonly budget: Pick<GateBudget, 'heldOutEpisodes' | 'continuations' | 'target'>;
}

/** One training run. */
export interface RunJob {
  readonly kind: 'run';
  readonly arm: string;
  readonly variant: string;
  readonly seed: number;
  readonly epochs: number;
  readonly segments: number;
  readonly pretrainedDir: string;
  /** The λ of an arm whose λ is `chosen` (the sweep's choice). */
  readonly lambda?: number;
}

export type PaperJob = PretrainJob | GateJob | RunJob;

/** A job's answer, with the CPU seconds the job took (what it costs on an idle core). */
export type PaperAnswer = (
  | (PretrainJob & { result: { firstLoss: number; lastLoss: number; seconds: number } })
  | (GateJob & { result: GateRow[] })
  | (RunJob & { result: PaperRunResult })
) & { cpuSeconds?: number };

/** Prefix of a worker's answer lines. */
export const PAPER_TAG = 'PAPER_JSON ';

function variantOf(name: string) {
  const v = PAPER_VARIANTS.find((x) => x.name === name);
  if (!v) throw new Error(`paper bench: unknown variant '${name}'`);
  return v;
}

/** Runs one job in this process (the backend already initialised). */
export async function runJob(job: PaperJob, scratch: string): Promise<PaperAnswer> {
  const t0 = performance.now();
  if (job.kind === 'pretrain') {
    const init = path.join(scratch, `init-s${job.seed}-${job.vocab}`);
    await createTinyModel({ dir: init, arch: 'qwen3', seed: 1000 * job.seed + 10, tokenizer: 'word', words: [...criticWords(job.vocab)], ...CRITIC_SIZE });
    const model = await loadCausalLM(init);
    const tokenizer = await loadTokenizer(init);
    try {
      const losses = await pretrainCritic(model, tokenizer, criticTextSource(PAPER_VARIANTS, job.seed), job.budget);
      await model.save(job.out);
      await tokenizer.save(job.out);
      return { ...job, result: { ...losses, seconds: (performance.now() - t0) / 1000 } };
    } finally {
      model.dispose();
    }
  }
  if (job.kind === 'gate') {
    const critics: GateCritic[] = job.critics.map((c) => ({ init: c.init, load: async () => ({ name: `critic-i${c.init}`, model: await loadCausalLM(c.dir), tokenizer: await loadTokenizer(c.dir) }) }));
    return { ...job, result: await gateFits(variantOf(job.variant), job.seed, job.epochs, critics, job.budget, scratch, job.arms) };
  }
  const arm = PAPER_ARMS.find((a) => a.id === job.arm);
  if (!arm) throw new Error(`paper bench: unknown arm '${job.arm}'`);
  const result = await paperRun({ arm, variant: variantOf(job.variant), seed: job.seed, epochs: job.epochs, segments: job.segments, dir: scratch, pretrainedDir: job.pretrainedDir, lambda: job.lambda });
  return { ...job, result };
}

/** Child process: runs the jobs read from stdin, one JSON per line, answering each on stdout. */
export async function paperWorker(): Promise<void> {
  setBackendLogger(null);
  await initBackend('wasm');
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-paper-worker-'));
  try {
    for await (const line of readline.createInterface({ input: process.stdin })) {
      if (line.trim() === '') continue;
      const cpu = process.cpuUsage();
      const answer = await runJob(JSON.parse(line) as PaperJob, scratch);
      process.stdout.write(PAPER_TAG + JSON.stringify({ ...answer, cpuSeconds: cpuSince(cpu) }) + '\n');
    }
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}
