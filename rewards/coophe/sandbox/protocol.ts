/** Messages between Node and `runner.py`: the job on stdin, events on fd 3. */

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

/** The sandbox settings part of a job (snake_case: read by Python). */
export interface RunnerSandboxConfig {
  memory_mb: number;
  cpu_s: number;
  file_size_mb: number;
  open_files: number;
  processes: number;
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

/** One job: check the syntax of `code`, exec it, run `tests[start..]`. */
export interface RunnerJob {
  mode: 'reward' | 'feedback' | 'probe';
  nonce: string;
  sandbox: RunnerSandboxConfig;
  code?: string;
  tests?: string[];
  start?: number;
  timeouts?: number;
  max_timeouts?: number;
  test_timeout_s?: number;
  inject_math?: boolean;
  double_eval?: boolean;
  /** Feedback only: main's function text for the AST check of its aux calls. */
  main_func?: string | null;
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

/** A parsed fd-3 event. */
export type RunnerEvent =
  | { ev: 'ready'; isolation: RunnerIsolation }
  | { ev: 'analysis'; problems: string[] }
  | { ev: 'syntax'; ok: boolean; message: string; line: number | null; offset: number | null; msg: string | null }
  | { ev: 'exec_start' }
  | { ev: 'exec'; ok: boolean; error_type?: string; error_message?: string }
  | { ev: 'start'; i: number }
  | { ev: 'result'; i: number; status: 'pass' | 'fail' | 'timeout'; error_type?: string; error_message?: string }
  | { ev: 'done' };

const EVENTS = new Set(['ready', 'analysis', 'syntax', 'exec_start', 'exec', 'start', 'result', 'done']);

/** Parses one fd-3 line; null for anything that is not an event of this job (wrong nonce, junk). */
export function parseEvent(line: string, nonce: string): RunnerEvent | null {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const record = value as Record<string, unknown>;
  if (record.n !== nonce || typeof record.ev !== 'string' || !EVENTS.has(record.ev)) return null;
  if ((record.ev === 'start' || record.ev === 'result') && !Number.isInteger(record.i)) return null;
  if (record.ev === 'result' && !['pass', 'fail', 'timeout'].includes(record.status as string)) return null;
  return record as unknown as RunnerEvent;
}
