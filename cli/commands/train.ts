import { existsSync } from 'node:fs';
import { activeBackend } from '../../src/backend/init.js';
import { memorySettingsOf } from '../../src/config/schema.js';
import { inMemoryCrashWords } from '../../src/memory/errors.js';
import { budgetBytes } from '../../src/memory/settings.js';
import { loadConfig } from '../schemas.js';
import { commandArgs, formatUsage, intOpt, listOpt, stringOpt, UsageError, type OptionSpec } from '../args.js';
import { NoCheckpointError, resolveResume, runDirConfigFile, runTraining, type ResumePoint } from '../run.js';
import { resumeCommandFor } from '../training/run-dir.js';
import { handleInterrupts } from '../interrupt.js';
import { displayPath } from '../display-path.js';
import type { CommandContext } from '../context.js';

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
    'output.save_steps items, final/ models. Ctrl-C (or SIGTERM) stops at the next item with a checkpoint',
    '(exit code 130); a second Ctrl-C quits at once, after any checkpoint write under way.',
    'With --resume and no --config, the run directory\'s config.yaml is used; a given config must match',
    'the checkpoint\'s (apart from output and backend); model paths may differ when the models found there',
    'are the ones the checkpoint recorded (--set model.agent_model=NEW). A run directory without a checkpoint yet starts',
    'again from step 0; a finished run whose final/ is missing or damaged gets it rebuilt.',
  ].join('\n'),
  OPTIONS,
);


/** `comlrl train`. */
export async function trainCommand(argv: readonly string[], ctx: CommandContext): Promise<number> {
  const args = commandArgs(argv, OPTIONS, 'train', TRAIN_USAGE, ctx.out);
  if (args === null) return 0;
  const resumeDir = stringOpt(args, 'resume');
  let configFile = stringOpt(args, 'config');
  // A run directory's own config.yaml: comlrl writes its paths absolute, but one written before
  // that holds them relative to where the run was started (the working directory, as then).
  const fromRunDir = configFile === undefined;
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
  const config = loadConfig(configFile, listOpt(args, 'set'), fromRunDir ? { baseDir: process.cwd() } : {});
  const stopAfter = intOpt(args, 'stop-after', 'train', 1);
  let resume: ResumePoint | undefined;
  let restartIn: string | undefined;
  if (resumeDir !== undefined) {
    try {
      resume = await resolveResume(resumeDir, config);
    } catch (err) {
      // A run killed before its first checkpoint has nothing to continue from: it starts over in
      // the same directory (resolveResume only says so for a real run directory).
      if (!(err instanceof NoCheckpointError)) throw err;
      restartIn = err.runDir;
    }
  }

  // SIGTERM (what job schedulers send before killing a job) is handled like Ctrl-C.
  let runDir: string | undefined;
  const interrupts = handleInterrupts(ctx.err, 'stopping after the current item and writing a checkpoint', undefined, resumeCommandFor, () =>
    runDir === undefined ? undefined : `npx comlrl train --resume ${displayPath(runDir)}`,
  );
  try {
    const result = await runTraining({
      config,
      onRunDir: (dir) => {
        runDir = dir;
      },
      ...(resume ? { resume } : {}),
      ...(restartIn !== undefined ? { restartIn } : {}),
      ...(stopAfter !== undefined ? { stopAfter } : {}),
      signal: interrupts.signal,
      log: ctx.err,
      ...(ctx.progress ? { progress: ctx.progress } : {}),
    });
    // A Ctrl-C is an interruption (130) even when --stop-after was given and not yet reached.
    if (result.completed) return 0;
    return stopAfter !== undefined && !interrupts.signal.aborted ? 0 : 130;
  } catch (err) {
    throw inMemoryCrashWords(err, activeBackend(), budgetBytes(memorySettingsOf(config.memory)));
  } finally {
    interrupts.dispose();
  }
}
