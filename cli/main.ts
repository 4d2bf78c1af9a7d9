#!/usr/bin/env node
/**
 * `comlrl` — the command-line tool: train, eval, demo, tiny-model. `main(argv)` is importable (tests
 * call it in-process); run as a program it sets the exit code.
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { activeBackend } from '../src/backend/init.js';
import { ConfigError } from '../src/config/schema.js';
import { backendMemoryError, isBackendMemoryCrash } from '../src/memory/errors.js';
import { defaultBudgetBytes } from '../src/memory/settings.js';
import { CheckpointError } from '../src/checkpoint/atomic.js';
import type { CommandContext } from './context.js';
import { UsageError } from './args.js';
import { demoCommand, DEMO_USAGE } from './commands/demo.js';
import { evalCommand, EVAL_USAGE } from './commands/eval.js';
import { setupCommand, SETUP_USAGE } from './commands/setup.js';
import { tinyModelCommand, TINY_MODEL_USAGE } from './commands/tiny-model.js';
import { trainCommand, TRAIN_USAGE } from './commands/train.js';
// The built-in trainers register as this loads (cli/schemas.js imports them too).
import '../trainers/builtin.js';
import { trainerNames } from '../trainers/registry.js';

export type { CommandContext } from './context.js';

const COMMANDS: Record<string, { run: (argv: readonly string[], ctx: CommandContext) => Promise<number>; usage: string; summary: string }> = {
  train: { run: trainCommand, usage: TRAIN_USAGE, summary: 'train agents from a YAML/JSON config (resume with --resume)' },
  eval: { run: evalCommand, usage: EVAL_USAGE, summary: "compute a task's paper metric for base models or a trained checkpoint" },
  demo: { run: demoCommand, usage: DEMO_USAGE, summary: 'train two tiny agents on a toy collaboration task, end to end (10–30 s on a laptop CPU)' },
  'tiny-model': { run: tinyModelCommand, usage: TINY_MODEL_USAGE, summary: 'write a tiny random Hugging Face checkpoint (qwen3, qwen2, llama)' },
  setup: { run: setupCommand, usage: SETUP_USAGE, summary: 'build a native backend (torch or tensorflow) for this project' },
};

/**
 * The top-level help. It names the trainers registered when it is asked for (the built-in ones and
 * any a program registered before calling {@link main}).
 */
export function mainUsage(): string {
  return [
    'usage: comlrl <command> [options]',
    '',
    'Multi-agent RL fine-tuning of LLMs in TypeScript.',
    '',
    'commands:',
    ...Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(12)}${c.summary}`),
    '',
    `trainers: ${trainerNames().join(', ')}`,
    '  (a config selects one by its section; `npx comlrl demo --trainer NAME` runs one on a toy task)',
    '',
    'Run `npx comlrl <command> --help` for its options. Start with `npx comlrl demo`.',
  ].join('\n');
}

const defaultContext: CommandContext = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
};

/**
 * Runs the CLI with `argv` (without `node` and the script). Returns the exit code: 0 success,
 * 1 error, 2 usage error. Errors are printed, never thrown.
 */
export async function main(argv: readonly string[], ctx: CommandContext = defaultContext): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    const target = command === 'help' ? rest[0] : undefined;
    if (target && COMMANDS[target]) ctx.out(COMMANDS[target].usage);
    else ctx.out(mainUsage());
    return command === undefined ? 2 : 0;
  }
  if (command === '--version' || command === '-v') {
    ctx.out(await packageVersion());
    return 0;
  }
  const cmd = COMMANDS[command];
  if (!cmd) {
    ctx.err(`comlrl: unknown command '${command}'\n\n${mainUsage()}`);
    return 2;
  }
  try {
    return await cmd.run(rest, ctx);
  } catch (err) {
    if (err instanceof UsageError) {
      ctx.err(`comlrl ${command}: ${err.message}\n\n${cmd.usage}`);
      return 2;
    }
    if (err instanceof ConfigError || err instanceof CheckpointError) {
      ctx.err(`comlrl ${command}: ${err.message}`);
      return 1;
    }
    // A command that runs a config says its crashes in words with that config's budget; what
    // reaches here unsaid ran under the default one.
    const e = isBackendMemoryCrash(err) ? backendMemoryError(err, activeBackend(), defaultBudgetBytes()) : (err as Error);
    ctx.err(`comlrl ${command}: ${e.message ?? String(err)}`);
    if (process.env.COMLRL_DEBUG && e.stack) ctx.err(e.stack);
    return 1;
  }
}

async function packageVersion(): Promise<string> {
  const { readFile } = await import('node:fs/promises');
  for (const rel of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(await readFile(fileURLToPath(new URL(rel, import.meta.url)), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'comlrl') return `comlrl ${pkg.version ?? '?'}`;
    } catch {
      // Try the next location (src vs dist layout).
    }
  }
  return 'comlrl';
}

function isEntryPoint(): boolean {
  const arg = process.argv[1];
  if (!arg) return false;
  try {
    return realpathSync(arg) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      const e = isBackendMemoryCrash(err) ? backendMemoryError(err, activeBackend(), defaultBudgetBytes()) : (err as Error);
      process.stderr.write(`comlrl: ${e.message ?? String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
