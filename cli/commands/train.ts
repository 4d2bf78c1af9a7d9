import { existsSync } from 'node:fs';
import { TRAINER_CONFIG_SCHEMAS } from '../schemas.js';
import { commandArgs, formatUsage, intOpt, listOpt, stringOpt, UsageError, type OptionSpec } from '../args.js';
import { applyOverrides, readConfigFile } from '../../src/config/load.js';
import { parseRunConfig, type RunConfig } from '../../src/config/schema.js';
import { resolveResume, runDirConfigFile, runTraining } from '../run.js';
import type { CommandContext } from '../main.js';

const OPTIONS: readonly OptionSpec[] = [
  { name: 'config', short: 'c', kind: 'string', value: 'FILE', help: 'YAML or JSON run config (examples/configs/*.yaml)' },
  { name: 'set', kind: 'string', value: 'KEY=VALUE', repeat: true, help: 'override a config key, e.g. --set magrpo.num_train_epochs=2 (YAML scalar)' },
  { name: 'resume', kind: 'string', value: 'DIR', help: 'continue a run: its directory (newest checkpoint) or one checkpoint directory' },
  { name: 'stop-after', kind: 'string', value: 'STEP', help: 'stop once the run reaches STEP training items, writing a checkpoint (resume later)' },
];

export const TRAIN_USAGE = formatUsage(
  'comlrl train --config FILE.yaml [--set key=value ...] [--resume DIR] [--stop-after STEP]',
  [
    'Trains agents with the trainer section of the config (magrpo, collm_dc or collm_cc) and writes a run',
    'directory: config.yaml, metrics.jsonl, rewards/losses plots, eval.json, checkpoints/ every',
    'output.save_steps items, final/ models. Ctrl-C (or SIGTERM) stops at the next item with a checkpoint.',
    'With --resume and no --config, the run directory\'s config.yaml is used; a given config must match',
    'the checkpoint\'s (apart from output and backend).',
  ].join('\n'),
  OPTIONS,
);

/** Reads and validates a config file with overrides. */
export function loadConfig(file: string, sets: readonly string[]): RunConfig {
  return parseRunConfig(applyOverrides(readConfigFile(file), sets), TRAINER_CONFIG_SCHEMAS, file);
}

/** `comlrl train`. */
export async function trainCommand(argv: readonly string[], ctx: CommandContext): Promise<number> {
  const args = commandArgs(argv, OPTIONS, 'train', TRAIN_USAGE, ctx.out);
  if (args === null) return 0;
  const resumeDir = stringOpt(args, 'resume');
  let configFile = stringOpt(args, 'config');
  if (configFile === undefined) {
    if (resumeDir === undefined) throw new UsageError('--config FILE is required (or --resume DIR of an existing run)', 'train');
    configFile = runDirConfigFile(resumeDir);
    if (!existsSync(configFile)) {
      // A checkpoint directory: the run directory is two levels up.
      const up = runDirConfigFile(`${resumeDir}/../..`);
      if (existsSync(up)) configFile = up;
      else throw new UsageError(`no config.yaml in ${resumeDir}; pass --config FILE`, 'train');
    }
  }
  const config = loadConfig(configFile, listOpt(args, 'set'));
  const stopAfter = intOpt(args, 'stop-after', 'train', 1);
  const resume = resumeDir !== undefined ? await resolveResume(resumeDir, config) : undefined;

  const controller = new AbortController();
  let interrupts = 0;
  // SIGTERM (what job schedulers send before killing a job) is handled like Ctrl-C.
  const onSignal = (signal: NodeJS.Signals): void => {
    interrupts++;
    if (interrupts === 1) {
      const what = signal === 'SIGINT' ? 'interrupt' : `interrupt (${signal})`;
      ctx.err(`\n[comlrl] ${what}: stopping after the current item and writing a checkpoint (Ctrl-C again to quit now)`);
      controller.abort();
    } else {
      process.exit(130);
    }
  };
  // One listener per signal, each knowing its name (process.emit in tests passes no argument).
  const handlers = (['SIGINT', 'SIGTERM'] as const).map((sig) => [sig, () => onSignal(sig)] as const);
  for (const [sig, handler] of handlers) process.on(sig, handler);
  try {
    const result = await runTraining({
      config,
      ...(resume ? { resume } : {}),
      ...(stopAfter !== undefined ? { stopAfter } : {}),
      signal: controller.signal,
      log: ctx.err,
      ...(ctx.progress ? { progress: ctx.progress } : {}),
    });
    // A Ctrl-C is an interruption (130) even when --stop-after was given and not yet reached.
    if (result.completed) return 0;
    return stopAfter !== undefined && !controller.signal.aborted ? 0 : 130;
  } finally {
    for (const [sig, handler] of handlers) process.off(sig, handler);
  }
}
