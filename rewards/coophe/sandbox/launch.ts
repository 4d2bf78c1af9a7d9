/**
 * Construction-time set-up of the sandbox: find the Python interpreter (a clear error when it is
 * missing), find the runner script, and probe which isolation layers this machine permits.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readlinkSync } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ResolvedSandboxOptions } from './options.js';
import { parseEvent, type RunnerIsolation, type RunnerProbeJob, type RunnerSandboxConfig } from './protocol.js';
import { makeWorkDirSync, removeWorkDirSync } from './workdir.js';

/** Raised at construction when the Python executable cannot be run. */
export class PythonNotFoundError extends Error {
  constructor(
    readonly executable: string,
    detail: string,
  ) {
    super(
      `CoopHE reward: cannot run the Python executable "${executable}" (${detail}). ` +
        'The reward checks syntax and runs tests in a real Python 3 subprocess: install python3 ' +
        'or pass the option { python: "/path/to/python3" }.',
    );
    this.name = 'PythonNotFoundError';
  }
}

/** How sandbox processes are started. */
export interface Launcher {
  command: string;
  /** Arguments before the runner script path. */
  args: string[];
  /** Namespaces the launcher creates. */
  namespaces: Array<'user' | 'mount' | 'pid' | 'net'>;
}

/** Which protections a sandbox run gets on this machine. */
export interface CoopHESandboxIsolation {
  launcher: 'unshare' | 'direct';
  namespaces: Array<'user' | 'mount' | 'pid' | 'net'>;
  /** How network access is cut: a network namespace, seccomp (AF_UNIX sockets only), Landlock (TCP only), or not at all. */
  network: 'namespace' | 'seccomp' | 'landlock-tcp' | 'none';
  /** What keeps writes inside the work dir. */
  filesystem: 'landlock' | 'read-only-root' | 'none';
  /** What stops fork bombs. */
  processCreation: 'seccomp' | 'rlimit' | 'none';
  /** What stops signals to processes outside the sandbox (e.g. killing the trainer). */
  signals: 'seccomp' | 'landlock' | 'pid-namespace' | 'none';
  landlockAbi: number;
  seccomp: boolean;
  tmpfs: boolean;
  rlimits: Record<string, number>;
  /** Absolute path of the interpreter the sandbox runs. */
  python: string;
  pythonVersion: string;
  /** Layers that could not be applied, in words. */
  warnings: string[];
}

/** Everything the sandbox needs, decided once at construction. */
export interface SandboxSetup {
  python: string;
  pythonVersion: string;
  runnerPath: string;
  /** The trusted test harness (`judge.py`), run outside the sandbox. */
  judgePath: string;
  launcher: Launcher;
  isolation: CoopHESandboxIsolation;
}

/** Interpreter flags of the judge and the runner: no environment, no site, no bytecode files. */
export const PYTHON_FLAGS = ['-I', '-S', '-B'];

// This process's mount namespace: the runner refuses to mount anything when it is still in it.
const HOST_MOUNT_NS: string | null = (() => {
  try {
    return readlinkSync('/proc/self/ns/mnt');
  } catch {
    return null;
  }
})();

function shippedScript(name: string): string {
  const candidates = [`../${name}`, `../../../../rewards/coophe/${name}`].map((rel) => fileURLToPath(new URL(rel, import.meta.url)));
  const found = candidates.find((p) => existsSync(p));
  if (!found) throw new Error(`CoopHE reward: ${name} not found (looked at ${candidates.join(', ')})`);
  return found;
}

/** The runner script next to this module (sources) or in the package root (compiled `dist/`). */
export function defaultRunnerPath(): string {
  return shippedScript('runner.py');
}

/** The judge script (the trusted test harness), found like {@link defaultRunnerPath}. */
export function defaultJudgePath(): string {
  return shippedScript('judge.py');
}

