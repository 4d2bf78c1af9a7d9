/**
 * Up-front checks of output paths given on the command line or in a config, so a bad path is
 * refused before any work (loading models, training, evaluating) with a message naming the option,
 * instead of a raw EEXIST / ENOTDIR / EACCES from the first write.
 */
import { accessSync, constants, statSync, type Stats } from 'node:fs';
import * as path from 'node:path';

function statOf(p: string): Stats | undefined {
  try {
    return statSync(p);
  } catch {
    return undefined;
  }
}

/** The nearest existing ancestor of `p` (p itself excluded) and its stats. */
function existingAncestor(p: string): { dir: string; stat: Stats | undefined } {
  let dir = path.dirname(p);
  for (;;) {
    const st = statOf(dir);
    if (st !== undefined || path.dirname(dir) === dir) return { dir, stat: st };
    dir = path.dirname(dir);
  }
}

function checkParent(abs: string, option: string, shown: string): string | undefined {
  const { dir, stat } = existingAncestor(abs);
  if (stat === undefined) return undefined;
  if (!stat.isDirectory()) return `${option} ${shown}: ${dir} is a file, not a directory`;
  try {
    accessSync(dir, constants.W_OK);
  } catch {
    return `${option} ${shown}: cannot create it, ${dir} is not writable`;
  }
  return undefined;
}

/**
 * Why `dir` cannot serve as an output directory (a file is there, a parent is a file or not
 * writable), or undefined when it can. `option` names the setting in the message (`output.dir`, `--out`).
 */
export function outputDirProblem(dir: string, option: string): string | undefined {
  const abs = path.resolve(dir);
  const st = statOf(abs);
  if (st !== undefined) {
    if (!st.isDirectory()) return `${option} ${dir} is a file, not a directory; choose a directory`;
    try {
      accessSync(abs, constants.W_OK);
    } catch {
      return `${option} ${dir} is not writable`;
    }
    return undefined;
  }
  return checkParent(abs, option, dir);
}

/** Why `file` cannot be written as an output file (it is a directory, a parent is a file, ...), or undefined. */
export function outputFileProblem(file: string, option: string): string | undefined {
  const abs = path.resolve(file);
  const st = statOf(abs);
  if (st !== undefined) {
    if (st.isDirectory()) return `${option} ${file} is a directory; give a file path such as ${path.join(file, 'eval.json')}`;
    try {
      accessSync(abs, constants.W_OK);
    } catch {
      return `${option} ${file} is not writable`;
    }
    return undefined;
  }
  return checkParent(abs, option, file);
}
