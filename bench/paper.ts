/**
 * `npm run bench -- paper`: the CoLLM paper's claim in miniature. MAGRPO (K = 2 and 4), CoLLM-DC
 * and CoLLM-CC on the hidden-cue relay (envs/hidden-cue/relay.ts), where every turn's words are
 * paid: sparse (the mean per-turn score at the end) and dense (each turn's share as it is
 * earned), H = 4 and 6; the same completions per agent for every method; critics random-init or
 * pretrained by next-token prediction on episode text; frozen- and blind-critic controls; the
 * default z-scored δ and the equations' raw δ (bench/paper-runs.ts lists the arms and settings).
 *
 * Phases, on a pool of worker processes ($COMLRL_PAPER_WORKERS, default 2): pretrain one critic
 * per gate init (the runs use init 0's; $COMLRL_CRITIC_VOCAB_ORDER picks the vocabulary order);
 * the critic-fit gate (bench/critic-gate.ts) on every variant; then every run. The
 * comparison is reported only if the gate passes ($COMLRL_PAPER_IGNORE_GATE=1, or `--quick`,
 * reports it anyway, marked). Prints the tables (mean over seeds [bootstrap 95% interval]; paired
 * differences with Student-t intervals) and writes the curves to paper-bench.png in its folder (or
 * $COMLRL_PAPER_PLOT).
 *
 * `--quick`: one seed for the runs, {@link QUICK} budgets, for checking that everything runs (its figures mean
 * little). `npm run bench -- critic-fit` runs the first two phases alone.
 *
 * The full bench takes hours: it keeps its work in a folder (`--out DIR`, default
 * runs/paper-bench; bench/paper-store.ts) and `--resume` goes on where a stopped one ended. It may be
 * run in parts (`--arms id,id`, `--variants 'sparse H=4,sparse H=6'`); the tables read every run
 * the folder holds.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { buildPlotSpec, renderSvg, svgToPng, type PlotPoint } from '../src/logging/plots.js';
import { mean } from '../src/util/stats.js';
import { PRETRAIN_BUDGET, type PretrainBudget } from './critic-pretrain.js';
import { GATE_ARMS, GATE_FULL, GATE_QUICK, gateArmFor, gateArmOf, gatePasses, gateReport, gateVerdicts, inputLabel, passingGateArms, type GateBudget, type GateRow } from './critic-gate.js';
import { PAPER_TAG, type GateJob, type PaperAnswer, type PaperJob, type RunJob } from './paper-jobs.js';
import { acBudget, benchVocabOrder, CRITIC_BATCH, CRITIC_LR, CRITIC_SIZE, EVAL_EPISODES, magrpoTasks, PAPER_ARMS, PAPER_VARIANTS, treeCompletions, type PaperVariant } from './paper-runs.js';
import { bootstrapMean, curveArea, pairedTInterval, type Interval, type PairedInterval } from './paper-stats.js';
import { PaperStore, type StoredRun } from './paper-store.js';

/** Budgets of one form of the bench. */
export interface PaperSettings {
  /** Seeds of the runs that decide the claim: the sparse variants' {@link CLAIM_ARMS}. */
  readonly claimSeeds: readonly number[];
  /** Seeds of every other run. */
  readonly seeds: readonly number[];
  /** Held-out seeds of the λ sweep (never among the comparison's seeds). */
  readonly sweepSeeds: readonly number[];
  /** Actor-critic epochs of 16 episodes (the budget: epochs × 16 × H completions per agent). */
  readonly epochs: number;
  /** Evaluations at 0, 1/segments, …, 1 of each method's budget. */
  readonly segments: number;
  readonly pretrain: PretrainBudget;
  /** The critic-fit gate's seeds, critic inits and held-out budget (bench/critic-gate.ts). */
  readonly gate: GateBudget;
}

const seedRange = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

