/**
 * comlrl as a dependency, the two ways a research project gets it (docs/install.md):
 * - the packed tarball holds the library and nothing of the repository's own (tests, benches, CI),
 *   installs into a fresh project outside the clone, and there `examples/library.mjs` trains, the
 *   `.ts` example compiles against the installed type declarations and runs, and the `comlrl` command
 *   lists every registered trainer;
 * - a git URL (this clone's HEAD commit, as `git+file://`): npm clones it, runs comlrl's `prepare`
 *   (which builds dist/), and the installed package imports and answers `--help`.
 *
 * The installs are offline (tests never reach the network): each fresh project gets a lockfile made
 * of comlrl's own lock entries for its production dependencies, which `npm ci` here already put in
 * npm's cache, and comlrl itself resolved to the tarball or the git URL. The packed dist/ is the one
 * `npm test`'s pretest built.
 */
import { execFileSync, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import '../trainers/builtin.js';
import { trainerNames } from '../trainers/registry.js';

const ROOT = resolve(import.meta.dirname, '..');
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';

interface LockEntry {
  readonly version?: string;
  readonly dev?: boolean;
  readonly [key: string]: unknown;
}
interface Lockfile {
  readonly lockfileVersion: number;
  readonly packages: Record<string, LockEntry>;
}
interface PackedFile {
  readonly path: string;
}

/** The child's environment: no backend choice or backend home inherited from the test run, no network. */
function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, npm_config_offline: 'true', npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' };
  for (const k of ['COMLRL_BACKEND', 'COMLRL_HOME', 'NODE_OPTIONS', 'VITEST', 'VITEST_POOL_ID', 'VITEST_WORKER_ID']) delete env[k];
  return env;
}

