/**
 * `npm run bench -- capacity`: how large a model two agents can train on this backend. Checkpoints
 * with Qwen3-0.6B's published config and real tokenizer (151,936-token vocabulary), random bf16
 * weights, scaled by hidden size and layer count (`createTinyModel({ like: 'qwen3-0.6b', ... })`,
 * the same as `comlrl tiny-model --like qwen3-0.6b --hidden N --layers N ...`), trained with the
 * TLDR MAGRPO example config (num_generations 4, 1 turn) at max_new_tokens 32 with automatic
 * micro-batches, each in a fresh CLI process, in two ladders of growing size: full fine-tuning of
 * both agents, and LoRA r = 16 (q, k, v, o) of both agents on one shared frozen base. Each ladder
 * stops at its first failure, whose message is printed. Figures only: nothing asserts.
 * `COMLRL_CAPACITY=full` or `lora` runs one ladder; `COMLRL_CAPACITY_ITEMS` sets items per run (2);
 * `COMLRL_CAPACITY_SKIP=n` starts a ladder at its n-th size (0-based), to resume a long measurement;
 * `COMLRL_CAPACITY_OFFLOAD=true|false|auto` sets `memory.offload_frozen_layers` (default: the config's, auto).
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { createTinyModel, type TinyModelOptions } from '../src/model/tiny.js';
import { writeTldrData } from './configs.js';

const here = path.dirname(fileURLToPath(import.meta.url));
// The CLI of the same build as this file (dist/ or another outDir).
const cli = path.join(here, '..', 'cli', 'main.js');
const repoRoot = path.resolve(here, '..', '..');

/** One model size of a ladder: the shape fields given to createTinyModel (with `like: 'qwen3-0.6b'`). */
interface Size {
  readonly name: string;
  readonly shape: Partial<Pick<TinyModelOptions, 'hiddenSize' | 'numLayers' | 'numHeads' | 'numKvHeads' | 'headDim' | 'intermediateSize'>>;
}

/** What one run gave. */
export interface CapacityRun {
  ladder: 'full' | 'lora';
  size: string;
  parameters: number;
  items: number;
  exit: number | null;
  secondsPerItem: number;
  peakLine: string;
  error: string;
}

const small = (hidden: number, layers: number, heads: number, kv: number): Size => ({
  name: `hidden ${hidden}, ${layers} layers, ${heads}/${kv} heads of 64, MLP ${3 * hidden}`,
  shape: { hiddenSize: hidden, numLayers: layers, numHeads: heads, numKvHeads: kv, headDim: 64, intermediateSize: 3 * hidden },
});

