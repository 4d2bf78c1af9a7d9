/** Options of the CoopHE Python sandbox, validated once at construction. */
import { availableParallelism, tmpdir } from 'node:os';
import { z } from 'zod';

const positive = (field: string) =>
  z.number({ error: `CoopHE sandbox option "${field}" must be a number` }).positive(`CoopHE sandbox option "${field}" must be > 0`);
const positiveInt = (field: string) =>
  z
    .number({ error: `CoopHE sandbox option "${field}" must be a number` })
    .int(`CoopHE sandbox option "${field}" must be an integer`)
    .positive(`CoopHE sandbox option "${field}" must be > 0`);

/** zod schema of {@link CoopHESandboxOptions}; unknown keys are rejected so typos surface. */
export const coopHESandboxOptionsSchema = z.strictObject({
  python: z.string({ error: 'CoopHE sandbox option "python" must be a string (executable name or path)' }).min(1).optional(),
  runnerPath: z.string({ error: 'CoopHE sandbox option "runnerPath" must be a string' }).min(1).optional(),
  concurrency: positiveInt('concurrency').optional(),
  testTimeoutS: positive('testTimeoutS').optional(),
  maxTimeouts: positiveInt('maxTimeouts').optional(),
  graceS: positive('graceS').optional(),
  startupTimeoutS: positive('startupTimeoutS').optional(),
  wallClockLimitS: positive('wallClockLimitS').optional(),
  memoryLimitMB: positiveInt('memoryLimitMB').optional(),
  fileSizeLimitMB: positiveInt('fileSizeLimitMB').optional(),
  tmpfsSizeMB: positiveInt('tmpfsSizeMB').optional(),
  maxOpenFiles: positiveInt('maxOpenFiles').optional(),
  maxProcesses: positiveInt('maxProcesses').optional(),
  outputLimitBytes: positiveInt('outputLimitBytes').optional(),
  maxCodeBytes: positiveInt('maxCodeBytes').optional(),
  namespaces: z
    .union([z.boolean(), z.literal('auto')], { error: 'CoopHE sandbox option "namespaces" must be true, false or "auto"' })
    .optional(),
  landlock: z.boolean({ error: 'CoopHE sandbox option "landlock" must be a boolean' }).optional(),
  seccomp: z.boolean({ error: 'CoopHE sandbox option "seccomp" must be a boolean' }).optional(),
  readablePaths: z.array(z.string(), { error: 'CoopHE sandbox option "readablePaths" must be an array of paths' }).optional(),
  tmpDir: z.string({ error: 'CoopHE sandbox option "tmpDir" must be a string' }).min(1).optional(),
  log: z.custom<(message: string) => void>((v) => typeof v === 'function', {
    error: 'CoopHE sandbox option "log" must be a function (message: string) => void',
  }).optional(),
});

/**
 * Sandbox options. Defaults: the reference's per-test limit (10 s) and 3-timeout rule; 1 GiB of
 * address space, 16 MiB files, 64 open files and 64 processes per run; namespaces, Landlock and
 * seccomp wherever the OS allows them.
 */
export interface CoopHESandboxOptions {
  /** Python 3 executable (name on PATH or path). Default `python3`. */
  python?: string;
  /** The runner script; default: the `rewards/coophe/runner.py` shipped with the package. */
  runnerPath?: string;
  /** Subprocesses running at once. Default: CPU count, at most 8. */
  concurrency?: number;
  /** Per-test limit in seconds (reference: 10). */
  testTimeoutS?: number;
  /** Tests stop after this many timeouts; the rest count as failed (reference: 3). */
  maxTimeouts?: number;
  /** Slack of the Node-side watchdog beyond each phase's own limit. Default max(2, testTimeoutS/2). */
  graceS?: number;
  /** Time allowed for the interpreter to start and lock itself down. Default 20 s. */
  startupTimeoutS?: number;
  /** Hard wall-clock limit of one reward call, all restarts included. Default from the test count. */
  wallClockLimitS?: number;
  /** RLIMIT_AS in MiB. Default 1024. */
  memoryLimitMB?: number;
  /** RLIMIT_FSIZE in MiB. Default 16. */
  fileSizeLimitMB?: number;
  /** Size of the private tmpfs work dir (mount namespace only). Default 64. */
  tmpfsSizeMB?: number;
  /** RLIMIT_NOFILE. Default 64. */
  maxOpenFiles?: number;
  /** RLIMIT_NPROC. Default 64. */
  maxProcesses?: number;
  /** Bytes of stdout and of stderr kept per call (the rest is read and dropped). Default 64 KiB. */
  outputLimitBytes?: number;
  /**
   * Largest combined code (UTF-8 bytes) that is run. Larger code is scored as a syntax error,
   * with a warning through `log`, instead of being sent to Python. Default 8 MiB.
   */
  maxCodeBytes?: number;
  /** Run under `unshare` (user, mount, pid, net namespaces): `auto` (default) when permitted, `true` requires it. */
  namespaces?: boolean | 'auto';
  /** Apply Landlock when the kernel has it. Default true. */
  landlock?: boolean;
  /** Apply the seccomp filter on Linux x86_64/aarch64. Default true. */
  seccomp?: boolean;
  /** Extra paths candidate code may read (the interpreter and system libraries always may). */
  readablePaths?: string[];
  /** Parent of the per-run temporary work dirs. Default `os.tmpdir()`. */
  tmpDir?: string;
  /** Where missing isolation layers are reported. Default `console.warn`. */
  log?: (message: string) => void;
}

/** Options with every default filled in. */
export type ResolvedSandboxOptions = Required<Omit<CoopHESandboxOptions, 'runnerPath' | 'wallClockLimitS'>> &
  Pick<CoopHESandboxOptions, 'runnerPath' | 'wallClockLimitS'>;

/** Validates `options` and fills the defaults. */
export function resolveSandboxOptions(options: CoopHESandboxOptions = {}): ResolvedSandboxOptions {
  const parsed = coopHESandboxOptionsSchema.safeParse(options);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue.path.length > 0 ? ` (at "${issue.path.join('.')}")` : '';
    throw new TypeError(`${issue.message}${where}`);
  }
  const o = parsed.data;
  const testTimeoutS = o.testTimeoutS ?? 10;
  return {
    python: o.python ?? 'python3',
    runnerPath: o.runnerPath,
    concurrency: o.concurrency ?? Math.max(1, Math.min(8, availableParallelism())),
    testTimeoutS,
    maxTimeouts: o.maxTimeouts ?? 3,
    graceS: o.graceS ?? Math.max(2, testTimeoutS / 2),
    startupTimeoutS: o.startupTimeoutS ?? 20,
    wallClockLimitS: o.wallClockLimitS,
    memoryLimitMB: o.memoryLimitMB ?? 1024,
    fileSizeLimitMB: o.fileSizeLimitMB ?? 16,
    tmpfsSizeMB: o.tmpfsSizeMB ?? 64,
    maxOpenFiles: o.maxOpenFiles ?? 64,
    maxProcesses: o.maxProcesses ?? 64,
    outputLimitBytes: o.outputLimitBytes ?? 64 * 1024,
    maxCodeBytes: o.maxCodeBytes ?? 8 * 1024 * 1024,
    namespaces: o.namespaces ?? 'auto',
    landlock: o.landlock ?? true,
    seccomp: o.seccomp ?? true,
    readablePaths: o.readablePaths ?? [],
    tmpDir: o.tmpDir ?? tmpdir(),
    log: o.log ?? ((message: string) => console.warn(message)),
  };
}