/** The full bench: 24 epochs; 10 paired seeds where the claim is decided, 5 elsewhere. */
export const FULL: PaperSettings = { claimSeeds: seedRange(10), seeds: seedRange(5), sweepSeeds: [101, 102, 103, 104, 105], epochs: 24, segments: 4, pretrain: PRETRAIN_BUDGET, gate: GATE_FULL };
/** `--quick`: one seed and short budgets, to check that everything runs. */
export const QUICK: PaperSettings = { claimSeeds: [1], seeds: [1], sweepSeeds: [101], epochs: 2, segments: 2, pretrain: { ...PRETRAIN_BUDGET, steps: 100 }, gate: GATE_QUICK };

/** The arms whose sparse-payment runs decide the claim (CC against MAGRPO, and against a critic that cannot read the history). */
export const CLAIM_ARMS: readonly string[] = ['magrpo-k2', 'cc-pre', 'cc-pre-mt', 'cc-pre-lambda', 'cc-pre-mt-lambda', 'cc-pre-blind'];

/** The seeds an arm runs on a variant. */
export function seedsOf(s: PaperSettings, arm: string, payment: string): readonly number[] {
  if (PAPER_ARMS.find((a) => a.id === arm)?.sweep === true) return s.sweepSeeds;
  return payment === 'sparse' && CLAIM_ARMS.includes(arm) ? s.claimSeeds : s.seeds;
}

/** The CC arms compared with the others in the paired table. */
const CC_ARMS: readonly (readonly [string, string])[] = [
  ['cc-pre', 'CC text critic'],
  ['cc-pre-mt', 'CC numeric m_t'],
  ['cc-pre-lambda', 'CC λ-returns'],
  ['cc-pre-mt-lambda', 'CC numeric m_t + λ-returns'],
];

/** Which part of the bench one invocation runs (every arm and variant when unset). */
export interface PaperPart {
  readonly arms?: readonly string[];
  readonly variants?: readonly string[];
  /** Only these of each arm's seeds (the rest can follow in a later `--resume`). */
  readonly seeds?: readonly number[];
}

/** How one invocation of the bench runs. */
export interface PaperOptions {
  readonly quick?: boolean;
  /** The folder that keeps the bench's work (default: runs/paper-bench, or a temporary one for `--quick`). */
  readonly out?: string;
  /** Go on with the runs `out` holds. */
  readonly resume?: boolean;
  /** The λ of the λ-returns arms, given instead of the sweep's choice (kept in `out` like a choice). */
  readonly lambda?: number;
  readonly part?: PaperPart;
  /** Print the gate report and the tables from what `out` holds, and run nothing (with `resume`'s checks on the folder). */
  readonly report?: boolean;
}

const f3 = (x: number) => x.toFixed(3);
const ci = (b: Interval) => `${f3(b.mean)} [${f3(b.lo)}, ${f3(b.hi)}]`;

/** Runs `jobs` on `workers` child processes, handing each the next job when it answers. */
async function pool(jobs: readonly PaperJob[], workers: number, onAnswer: (a: PaperAnswer, done: number) => void): Promise<PaperAnswer[]> {
  const self = path.join(path.dirname(fileURLToPath(import.meta.url)), 'run.js');
  const queue = [...jobs];
  const answers: PaperAnswer[] = [];
  const one = () =>
    new Promise<void>((resolve, reject) => {
      const child = spawn(process.execPath, [self, '--paper-worker'], { stdio: ['pipe', 'pipe', 'inherit'] });
      const feed = () => {
        const job = queue.shift();
        if (job) child.stdin.write(JSON.stringify(job) + '\n');
        else child.stdin.end();
      };
      readline.createInterface({ input: child.stdout }).on('line', (line) => {
        if (!line.startsWith(PAPER_TAG)) return;
        const a = JSON.parse(line.slice(PAPER_TAG.length)) as PaperAnswer;
        answers.push(a);
        onAnswer(a, answers.length);
        feed();
      });
      child.on('error', reject);
      child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`paper bench worker exited with code ${code}`))));
      feed();
    });
  await Promise.all(Array.from({ length: Math.max(1, Math.min(workers, jobs.length)) }, one));
  return answers;
}