function run(cmd: string, args: readonly string[], cwd: string, env: NodeJS.ProcessEnv = childEnv()): SpawnSyncReturns<string> {
  const r = spawnSync(cmd, args, { cwd, env, encoding: 'utf8', timeout: 240_000 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} (in ${cwd}) exited ${r.status ?? r.signal}:\n${r.stdout}\n${r.stderr}`);
  return r;
}

/** A lockfile for a project whose one dependency is comlrl from `source` (a `file:` tarball or a git URL): comlrl's production entries. */
function consumerLock(source: string): Lockfile {
  const own = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as Lockfile;
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Record<string, unknown>;
  const packages: Record<string, LockEntry> = {
    '': { name: 'comlrl-consumer', dependencies: { comlrl: source } },
    'node_modules/comlrl': {
      version: String(pkg.version),
      resolved: source,
      license: pkg.license,
      dependencies: pkg.dependencies,
      bin: pkg.bin,
      engines: pkg.engines,
      peerDependencies: pkg.peerDependencies,
      peerDependenciesMeta: pkg.peerDependenciesMeta,
    },
  };
  for (const [key, entry] of Object.entries(own.packages)) if (key.startsWith('node_modules/') && entry.dev !== true) packages[key] = entry;
  return { ...own, packages, name: 'comlrl-consumer' } as Lockfile;
}

/** A project folder whose package.json and lockfile name comlrl from `source`. */
function freshProject(dir: string, source: string): string {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'comlrl-consumer', private: true, type: 'module', dependencies: { comlrl: source } }, null, 2));
  writeFileSync(join(dir, 'package-lock.json'), JSON.stringify(consumerLock(source), null, 2));
  return dir;
}

/** This clone's HEAD commit, or null where the checkout is not a git repository. */
function headCommit(): string | null {
  const r = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

describe('the packed package', () => {
  let work = '';
  let project = '';
  let tgz = '';

  beforeAll(() => {
    if (!existsSync(join(ROOT, 'dist', 'src', 'index.js'))) throw new Error('dist/ is missing: run `npm run build` (npm test does it in pretest)');
    work = mkdtempSync(join(tmpdir(), 'comlrl-package-'));
    // --ignore-scripts: prepack would rebuild dist/, which pretest already built.
    const packed = run(NPM, ['pack', '--ignore-scripts', '--json', '--pack-destination', work], ROOT);
    const [info] = JSON.parse(packed.stdout) as { filename: string }[];
    tgz = join(work, info.filename);
    project = freshProject(join(work, 'project'), `file:${tgz}`);
    run(NPM, ['ci', '--offline', '--ignore-scripts', '--no-audit', '--no-fund'], project);
  }, 300_000);

  afterAll(() => {
    if (work !== '') rmSync(work, { recursive: true, force: true });
  });

  test('holds the library, its types, the command and the user-facing files, and nothing of the repository itself', () => {
    const r = run(NPM, ['pack', '--dry-run', '--ignore-scripts', '--json'], ROOT);
    const [info] = JSON.parse(r.stdout) as { files: PackedFile[] }[];
    const files = info.files.map((f) => f.path);
    for (const must of [
      'package.json',
      'README.md',
      'dist/src/index.js',
      'dist/src/index.d.ts',
      'dist/trainers/index.js',
      'dist/trainers/index.d.ts',
      'dist/envs/index.js',
      'dist/rewards/index.js',
      'dist/cli/main.js',
      'examples/library.mjs',
      'examples/library.ts',
      'native/torch/comlrl_torch.cc',
      'scripts/setup-torch.mjs',
      'docs/install.md',
    ])
      expect(files, must).toContain(must);
    expect(files.some((f) => f.startsWith('examples/configs/') && f.endsWith('.yaml'))).toBe(true);
    expect(files.some((f) => f.startsWith('rewards/coophe/') && f.endsWith('.py'))).toBe(true);
    const foreign = files.filter((f) => /^(test|bench|\.ci|src|trainers|envs|cli)\//.test(f) || /^dist\/(test|bench|scripts)\//.test(f) || f.endsWith('.test.js') || f.startsWith('node_modules/'));
    expect(foreign).toEqual([]);
  });

  test('installs offline into a fresh project: library.mjs trains 2 items and saves Hugging Face folders', () => {
    const example = join(project, 'node_modules', 'comlrl', 'examples', 'library.mjs');
    expect(existsSync(example)).toBe(true);
    execFileSync('cp', [example, project]);
    const out = join(work, 'runs-mjs');
    const r = run(process.execPath, ['library.mjs'], project, { ...childEnv(), COMLRL_EXAMPLE_OUT: out });
    expect(r.stdout).toMatch(/^before -?\d/m);
    expect(r.stdout).toMatch(/^after -?\d/m);
    expect(r.stdout).toContain(`saved ${out}/final`);
    for (const agent of ['agent_0', 'agent_1']) expect(existsSync(join(out, 'final', agent, 'config.json')), agent).toBe(true);
  }, 240_000);

  test('library.ts compiles with --strict against the installed declarations and runs', () => {
    execFileSync('cp', [join(project, 'node_modules', 'comlrl', 'examples', 'library.ts'), project]);
    // The user installs typescript and @types/node in their project; the repository's own copies stand in (offline).
    const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    run(process.execPath, [tsc, 'library.ts', '--module', 'nodenext', '--target', 'es2022', '--strict', '--skipLibCheck', '--typeRoots', join(ROOT, 'node_modules', '@types'), '--types', 'node'], project);
    const out = join(work, 'runs-ts');
    const r = run(process.execPath, ['library.js'], project, { ...childEnv(), COMLRL_EXAMPLE_OUT: out });
    expect(r.stdout).toContain('after');
    expect(existsSync(join(out, 'final', 'agent_1', 'config.json'))).toBe(true);
  }, 240_000);

  test('`comlrl --help` from the installed bin lists every registered trainer', () => {
    const bin = join(project, 'node_modules', '.bin', 'comlrl');
    const r = run(bin, ['--help'], project);
    const names = trainerNames();
    expect(names.length).toBe(9);
    for (const name of names) expect(r.stdout + r.stderr, name).toContain(name);
  });
});

const HEAD = headCommit();

describe.skipIf(HEAD === null)('installed from a git URL', () => {
  let work = '';
  afterAll(() => {
    if (work !== '') rmSync(work, { recursive: true, force: true });
  });

  test('npm clones the commit, its prepare script builds dist/, and the package imports and runs its bin', () => {
    work = mkdtempSync(join(tmpdir(), 'comlrl-git-'));
    // Install scripts stay on: `prepare` is what builds dist/ in the clone npm makes.
    const project = freshProject(work, `git+file://${ROOT}#${HEAD}`);
    run(NPM, ['ci', '--offline', '--no-audit', '--no-fund'], project);
    const installed = join(project, 'node_modules', 'comlrl');
    expect(existsSync(join(installed, 'dist', 'src', 'index.d.ts'))).toBe(true);
    expect(existsSync(join(installed, 'test'))).toBe(false);
    const probe = "import('comlrl').then(async (c) => { const t = await import('comlrl/trainers'); console.log(typeof c.loadAgent, typeof t.MAGRPOTrainer, typeof t.CoLLMCCTrainer); })";
    expect(run(process.execPath, ['--input-type=module', '-e', probe], project).stdout.trim()).toBe('function function function');
    const help = run(join(project, 'node_modules', '.bin', 'comlrl'), ['--help'], project);
    for (const name of trainerNames()) expect(help.stdout + help.stderr, name).toContain(name);
  }, 300_000);
});
