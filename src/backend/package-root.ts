import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * comlrl's package root: the nearest folder above this module whose package.json is comlrl's
 * (its scripts/, native/ and examples/ ship there; setup-home.ts derives the backends' folder from it).
 */
export function packageRoot(): string | null {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: unknown };
      if (pkg.name === 'comlrl') return dir;
    } catch {
      // no package.json here: keep walking up
    }
    const up = path.dirname(dir);
    if (up === dir) return null;
    dir = up;
  }
}