const FULL: Size[] = [small(256, 4, 4, 2), small(384, 6, 6, 2), small(512, 8, 8, 4), small(640, 10, 10, 5)];
const LORA_SIZES: Size[] = [
  { name: 'Qwen3-0.6B (28 layers)', shape: {} },
  { name: 'Qwen3-0.6B shapes, 32 layers', shape: { numLayers: 32 } },
  { name: 'Qwen3-0.6B shapes, 36 layers', shape: { numLayers: 36 } },
  { name: 'Qwen3-0.6B shapes, 40 layers', shape: { numLayers: 40 } },
  { name: 'Qwen3-0.6B shapes, 44 layers', shape: { numLayers: 44 } },
  { name: 'Qwen3-0.6B shapes, 48 layers', shape: { numLayers: 48 } },
  // Qwen3-1.7B's published shapes: hidden 2048, MLP 6144, 28 layers, 16/8 heads of 128, tied.
  { name: 'Qwen3-1.7B shapes (hidden 2048, MLP 6144, 28 layers)', shape: { hiddenSize: 2048, intermediateSize: 6144 } },
  // Qwen2.5-3B's sizes (the top of the papers' range) in the Qwen3 architecture: hidden 2048, MLP 11008, 36 layers, 16/2 heads of 128.
  { name: "Qwen2.5-3B's sizes (hidden 2048, MLP 11008, 36 layers, 16/2 heads)", shape: { hiddenSize: 2048, intermediateSize: 11008, numLayers: 36, numKvHeads: 2 } },
];
const LORA = { r: 16, lora_alpha: 32, lora_dropout: 0, target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj'] };

function trainRun(work: string, model: string, tldr: string, lora: boolean, items: number): Omit<CapacityRun, 'ladder' | 'size' | 'parameters'> {
  const doc = parse(fs.readFileSync(path.join(repoRoot, 'examples', 'configs', 'tldr-magrpo.yaml'), 'utf8')) as Record<string, Record<string, unknown>>;
  doc.model = { ...doc.model, agent_model: model, ...(lora ? { lora: LORA } : {}) };
  doc.dataset = { ...doc.dataset, path: tldr };
  // eval_interval 0: no evaluation (any other value evaluates before each epoch's first item).
  doc.magrpo = { ...doc.magrpo, max_new_tokens: 32, eval_interval: 0 };
  doc.output = { ...doc.output, dir: path.join(work, 'run'), plots: false, eval_before_after: false, save_final_model: false };
  const offload = process.env.COMLRL_CAPACITY_OFFLOAD;
  if (offload !== undefined) {
    if (!['true', 'false', 'auto'].includes(offload)) throw new Error(`COMLRL_CAPACITY_OFFLOAD must be true, false or auto, got '${offload}'`);
    doc.memory = { ...doc.memory, offload_frozen_layers: offload === 'auto' ? 'auto' : offload === 'true' };
  }
  const configFile = path.join(work, 'config.yaml');
  fs.writeFileSync(configFile, stringify(doc));
  const t0 = performance.now();
  const run = spawnSync(process.execPath, [cli, 'train', '--config', configFile, '--stop-after', String(items)], {
    encoding: 'utf8',
    maxBuffer: 1 << 26,
    env: { ...process.env, COMLRL_BACKEND: process.env.COMLRL_BACKEND ?? 'wasm' },
  });
  const seconds = (performance.now() - t0) / 1000;
  fs.rmSync(path.join(work, 'run'), { recursive: true, force: true });
  const text = `${run.stdout}\n${run.stderr}`;
  const peakLine = text.split('\n').find((l) => l.includes('peak memory:'))?.replace('[comlrl] peak memory: ', '') ?? '–';
  const error = run.status === 0 ? '' : (text.split('\n').filter((l) => /^comlrl|Error|Aborted/.test(l)).pop() ?? text.trim().split('\n').pop() ?? '').slice(0, 400);
  return { items, exit: run.status, secondsPerItem: seconds / items, peakLine, error };
}

/** Runs the ladders (see the file comment) and returns one row per run. */
export async function benchCapacity(): Promise<CapacityRun[]> {
  const which = process.env.COMLRL_CAPACITY;
  const items = Number(process.env.COMLRL_CAPACITY_ITEMS ?? 2);
  const skip = Number(process.env.COMLRL_CAPACITY_SKIP ?? 0);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-bench-capacity-'));
  const out: CapacityRun[] = [];
  try {
    const tldr = path.join(work, 'tldr');
    writeTldrData(tldr);
    const ladders: Array<['full' | 'lora', Size[]]> = [
      ['full', FULL],
      ['lora', LORA_SIZES],
    ];
    for (const [ladder, sizes] of ladders) {
      if (which && which !== ladder) continue;
      for (const size of sizes.slice(skip)) {
        const model = path.join(work, 'model');
        fs.rmSync(model, { recursive: true, force: true });
        const info = await createTinyModel({ dir: model, like: 'qwen3-0.6b', seed: 0, tokenizer: 'qwen3', ...size.shape });
        const r = { ladder, size: size.name, parameters: info.parameters, ...trainRun(work, model, tldr, ladder === 'lora', items) };
        out.push(r);
        console.error(`[bench capacity] ${ladder} · ${size.name} · ${(info.parameters / 1e6).toFixed(1)} M: exit ${r.exit}, ${r.secondsPerItem.toFixed(0)} s per item · ${r.peakLine}${r.error ? ` · ${r.error}` : ''}`);
        if (r.exit !== 0) break;
      }
    }
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  return out;
}

/** Prints the capacity table. */
export function printCapacityTable(rows: readonly CapacityRun[], backend: string): void {
  console.log(`\n## Capacity: two agents, TLDR MAGRPO (num_generations 4), max_new_tokens 32, micro_batch_size auto (${backend})\n`);
  console.log('| training | model (Qwen3-0.6B config, real tokenizer) | parameters per agent | items | exit | seconds per item (incl. load) | peak memory |');
  console.log('|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const what = r.ladder === 'full' ? 'full fine-tuning, both agents' : 'LoRA r=16 (q,k,v,o), one shared base';
    console.log(`| ${what} | ${r.size} | ${(r.parameters / 1e6).toFixed(1)} M | ${r.items} | ${r.exit} | ${r.secondsPerItem.toFixed(0)} | ${r.peakLine}${r.error ? ` (${r.error})` : ''} |`);
  }
}