function workerCount(): number {
  const n = Number(process.env.COMLRL_PAPER_WORKERS ?? 2);
  if (!Number.isInteger(n) || n < 1) throw new Error(`COMLRL_PAPER_WORKERS must be a positive integer, got ${process.env.COMLRL_PAPER_WORKERS}`);
  return n;
}

/**
 * Pretrains one critic per gate init (into `store`'s folder, once: a resume reuses them; else
 * into `scratch`) and runs the gate; prints the gate's report. `dir` is init 0's checkpoint (the
 * first of `s.gate.inits`), the one every run starts from.
 */
async function pretrainAndGate(s: PaperSettings, scratch: string, store: PaperStore | null = null, variants: readonly string[] | undefined = undefined): Promise<{ gate: GateRow[]; dir: string; cpu: { pretrain: number; gate: number } }> {
  const cpu = { pretrain: 0, gate: 0 };
  const workers = workerCount();
  const vocab = benchVocabOrder();
  const dirOf = (init: number) => (store ? store.pretrainedDir(init) : path.join(scratch, `pretrained-i${init}`));
  const t0 = performance.now();
  const missing = s.gate.inits.filter((init) => store?.pretrained(init) == null);
  const pre = await pool(
    missing.map((init) => ({ kind: 'pretrain' as const, seed: init, vocab, out: dirOf(init), budget: s.pretrain })),
    workers,
    (a) => {
      cpu.pretrain += a.cpuSeconds ?? 0;
      if (a.kind === 'pretrain') store?.markPretrained(a.seed, a.result);
    },
  );
  for (const a of pre) {
    if (a.kind !== 'pretrain') continue;
    console.log(`\npretrained critic, init ${a.seed} (vocabulary order ${vocab}; the paper's critics share one checkpoint across seeds, and the runs use init ${s.gate.inits[0]}'s; its value head is new in every run): qwen3 ${CRITIC_SIZE.hiddenSize} × ${CRITIC_SIZE.numLayers}, ${s.pretrain.steps} AdamW steps × ${s.pretrain.batch} critic texts at lr ${s.pretrain.lr} (${s.pretrain.steps * s.pretrain.batch} texts), next-token loss ${f3(a.result.firstLoss)} → ${f3(a.result.lastLoss)} (${a.result.seconds.toFixed(0)} s)`);
  }
  if (pre.length !== missing.length) throw new Error('paper bench: pretraining gave no answer');
  if (missing.length < s.gate.inits.length) console.log(`\npretrained critics of inits ${s.gate.inits.filter((i) => !missing.includes(i)).join(', ')}: kept in ${store?.dir} from an earlier invocation`);
  console.log(`pretraining: ${((performance.now() - t0) / 60000).toFixed(1)} min`);
  const critics = s.gate.inits.map((init) => ({ init, dir: dirOf(init) }));
  // The variants being run (all unless a part names some); fits a store kept from an earlier invocation are reused.
  const gated = PAPER_VARIANTS.filter((v) => variants === undefined || variants.includes(v.name));
  // One job per variant and seed, fitting the gate arms (critic inputs) whose rows the store does not hold yet.
  const allArms = GATE_ARMS.map((a) => a.id);
  const slots = keptGateSlots(s, store, gated);
  const gate: GateRow[] = slots.flatMap((x) => x.kept);
  const gateJobs: GateJob[] = slots.flatMap((x) => {
    const arms = allArms.filter((id) => !x.kept.some((r) => gateArmOf(r) === id));
    return arms.length === 0 ? [] : [{ kind: 'gate' as const, variant: x.variant, seed: x.seed, arms, epochs: s.epochs, critics, budget: s.gate }];
  });
  const keptFits = gate.length;
  if (keptFits > 0) console.log(`gate: ${keptFits} of ${slots.length * allArms.length * critics.length} fits are in ${store?.dir} already`);
  const tGate = performance.now();
  await pool(gateJobs, workers, (a) => {
    if (a.kind !== 'gate') return;
    const before = slots.find((x) => x.variant === a.variant && x.seed === a.seed)?.kept ?? [];
    store?.saveGateRows(a.variant, a.seed, s.gate, [...before, ...a.result]);
    gate.push(...a.result);
    cpu.gate += a.cpuSeconds ?? 0;
    for (const r of a.result) process.stderr.write(`paper: gate ${inputLabel(gateArmOf(r))} ${r.variant} init ${r.init} seed ${r.seed}: EV ${r.result.gateEV.map(f3).join(' → ')} (${r.result.seconds.toFixed(0)} s)\n`);
  });
  const sorted = sortGate(gate);
  console.log('');
  for (const line of gateReport(sorted, { lr: CRITIC_LR, batch: CRITIC_BATCH, target: s.gate.target, vocabOrder: vocab })) console.log(line);
  console.log(`gate fits: ${((performance.now() - tGate) / 60000).toFixed(1)} min on ${workers} workers`);
  return { gate: sorted, dir: dirOf(s.gate.inits[0]), cpu };
}

