/**
 * A small command-line parser: `--name value`, `--name=value`, repeatable options and boolean
 * flags, with errors that name the option and the command's usage.
 */

/** Raised for a bad command line; the CLI prints the message and the command's usage, exit code 2. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly command?: string,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

/** One option of a command. */
export interface OptionSpec {
  /** Long name without dashes, e.g. `config`. */
  readonly name: string;
  /** `string`: takes a value; `flag`: boolean, no value. */
  readonly kind: 'string' | 'flag';
  /** May be given several times (values collected in order). */
  readonly repeat?: boolean;
  /** One-letter alias, e.g. `c`. */
  readonly short?: string;
  /** Value placeholder in the usage text, e.g. `FILE`. */
  readonly value?: string;
  /** One line of help. */
  readonly help: string;
}

/** What {@link parseArgs} returns. */
export interface ParsedArgs {
  /** Options that take a value: the last value given (or all values for `repeat` options). */
  readonly values: Readonly<Record<string, string | string[] | undefined>>;
  /** Flags given. */
  readonly flags: ReadonlySet<string>;
  /** Arguments that are not options. */
  readonly positionals: readonly string[];
}

/** Parses `argv` (without the command name) against `specs`. `--help` / `-h` is always a flag. */
export function parseArgs(argv: readonly string[], specs: readonly OptionSpec[], command: string): ParsedArgs {
  const byName = new Map(specs.map((s) => [s.name, s]));
  const byShort = new Map(specs.filter((s) => s.short).map((s) => [s.short as string, s]));
  const values: Record<string, string | string[] | undefined> = {};
  const flags = new Set<string>();
  const positionals: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (arg === '--help' || arg === '-h') {
      flags.add('help');
      continue;
    }
    let spec: OptionSpec | undefined;
    let inline: string | undefined;
    if (arg.startsWith('--')) {
      const eq = arg.indexOf('=');
      const name = eq >= 0 ? arg.slice(2, eq) : arg.slice(2);
      inline = eq >= 0 ? arg.slice(eq + 1) : undefined;
      spec = byName.get(name);
      if (!spec) throw new UsageError(`unknown option --${name}`, command);
    } else if (arg.startsWith('-') && arg.length === 2) {
      spec = byShort.get(arg.slice(1));
      if (!spec) throw new UsageError(`unknown option ${arg}`, command);
    } else {
      positionals.push(arg);
      continue;
    }
    if (spec.kind === 'flag') {
      if (inline !== undefined) throw new UsageError(`option --${spec.name} takes no value`, command);
      flags.add(spec.name);
      continue;
    }
    let value = inline;
    if (value === undefined) {
      if (i + 1 >= argv.length || (argv[i + 1].startsWith('--') && argv[i + 1].length > 2)) {
        throw new UsageError(`option --${spec.name} needs a value${spec.value ? ` (${spec.value})` : ''}`, command);
      }
      value = argv[++i];
    }
    if (spec.repeat) {
      const prev = values[spec.name];
      values[spec.name] = [...(Array.isArray(prev) ? prev : []), value];
    } else {
      values[spec.name] = value;
    }
  }
  return { values, flags, positionals };
}

/** The option's single value, or undefined. */
/**
 * The prologue every command shares: parse its options, print `usage` for `--help` (then the
 * command returns 0 without doing anything: null here), and refuse positional arguments.
 */
export function commandArgs(
  argv: readonly string[],
  specs: readonly OptionSpec[],
  command: string,
  usage: string,
  out: (line: string) => void,
): ParsedArgs | null {
  const args = parseArgs(argv, specs, command);
  if (args.flags.has('help')) {
    out(usage);
    return null;
  }
  if (args.positionals.length > 0) throw new UsageError(`unexpected argument '${args.positionals[0]}'`, command);
  return args;
}

export function stringOpt(args: ParsedArgs, name: string): string | undefined {
  const v = args.values[name];
  return Array.isArray(v) ? v[v.length - 1] : v;
}

/** The option's values (repeatable options). */
export function listOpt(args: ParsedArgs, name: string): string[] {
  const v = args.values[name];
  return v === undefined ? [] : Array.isArray(v) ? [...v] : [v];
}

/** An integer option with bounds; undefined when absent. */
export function intOpt(args: ParsedArgs, name: string, command: string, min = 0): number | undefined {
  const raw = stringOpt(args, name);
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw new UsageError(`option --${name} must be an integer >= ${min}, got '${raw}'`, command);
  return n;
}

/** Usage text: the synopsis, a description and one line per option. */
export function formatUsage(synopsis: string, description: string, specs: readonly OptionSpec[]): string {
  const rows = specs.map((s) => {
    const left = `  ${s.short ? `-${s.short}, ` : ''}--${s.name}${s.kind === 'string' ? ` ${s.value ?? 'VALUE'}` : ''}`;
    return { left, help: s.help + (s.repeat ? ' (repeatable)' : '') };
  });
  rows.push({ left: '  -h, --help', help: 'show this help' });
  const width = Math.max(...rows.map((r) => r.left.length)) + 2;
  return [`usage: ${synopsis}`, '', description, '', 'options:', ...rows.map((r) => r.left.padEnd(width) + r.help)].join('\n');
}
