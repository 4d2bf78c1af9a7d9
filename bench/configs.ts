/**
 * `npm run bench -- configs`: every config in examples/configs/ trains 2 items (`--stop-after 2`)
 * with its own max_new_tokens and num_generations on a random checkpoint of hidden 256 and 4
 * layers, each in a fresh CLI process, and the table shows exit code, seconds and peak memory
 * (the wasm heap's high-water mark and process RSS) per config. CoopHE reads
 * ../shared/data/coophe/che_raw.json (or $COMLRL_COOPHE_DATA); TLDR gets generated Reddit-style
 * posts. `COMLRL_BENCH_CONFIGS=tldr-magrpo,housebuild-magrpo` runs only the configs named (file
 * names without `.yaml`). Figures only: nothing here asserts.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { createTinyModel } from '../src/model/tiny.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const cli = path.join(repoRoot, 'dist', 'cli', 'main.js');

/** A few TLDR-shaped prompts (the trl-lib/tldr prompt column's layout) for a local split directory. */
export function writeTldrData(dir: string): void {
  const post = (i: number) =>
    `SUBREDDIT: r/relationships\nTITLE: Question ${i} about my roommate and the rent\nPOST: We have shared an apartment for ${i + 2} years. ` +
    'Lately the rent went up and we cannot agree on how to split it, since one room is bigger. I asked for advice from friends but they disagree too. ' +
    'What is a fair way to decide?\nTL;DR:';
  fs.mkdirSync(dir, { recursive: true });
  for (const split of ['train', 'test']) {
    fs.writeFileSync(path.join(dir, `${split}.jsonl`), Array.from({ length: 8 }, (_, i) => JSON.stringify({ prompt: post(i) })).join('\n') + '\n');
  }
}

interface ConfigRun {
  config: string;
  maxNewTokens: number;
  numGenerations: number;
  exit: number | null;
  seconds: number;
  peakLine: string;
  error: string;
}

/** Runs every example config for 2 items; returns one row per config. */
export async function benchExampleConfigs(): Promise<ConfigRun[]> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'comlrl-bench-configs-'));
  const model = path.join(work, 'tiny256');
  await createTinyModel({ dir: model, arch: 'qwen3', seed: 0, tokenizer: 'bpe', hiddenSize: 256, numLayers: 4 });
  const tldr = path.join(work, 'tldr');
  writeTldrData(tldr);
  const coophe = process.env.COMLRL_COOPHE_DATA ?? path.resolve(repoRoot, '../shared/data/coophe/che_raw.json');
  const dir = path.join(repoRoot, 'examples', 'configs');
  const only = process.env.COMLRL_BENCH_CONFIGS?.split(',').map((n) => n.trim().replace(/\.yaml$/, ''));
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.yaml') && (!only || only.includes(f.slice(0, -'.yaml'.length)))).sort();
  if (only && files.length !== only.length) throw new Error(`COMLRL_BENCH_CONFIGS names ${only.join(', ')}; examples/configs has ${fs.readdirSync(dir).join(', ')}`);
  const out: ConfigRun[] = [];
  try {
    for (const file of files) {
      const doc = parse(fs.readFileSync(path.join(dir, file), 'utf8')) as Record<string, Record<string, unknown>>;
      const section = doc.magrpo ?? doc.collm_dc ?? doc.collm_cc ?? {};
      const task = String(doc.dataset?.task);
      const sets = [`model.agent_model=${model}`, `output.dir=${path.join(work, 'runs', file)}`, 'output.plots=false'];
      if (doc.model?.critic_model !== undefined) sets.push(`model.critic_model=${model}`);
      if (task === 'tldr') sets.push(`dataset.path=${tldr}`);
      if (task === 'coophe') sets.push(`dataset.path=${coophe}`);
      const t0 = performance.now();
      const run = spawnSync(process.execPath, [cli, 'train', '--config', path.join(dir, file), ...sets.flatMap((s) => ['--set', s]), '--stop-after', '2'], {
        encoding: 'utf8',
        maxBuffer: 1 << 26,
        env: { ...process.env, COMLRL_BACKEND: process.env.COMLRL_BACKEND ?? 'wasm' },
      });
      const seconds = (performance.now() - t0) / 1000;
      const text = `${run.stdout}\n${run.stderr}`;
      const peakLine = text.split('\n').find((l) => l.includes('peak memory:'))?.replace('[comlrl] peak memory: ', '') ?? '–';
      const error = run.status === 0 ? '' : (text.split('\n').filter((l) => l.startsWith('comlrl')).pop() ?? '').slice(0, 200);
      out.push({ config: file, maxNewTokens: Number(section.max_new_tokens), numGenerations: Number(section.num_generations), exit: run.status, seconds, peakLine, error });
      console.error(`[bench configs] ${file}: exit ${run.status} in ${seconds.toFixed(0)} s · ${peakLine}${error ? ` · ${error}` : ''}`);
    }
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  return out;
}

/** Prints the configs table. */
export function printConfigTable(rows: readonly ConfigRun[]): void {
  console.log('\n## Example configs, 2 items each (tiny Qwen3: hidden 256, 4 layers, BPE vocab 516; wasm)\n');
  console.log('| config | max_new_tokens | num_generations | exit | seconds | peak memory |');
  console.log('|---|---|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.config} | ${r.maxNewTokens} | ${r.numGenerations} | ${r.exit} | ${r.seconds.toFixed(0)} | ${r.peakLine}${r.error ? ` (${r.error})` : ''} |`);
}