/** The gate's fits `store` holds for each of `variants` × the gate's seeds (none without a store). */
function keptGateSlots(s: PaperSettings, store: PaperStore | null, variants: readonly PaperVariant[]): { variant: string; seed: number; kept: GateRow[] }[] {
  return variants.flatMap((v) => s.gate.seeds.map((seed) => ({ variant: v.name, seed, kept: store?.gateRows<GateRow>(v.name, seed, s.gate) ?? [] })));
}

/** The gate fits `store` holds, every variant and seed of the gate, in report order. */
function keptGate(s: PaperSettings, store: PaperStore): GateRow[] {
  return sortGate(keptGateSlots(s, store, PAPER_VARIANTS).flatMap((x) => x.kept));
}

/** Gate rows by critic input, variant, init and seed. */
function sortGate(rows: readonly GateRow[]): GateRow[] {
  const arms = GATE_ARMS.map((a) => a.id);
  const order = (r: GateRow) => PAPER_VARIANTS.findIndex((v) => v.name === r.variant);
  return [...rows].sort((a, b) => arms.indexOf(gateArmOf(a)) - arms.indexOf(gateArmOf(b)) || order(a) - order(b) || a.init - b.init || a.seed - b.seed);
}

/** `npm run bench -- critic-fit`: pretraining (gate seed only) and the gate. Returns whether it passed. */
export async function benchCriticFit(options: { quick?: boolean } = {}): Promise<boolean> {
  const s = options.quick ? QUICK : FULL;
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-critic-fit-'));
  try {
    const t0 = performance.now();
    const { gate, cpu } = await pretrainAndGate(s, scratch);
    const workers = workerCount();
    console.log(`wall time ${((performance.now() - t0) / 60000).toFixed(1)} min; CPU time: pretraining ${cpu.pretrain.toFixed(0)} s, gate ${cpu.gate.toFixed(0)} s: about ${((cpu.pretrain + cpu.gate) / workers / 60).toFixed(1)} min on ${workers} idle workers`);
    return gatePasses(gate);
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

/** Refuses a part that names an arm or variant the bench does not have. */
function checkPart(part: PaperPart): void {
  for (const a of part.arms ?? []) if (!PAPER_ARMS.some((x) => x.id === a)) throw new Error(`paper bench: --arms names '${a}', not an arm (${PAPER_ARMS.map((x) => x.id).join(', ')})`);
  for (const v of part.variants ?? []) if (!PAPER_VARIANTS.some((x) => x.name === v)) throw new Error(`paper bench: --variants names '${v}', not a variant (${PAPER_VARIANTS.map((x) => x.name).join(', ')})`);
}

/**
 * The run jobs of a form of the bench (within `part`), the costliest first: the comparison's arms,
 * or with `sweep` the λ sweep's arms on their held-out seeds. `lambda` is the sweep's choice, for
 * the arm that runs with it (left out while it is not known).
 */
export function runJobs(s: PaperSettings, pretrainedDir: string, part: PaperPart = {}, options: { sweep?: boolean; lambda?: number | null } = {}): RunJob[] {
  checkPart(part);
  const jobs: RunJob[] = [];
  for (const v of PAPER_VARIANTS) {
    if (part.variants && !part.variants.includes(v.name)) continue;
    for (const arm of PAPER_ARMS) {
      if (part.arms && !part.arms.includes(arm.id)) continue;
      if ((arm.sweep === true) !== (options.sweep === true)) continue;
      if ((arm.only !== undefined && arm.only !== v.payment) || (arm.method === 'magrpo' && magrpoTasks(arm.k ?? 2, v.horizon, s.epochs) === 0)) continue;
      const lambda = arm.lambda === 'chosen' ? options.lambda : undefined;
      if (arm.lambda === 'chosen' && (lambda === null || lambda === undefined)) continue;
      for (const seed of seedsOf(s, arm.id, v.payment).filter((x) => arm.sweep === true || part.seeds === undefined || part.seeds.includes(x))) jobs.push({ kind: 'run', arm: arm.id, variant: v.name, seed, epochs: s.epochs, segments: s.segments, pretrainedDir, ...(lambda == null ? {} : { lambda }) });
    }
  }
  const cost = (j: RunJob) => (PAPER_VARIANTS.find((v) => v.name === j.variant)?.horizon ?? 0) * (j.arm.startsWith('magrpo') ? 1 : 2);
  return jobs.sort((a, b) => cost(b) - cost(a));
}

/** Runs the jobs `store` does not hold yet, keeping each as it finishes. */
async function runMissing(all: readonly RunJob[], store: PaperStore, what: string): Promise<void> {
  const jobs = all.filter((j) => !store.has(j));
  if (jobs.length < all.length) console.log(`\n${what}: ${all.length - jobs.length} of ${all.length} are in ${store.dir} already: running the other ${jobs.length}.`);
  let done = 0;
  await pool(jobs, workerCount(), (a) => {
    if (a.kind !== 'run') return;
    store.save(a);
    done++;
    process.stderr.write(`paper: ${what} ${done}/${jobs.length} ${a.variant} ${a.arm} seed ${a.seed}: final ${f3(a.result.curve[a.result.curve.length - 1])} (${a.result.seconds.toFixed(0)} s)\n`);
  });
}

/** The sweep's λ with the best mean AUC over its runs (every sparse variant and held-out seed), or null when none ran. */
export function chooseLambda(runs: readonly StoredRun[]): { value: number; why: string } | null {
  const scored = PAPER_ARMS.filter((a) => a.sweep === true && typeof a.lambda === 'number').flatMap((a) => {
    const areas = runs.filter((r) => r.arm === a.id).map((r) => curveArea(r.result.curve));
    return areas.length === 0 ? [] : [{ value: a.lambda as number, area: mean(areas), n: areas.length }];
  });
  if (scored.length === 0) return null;
  const best = scored.reduce((a, b) => (b.area > a.area ? b : a));
  return { value: best.value, why: `mean AUC over the sweep's runs: ${scored.map((x) => `λ ${x.value}: ${f3(x.area)} (${x.n} runs)`).join(', ')}` };
}

/** The folder a full bench keeps its work in when `--out` is not given. */
export function defaultPaperDir(): string {
  return path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'runs', 'paper-bench');
}

/**
 * Runs the comparison (or `options.part` of it) into its folder, then prints the tables over every
 * run the folder holds and writes the plot; returns the PNG path (null when the gate stopped it).
 */
export async function benchPaper(options: PaperOptions = {}): Promise<string | null> {
  const t0 = performance.now();
  const s = options.quick ? QUICK : FULL;
  const part = options.part ?? {};
  checkPart(part);
  if (options.report === true && options.resume !== true) throw new Error('paper bench: --report prints a folder a bench filled: pass --resume with it');
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-paper-'));
  const out = options.out ?? (options.quick ? path.join(scratch, 'store') : defaultPaperDir());
  try {
    const store = PaperStore.open(out, { epochs: s.epochs, segments: s.segments, pretrain: s.pretrain, vocab: benchVocabOrder() }, { resume: options.resume === true });
    console.log(`\n## The paper's comparison in miniature (hidden-cue relay; ${s.claimSeeds.length} paired seeds for the claim's sparse arms, ${s.seeds.length} elsewhere; ${s.epochs} actor-critic epochs; ${workerCount()} workers; work kept in ${out}${options.quick ? '; QUICK form: figures for checking only' : ''})`);
    if (options.report === true) {
      const gate = keptGate(s, store);
      const results = store.runs();
      if (results.length === 0) throw new Error(`paper bench: ${out} holds no finished run to report`);
      for (const line of gateReport(gate, { lr: CRITIC_LR, batch: CRITIC_BATCH, target: s.gate.target, vocabOrder: benchVocabOrder() })) console.log(line);
      printTables(s, results, gate);
      const png = await writePlot(s, results, process.env.COMLRL_PAPER_PLOT ?? path.join(out, 'paper-bench.png'));
      const runCpu = results.reduce((a, r) => a + (r.cpuSeconds ?? 0), 0);
      console.log(`\nplot: ${png}; ${results.length} runs in ${out}, CPU time ${runCpu.toFixed(0)} s (evaluation ${results.reduce((a, r) => a + r.result.evalCpuSeconds, 0).toFixed(0)} s)`);
      return png;
    }
    const { gate, dir, cpu } = await pretrainAndGate(s, scratch, store, part.variants);
    const passed = gatePasses(gate);
    if (!passed && !options.quick && process.env.COMLRL_PAPER_IGNORE_GATE !== '1') {
      console.log('\nThe gate failed: the comparison is not reported (COMLRL_PAPER_IGNORE_GATE=1 reports it anyway).');
      process.exitCode = 1;
      return null;
    }
    const tRuns = performance.now();
    // The λ sweep first: the λ-returns arm runs with the λ whose sweep runs (held-out seeds) have the best mean AUC.
    if (options.lambda !== undefined) {
      if (!(options.lambda >= 0 && options.lambda <= 1)) throw new Error(`paper bench: --lambda must be in [0, 1], got ${options.lambda}`);
      const kept = store.choice('lambda');
      if (kept !== null && kept !== options.lambda) throw new Error(`paper bench: ${out} ran its λ-returns arms with λ ${kept}; --lambda ${options.lambda} would mix them: choose another --out`);
      store.setChoice('lambda', options.lambda, 'given with --lambda (no sweep)');
    }
    const needsLambda = PAPER_ARMS.some((a) => a.lambda === 'chosen' && (part.arms === undefined || part.arms.includes(a.id)));
    if (needsLambda && store.choice('lambda') === null) {
      const sweepPart = { ...part, arms: PAPER_ARMS.filter((a) => a.sweep === true).map((a) => a.id) };
      await runMissing(runJobs(s, dir, sweepPart, { sweep: true }), store, 'λ sweep');
      const lambda = chooseLambda(store.runs());
      if (lambda !== null) store.setChoice('lambda', lambda.value, lambda.why);
    }
    const lambda = store.choice('lambda');
    if (lambda === null && needsLambda) console.log('\nλ-returns arms not run: the λ sweep runs on the sparse variants, and this part has none (or pass --lambda)');
    if (lambda !== null) console.log(`\nλ for the λ-returns arms: ${lambda} (${options.lambda !== undefined ? 'given with --lambda' : `the sweep's best mean AUC on held-out seeds ${s.sweepSeeds.join(', ')}`}; kept in ${out})`);
    await runMissing(runJobs(s, dir, part, { lambda }), store, 'runs');
    const runMin = (performance.now() - tRuns) / 60000;
    const results = store.runs();
    printTables(s, results, gate);
    const png = await writePlot(s, results, process.env.COMLRL_PAPER_PLOT ?? path.join(out, 'paper-bench.png'));
    console.log(`\nplot: ${png}${options.quick && options.out === undefined ? ' (QUICK: removed with its temporary folder)' : ''}; runs ${runMin.toFixed(1)} min; wall time ${((performance.now() - t0) / 60000).toFixed(1)} min`);
    // CPU time does not grow with the machine's load, so it predicts the wall time on idle cores.
    const runCpu = results.reduce((a, r) => a + (r.cpuSeconds ?? 0), 0);
    const idle = (cpu.pretrain + cpu.gate + runCpu) / workerCount() / 60;
    console.log(`CPU time: pretraining ${cpu.pretrain.toFixed(0)} s (this invocation), gate ${cpu.gate.toFixed(0)} s (this invocation), runs ${runCpu.toFixed(0)} s (every run in ${out}, all invocations; evaluation ${results.reduce((a, r) => a + r.result.evalCpuSeconds, 0).toFixed(0)} s): about ${idle.toFixed(1)} min on ${workerCount()} idle workers`);
    return png;
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

type RunAnswer = StoredRun;

function printTables(s: PaperSettings, results: readonly RunAnswer[], gateRows: readonly GateRow[]): void {
  const verdicts = gateVerdicts(gateRows);
  const passing = passingGateArms(gateRows);
  const gateLine = GATE_ARMS.filter((a) => verdicts.some((v) => v.arm === a.id)).map((a) => `${inputLabel(a.id)} critic ${passing.includes(a.id) ? 'PASSED' : 'FAILED'}`).join(', ');
  console.log(`\n${passing.length > 0 ? `Gate: ${gateLine}.` : `**GATE FAILED (${gateLine}): read these figures as unsupported.**`} Final = mean per-turn score of ${EVAL_EPISODES} sampled eval episodes after the whole budget; AUC = the mean of the ${s.segments + 1} evaluations at 0, 1/${s.segments}, …, 1 of each method's budget (trapezoids); critic EV = the critic's explained variance for the Monte-Carlo returns in training (\`critic/ev_mc/turn_k\`), mean over turns 2..H, at the first → last flush; gate = the critic-fit gate's verdict for the row's critic input on that variant (– where it does not fit that critic). Mean over seeds [bootstrap 95% interval]; sweep rows ran on held-out seeds.\n`);
  console.log('| variant | method | seeds | completions / agent | final | AUC | critic EV vs MC return, first → last flush | gate |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const v of PAPER_VARIANTS) {
    for (const arm of PAPER_ARMS) {
      const runs = results.filter((r) => r.variant === v.name && r.arm === arm.id);
      if (runs.length === 0) {
        if (arm.method === 'magrpo' && magrpoTasks(arm.k ?? 2, v.horizon, s.epochs) === 0) console.log(`| ${v.name} | ${arm.label} | – | – | not run: one tree is ${treeCompletions(arm.k ?? 2, v.horizon)} completions per agent, the budget ${acBudget(v.horizon, s.epochs)} | – | – | – |`);
        continue;
      }
      const finals = runs.map((r) => r.result.curve[r.result.curve.length - 1]);
      const areas = runs.map((r) => curveArea(r.result.curve));
      const evs = runs.flatMap((r) => (r.result.evMc !== undefined && r.result.evMc.length > 0 ? [r.result.evMc] : []));
      const ev = evs.length > 0 ? `${f3(mean(evs.map((e) => e[0])))} → ${f3(mean(evs.map((e) => e[e.length - 1])))}` : '–';
      const label = arm.lambda === 'chosen' && runs[0].lambda !== undefined ? `${arm.label}: λ = ${runs[0].lambda}` : arm.label;
      const gateArm = gateArmFor(arm);
      const gate = gateArm === null ? '–' : (verdicts.find((x) => x.arm === gateArm && x.variant === v.name)?.verdict ?? '–');
      console.log(`| ${v.name} | ${label} | ${runs.length} | ${runs[0].result.completionsPerAgent} | ${ci(bootstrapMean(finals))} | ${ci(bootstrapMean(areas))} | ${ev} | ${gate} |`);
    }
  }
  // The claim itself: each CC arm against MAGRPO, DC and the controls, paired by seed (same actor init).
  console.log('\nPaired differences (same seed, same actor init): mean [Student-t 95% interval] over n pairs; ▲ / ▼: the interval is above / below 0:\n');
  console.log('| variant | comparison | n | Δ final | Δ AUC |');
  console.log('|---|---|---|---|---|');
  const last = (c: readonly number[]) => c[c.length - 1];
  for (const v of PAPER_VARIANTS) {
    const of = (id: string, f: (c: readonly number[]) => number) => new Map(results.filter((r) => r.variant === v.name && r.arm === id).map((r) => [r.seed, f(r.result.curve)] as const));
    for (const [ccId, ccLabel] of CC_ARMS) {
      for (const [other, label] of [['magrpo-k2', 'MAGRPO K=2'], ['magrpo-k4', 'MAGRPO K=4'], ['dc-pre', 'CoLLM-DC'], ['cc-pre-blind', 'blind critic'], ['cc-random', 'random-init critic'], ['cc-pre', 'CC text critic']] as const) {
        if (other === ccId) continue;
        const dFinal = pairedTInterval(of(ccId, last), of(other, last));
        const dArea = pairedTInterval(of(ccId, curveArea), of(other, curveArea));
        if (dFinal === null || dArea === null) continue;
        console.log(`| ${v.name} | ${ccLabel} − ${label} | ${dFinal.n} | ${pairedCell(dFinal)} | ${pairedCell(dArea)} |`);
      }
    }
  }
}

/** A paired difference with its interval, marked where the interval excludes 0. */
function pairedCell(d: PairedInterval): string {
  const mark = d.lo > 0 ? ' ▲' : d.hi < 0 ? ' ▼' : '';
  return `${ci(d)}${mark}`;
}

async function writePlot(s: PaperSettings, results: readonly RunAnswer[], png: string): Promise<string> {
  const points: PlotPoint[] = [];
  for (const v of PAPER_VARIANTS) {
    for (const arm of PAPER_ARMS.filter((x) => x.sweep !== true)) {
      const runs = results.filter((r) => r.variant === v.name && r.arm === arm.id);
      if (runs.length === 0) continue;
      const n = Math.min(...runs.map((r) => r.result.curve.length));
      // One panel per variant whatever each arm's seed count: the count goes in the series' name.
      const series = `${arm.short} (n=${runs.length})`;
      for (let i = 0; i < n; i++) points.push({ x: i / Math.max(1, n - 1), value: mean(runs.map((r) => r.result.curve[i])), series, panel: `${v.name}: mean per-turn eval score, mean over seeds` });
      const evs = runs.flatMap((r) => (r.result.evMc !== undefined && r.result.evMc.length > 0 ? [r.result.evMc] : []));
      const m = evs.length > 0 ? Math.min(...evs.map((e) => e.length)) : 0;
      for (let i = 0; i < m; i++) {
        points.push({ x: m === 1 ? 1 : i / (m - 1), value: Math.max(mean(evs.map((e) => e[i])), -1), series, panel: `${v.name}: the critic's EV vs MC returns in training, turns 2..H (clipped at −1)` });
      }
    }
  }
  fs.mkdirSync(path.dirname(png), { recursive: true });
  const title = "MAGRPO vs CoLLM-DC vs CoLLM-CC on the hidden-cue relay (x: fraction of each method's budget)";
  fs.writeFileSync(png, svgToPng(await renderSvg(buildPlotSpec(points, { figureTitle: title, xKey: 'fraction of the training budget', panelWidth: 560, panelHeight: 150 }))));
  return png;
}