/** Finds `name` on the parent's PATH (the sandbox itself runs with an empty environment). */
function which(name: string): string | null {
  if (isAbsolute(name) || name.includes('/')) return name;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // keep looking
    }
  }
  return null;
}

/** Resolves the interpreter to an absolute path (a pyenv shim resolves to the real binary). */
function resolvePython(python: string): { path: string; version: string } {
  const r = spawnSync(python, ['-I', '-c', 'import sys; print(sys.executable); print(sys.version_info[0], sys.version_info[1], sys.version.split()[0])'], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (r.error) throw new PythonNotFoundError(python, (r.error as NodeJS.ErrnoException).code ?? r.error.message);
  if (r.status !== 0) throw new PythonNotFoundError(python, `exit status ${r.status}: ${r.stderr.trim().slice(-500)}`);
  const [exe, versionLine] = r.stdout.trim().split('\n');
  const [major, minor, full] = (versionLine ?? '').split(' ');
  if (Number(major) !== 3 || Number(minor) < 8) {
    throw new PythonNotFoundError(python, `Python ${full ?? '?'} found, 3.8 or newer is required`);
  }
  return { path: exe && isAbsolute(exe) ? exe : python, version: full };
}

/** The sandbox part of a job for the given options. */
export function sandboxConfig(
  o: ResolvedSandboxOptions,
  launcher: Launcher,
  budget: { cpuS: number; wallS: number },
): RunnerSandboxConfig {
  return {
    memory_mb: o.memoryLimitMB,
    cpu_s: Math.ceil(budget.cpuS),
    file_size_mb: o.fileSizeLimitMB,
    open_files: o.maxOpenFiles,
    processes: o.maxProcesses,
    wall_clock_s: budget.wallS,
    output_chars: o.outputLimitBytes,
    mount_namespace: launcher.namespaces.includes('mount'),
    host_mount_ns: HOST_MOUNT_NS,
    tmpfs_mb: o.tmpfsSizeMB,
    landlock: o.landlock,
    seccomp: o.seccomp,
    read_paths: o.readablePaths,
  };
}

/** Starts the runner once in probe mode: the isolation it reports, or why it failed. */
function probe(o: ResolvedSandboxOptions, launcher: Launcher, runnerPath: string): RunnerIsolation | string {
  const dir = makeWorkDirSync(o.tmpDir);
  try {
    const job: RunnerProbeJob = {
      mode: 'probe',
      sandbox: sandboxConfig(o, launcher, { cpuS: 30, wallS: 30 }),
    };
    const r = spawnSync(launcher.command, [...launcher.args, runnerPath], {
      cwd: dir,
      env: {},
      input: `${JSON.stringify(job)}\n`,
      stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
      timeout: o.startupTimeoutS * 1000 * 2,
      killSignal: 'SIGKILL',
    });
    const stderr = r.stderr?.toString('utf8').trim().slice(-1000) ?? '';
    if (r.error) return r.error.message;
    if (r.status !== 0) return `exit status ${r.status}${r.signal ? ` (${r.signal})` : ''}: ${stderr}`;
    const fd3 = r.output[3]?.toString('utf8') ?? '';
    for (const line of fd3.split('\n')) {
      const ev = parseEvent(line);
      if (ev?.ev === 'ready') return ev.isolation;
    }
    return `no ready event: ${stderr}`;
  } finally {
    removeWorkDirSync(dir);
  }
}

function describe(launcher: Launcher, iso: RunnerIsolation, python: { path: string; version: string }): CoopHESandboxIsolation {
  const ns = launcher.namespaces;
  const network: CoopHESandboxIsolation['network'] = ns.includes('net')
    ? 'namespace'
    : iso.seccomp
      ? 'seccomp'
      : iso.landlock && iso.landlock_abi >= 4
        ? 'landlock-tcp'
        : 'none';
  const filesystem: CoopHESandboxIsolation['filesystem'] = iso.landlock ? 'landlock' : iso.readonly_root ? 'read-only-root' : 'none';
  // RLIMIT_NPROC never binds uid 0, even mapped through a user namespace.
  const root = typeof process.getuid === 'function' && process.getuid() === 0;
  const processCreation: CoopHESandboxIsolation['processCreation'] = iso.seccomp
    ? 'seccomp'
    : 'RLIMIT_NPROC' in iso.rlimits && !root
      ? 'rlimit'
      : 'none';
  const signals: CoopHESandboxIsolation['signals'] = iso.seccomp
    ? 'seccomp'
    : iso.landlock && iso.landlock_abi >= 6
      ? 'landlock'
      : ns.includes('pid')
        ? 'pid-namespace'
        : 'none';
  const warnings = [...iso.notes];
  if (network === 'none') warnings.push('network access is not cut off (no network namespace, seccomp or Landlock)');
  if (filesystem === 'none') warnings.push('candidate code can write outside its work dir (no Landlock, no mount namespace)');
  if (processCreation === 'none') warnings.push('fork bombs are not contained (no seccomp; RLIMIT_NPROC does not bind root)');
  if (signals === 'none') warnings.push('candidate code can signal other processes of this user');
  return {
    launcher: ns.length > 0 ? 'unshare' : 'direct',
    namespaces: ns,
    network,
    filesystem,
    processCreation,
    signals,
    landlockAbi: iso.landlock_abi,
    seccomp: iso.seccomp,
    tmpfs: iso.tmpfs,
    rlimits: iso.rlimits,
    python: python.path,
    pythonVersion: python.version,
    warnings,
  };
}

/**
 * Resolves the interpreter and runner, then picks the strongest launcher that works here:
 * `unshare` with user+mount+pid+net namespaces (unprivileged), the same without a user namespace
 * (root without user namespaces), or a plain subprocess.
 */
export function setUpSandbox(o: ResolvedSandboxOptions): SandboxSetup {
  const python = resolvePython(o.python);
  const runnerPath = o.runnerPath ?? defaultRunnerPath();
  if (!existsSync(runnerPath)) throw new Error(`CoopHE reward: runner script "${runnerPath}" does not exist`);
  const judgePath = defaultJudgePath();
  const direct: Launcher = { command: python.path, args: PYTHON_FLAGS, namespaces: [] };
  const candidates: Launcher[] = [];
  const unshare = process.platform === 'linux' && o.namespaces !== false ? which('unshare') : null;
  if (unshare) {
    const tail = ['--fork', '--kill-child', '--', python.path, ...PYTHON_FLAGS];
    candidates.push({ command: unshare, args: ['--user', '--map-root-user', '--mount', '--pid', '--net', ...tail], namespaces: ['user', 'mount', 'pid', 'net'] });
    candidates.push({ command: unshare, args: ['--mount', '--pid', '--net', ...tail], namespaces: ['mount', 'pid', 'net'] });
  } else if (o.namespaces === true) {
    throw new Error('CoopHE sandbox: namespaces were required but `unshare` is not available on this machine');
  }
  for (const launcher of candidates) {
    const iso = probe(o, launcher, runnerPath);
    if (typeof iso !== 'string') return { python: python.path, pythonVersion: python.version, runnerPath, judgePath, launcher, isolation: describe(launcher, iso, python) };
  }
  if (o.namespaces === true) throw new Error('CoopHE sandbox: namespaces were required but `unshare` is not permitted here');
  const iso = probe(o, direct, runnerPath);
  if (typeof iso === 'string') {
    throw new Error(
      `CoopHE sandbox: the runner failed to start with ${python.path}: ${iso} ` +
        '(the options landlock: false or seccomp: false help find the layer at fault)',
    );
  }
  return { python: python.path, pythonVersion: python.version, runnerPath, judgePath, launcher: direct, isolation: describe(direct, iso, python) };
}
