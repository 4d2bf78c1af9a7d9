/** Paths in console messages. */
import * as path from 'node:path';

/** A path for messages: relative to the working directory when inside it, else absolute. */
export function displayPath(p: string): string {
  const rel = path.relative(process.cwd(), p);
  return rel === '' ? '.' : rel.startsWith('..') || path.isAbsolute(rel) ? p : rel;
}
