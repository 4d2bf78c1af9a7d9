/**
 * Messages of a CoopHE run. Node starts the trusted judge (`judge.py`) with a {@link JudgeJob} on
 * stdin and reads {@link JudgeEvent}s from its stdout; the judge starts the sandboxed runner
 * (`runner.py`) itself. Node talks to a runner directly only in the construction-time probe
 * ({@link RunnerProbeJob} in, the `ready` event on fd 3 out), where no candidate code runs.
 */

/** What the runner reports about the isolation it applied to itself. */
export interface RunnerIsolation {
  landlock_abi: number;
  landlock: boolean;
  seccomp: boolean;
  tmpfs: boolean;
  readonly_root: boolean;
  pid_namespace: boolean;
  rlimits: Record<string, number>;
  platform: string;
  python: string;
  notes: string[];
}

/** The sandbox settings of a runner (snake_case: read by Python). */
export interface RunnerSandboxConfig {
  memory_mb: number;
  /** RLIMIT_CPU; the judge sets it per runner from the tests left. */
  cpu_s: number;
  file_size_mb: number;
  open_files: number;
  processes: number;
  /** The runner's own wall-clock watchdog; the judge sets it per runner. */
  wall_clock_s: number;
  output_chars: number;
  mount_namespace: boolean;
  /** The caller's `/proc/self/ns/mnt`: the runner mounts only in a namespace that differs from it. */
  host_mount_ns: string | null;
  tmpfs_mb: number;
  landlock: boolean;
  seccomp: boolean;
  read_paths: string[];
}

/** The probe job written to a runner's stdin (one line). */
export interface RunnerProbeJob {
  mode: 'probe';
  sandbox: RunnerSandboxConfig;
}

/** One job of the judge: check `code`, execute it in a runner, run `tests` against it. */
export interface JudgeJob {
  mode: 'reward' | 'feedback';
  code: string;
  tests: string[];
  /** Feedback only: main's function text for the AST check of its aux calls. */
  main_func: string | null;
  /** Import lines of the problem (trusted): names they bind resolve in the judge, not the sandbox. */
  imports: string;
  inject_math: boolean;
  double_eval: boolean;
  test_timeout_s: number;
  grace_s: number;
  startup_s: number;
  /** Wall-clock budget of the whole job, restarts included. */
  wall_s: number;
  max_timeouts: number;
  /** The runner's launcher: command (absolute path) and arguments before the runner script. */
  launcher: string[];
  runner: string;
  /** `--comlrl-sandbox=<tag>` on every process of the job, to find them by name. */
  tag: string;
  sandbox: RunnerSandboxConfig;
  /** Bytes of candidate stdout and of stderr kept. */
  output_limit: number;
  /** A fresh directory for this job's runners (Node creates and removes it). */
  workdir: string;
}

/** Outcome of `ast.parse` on the combined code. */
export interface SyntaxReport {
  ok: boolean;
  /** `Combined code syntax OK` or `Combined code has syntax error: <str(e)>`. */
  message: string;
  line: number | null;
  offset: number | null;
  msg: string | null;
}

/** Outcome of one test. `skipped`: never run (3-timeout rule or the call's deadline). */
export interface TestOutcome {
  status: 'pass' | 'fail' | 'timeout' | 'skipped';
  errorType?: string;
  errorMessage?: string;
}

/** Outcome of executing the definitions before the tests. */
export interface ExecReport {
  ok: boolean;
  errorType?: string;
  errorMessage?: string;
}

/** A judge event (stdout line) or the runner's probe answer (fd 3). */
export type JudgeEvent =
  | { ev: 'ready'; isolation: RunnerIsolation }
  | { ev: 'analysis'; problems: string[] }
  | { ev: 'syntax'; ok: boolean; message: string; line: number | null; offset: number | null; msg: string | null }
  | { ev: 'exec'; ok: boolean; error_type?: string; error_message?: string }
  | { ev: 'result'; i: number; status: 'pass' | 'fail' | 'timeout'; error_type?: string; error_message?: string }
  | { ev: 'warning'; message: string }
  | { ev: 'fatal'; message: string }
  | { ev: 'done'; attempts: number; stdout: string; stderr: string };

const EVENTS = new Set(['ready', 'analysis', 'syntax', 'exec', 'result', 'warning', 'fatal', 'done']);

/**
 * Parses one line of the judge (a trusted process: the shape check guards against bugs, not
 * against candidate code, which has no way to write here); null for anything else.
 */
export function parseEvent(line: string): JudgeEvent | null {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const record = value as Record<string, unknown>;
  if (typeof record.ev !== 'string' || !EVENTS.has(record.ev)) return null;
  if (record.ev === 'result' && !Number.isInteger(record.i)) return null;
  if (record.ev === 'result' && !['pass', 'fail', 'timeout'].includes(record.status as string)) return null;
  return record as unknown as JudgeEvent;
}
