import { existsSync, readdirSync } from 'node:fs';
import { toyWords } from '../../envs/toy/task.js';
import { createTinyModel, type TinyModelOptions } from '../../src/model/tiny.js';
import { commandArgs, formatUsage, intOpt, stringOpt, UsageError, type OptionSpec } from '../args.js';
import type { CommandContext } from '../main.js';
import { outputDirProblem } from '../paths.js';

const OPTIONS: readonly OptionSpec[] = [
  { name: 'arch', kind: 'string', value: 'qwen3|qwen2|llama', help: 'architecture (config.json model_type and weight names)' },
  { name: 'out', kind: 'string', value: 'DIR', help: 'output directory (must be empty or absent)' },
  { name: 'seed', kind: 'string', value: 'N', help: 'weight init seed (default 0); same options, same bytes' },
  { name: 'tokenizer', kind: 'string', value: 'bpe|word', help: 'byte-level BPE (~500 tokens, default) or a word-level vocabulary' },
  { name: 'words', kind: 'string', value: 'toy|W1,W2,...', help: "word tokenizer vocabulary: 'toy' (the toy task's words) or a comma list" },
  { name: 'hidden', kind: 'string', value: 'N', help: 'hidden size (default 64)' },
  { name: 'layers', kind: 'string', value: 'N', help: 'decoder layers (default 2)' },
  { name: 'heads', kind: 'string', value: 'N', help: 'attention heads (default 4)' },
  { name: 'force', kind: 'flag', help: 'write into a non-empty directory' },
];

export const TINY_MODEL_USAGE = formatUsage(
  'comlrl tiny-model --arch qwen3|qwen2|llama --out DIR [--seed N] [--tokenizer bpe|word] [...]',
  'Writes a complete, tiny, random-weight Hugging Face checkpoint (config.json, model.safetensors,\ntokenizer.json, tokenizer_config.json with a chat template) that every comlrl command loads like a\nreal one. For tests, examples and trying configs without downloading a model.',
  OPTIONS,
);

/** `comlrl tiny-model`. */
export async function tinyModelCommand(argv: readonly string[], ctx: CommandContext): Promise<number> {
  const args = commandArgs(argv, OPTIONS, 'tiny-model', TINY_MODEL_USAGE, ctx.out);
  if (args === null) return 0;
  const arch = stringOpt(args, 'arch');
  if (arch === undefined) throw new UsageError('--arch is required (qwen3, qwen2 or llama)', 'tiny-model');
  if (arch !== 'qwen3' && arch !== 'qwen2' && arch !== 'llama') throw new UsageError(`--arch must be qwen3, qwen2 or llama, got '${arch}'`, 'tiny-model');
  const out = stringOpt(args, 'out');
  if (out === undefined) throw new UsageError('--out DIR is required', 'tiny-model');
  const outProblem = outputDirProblem(out, '--out');
  if (outProblem !== undefined) throw new UsageError(outProblem, 'tiny-model');
  if (existsSync(out) && readdirSync(out).length > 0 && !args.flags.has('force')) {
    throw new UsageError(`--out ${out} is not empty (pass --force to write into it)`, 'tiny-model');
  }
  const tokenizer = stringOpt(args, 'tokenizer') ?? (stringOpt(args, 'words') ? 'word' : 'bpe');
  if (tokenizer !== 'bpe' && tokenizer !== 'word') throw new UsageError(`--tokenizer must be bpe or word, got '${tokenizer}'`, 'tiny-model');
  const wordsOpt = stringOpt(args, 'words');
  if (wordsOpt !== undefined && tokenizer !== 'word') throw new UsageError('--words needs --tokenizer word', 'tiny-model');
  const words = wordsOpt === undefined ? undefined : wordsOpt === 'toy' ? [...toyWords] : wordsOpt.split(',').map((w) => w.trim()).filter((w) => w !== '');
  const opts: TinyModelOptions = {
    dir: out,
    arch,
    seed: intOpt(args, 'seed', 'tiny-model', 0) ?? 0,
    tokenizer,
    ...(words ? { words } : {}),
    ...optional('hiddenSize', intOpt(args, 'hidden', 'tiny-model', 1)),
    ...optional('numLayers', intOpt(args, 'layers', 'tiny-model', 1)),
    ...optional('numHeads', intOpt(args, 'heads', 'tiny-model', 1)),
  };
  await createTinyModel(opts);
  ctx.out(`wrote a tiny ${arch} checkpoint (${tokenizer} tokenizer, seed ${opts.seed}) to ${out}`);
  return 0;
}

function optional<K extends string>(key: K, value: number | undefined): Partial<Record<K, number>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, number>);
}
