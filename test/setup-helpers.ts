import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// What the setup-script tests share: running a script of scripts/ and snapshotting its folder.

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Runs `node scripts/<name> ...args` from the repository root (60 s at most). */
export function runSetupScript(name: string, args: string[], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, [path.join(repoRoot, 'scripts', name), ...args], { cwd: repoRoot, encoding: 'utf8', env: { ...process.env, ...env }, timeout: 60_000 });
}

/** Names and mtimes under `<root>/<folder>` (top two levels): what a failed run must not change. */
export function snapshotFolder(folder: string): string[] {
  const base = path.join(repoRoot, folder);
  if (!fs.existsSync(base)) return [];
  return fs.readdirSync(base).flatMap((a) => {
    const p = path.join(base, a);
    const st = fs.statSync(p);
    return [`${a} ${st.mtimeMs}`, ...(st.isDirectory() ? fs.readdirSync(p).map((b) => `${a}/${b} ${fs.statSync(path.join(p, b)).mtimeMs}`) : [])];
  });
}
