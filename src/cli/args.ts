/** Bad command line: the caller prints the usage and exits 2. @internal */
export class UsageError extends Error {}

/** How a flag takes its value: one value, a value each time it is given, or none. */
type FlagShape = 'value' | 'list' | 'bool';

/** Every flag the CLI knows, with its shape. Which command accepts which is checked by the command. */
const FLAGS: Record<string, FlagShape> = {
  url: 'value',
  schema: 'value',
  all: 'bool',
  run: 'list',
  history: 'list',
  app: 'value',
  kind: 'value',
  out: 'value',
  limit: 'value',
  json: 'bool',
  status: 'list',
  'in-doubt': 'bool',
  'dead-lettered': 'bool',
  after: 'value',
  reason: 'value',
  by: 'value',
  payload: 'value',
  as: 'value',
  result: 'value',
  error: 'value',
  note: 'value',
  force: 'bool',
  timezone: 'value',
  input: 'value',
  'catch-up': 'value',
  overlap: 'value',
  'concurrency-key': 'value',
  replace: 'bool',
  version: 'value',
  from: 'value',
  original: 'value',
  'edit-step': 'value',
  'edit-value': 'value',
  key: 'value',
  'keep-keys': 'bool',
  'in-place': 'bool',
  'show-data': 'bool',
  help: 'bool',
};

/** A command line split into its words and its flags. */
export interface Args {
  positional: string[];
  values: Map<string, string>;
  lists: Map<string, string[]>;
  bools: Set<string>;
}

/** Splits argv; `--flag value` and `--flag=value` both work; an unknown flag is a UsageError. */
export function parseArgs(argv: string[]): Args {
  const args: Args = { positional: [], values: new Map(), lists: new Map(), bools: new Set() };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '-h') {
      args.bools.add('help');
      continue;
    }
    if (!arg.startsWith('--')) {
      args.positional.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    const shape = FLAGS[name];
    if (!shape) throw new UsageError(`unknown option --${name}`);
    if (shape === 'bool') {
      if (eq >= 0) throw new UsageError(`--${name} takes no value`);
      args.bools.add(name);
      continue;
    }
    let value: string | undefined;
    if (eq >= 0) value = arg.slice(eq + 1);
    else {
      value = argv[++i];
      if (value !== undefined && value.startsWith('--')) value = undefined;
    }
    if (value === undefined || value === '') throw new UsageError(`--${name} needs a value`);
    if (shape === 'list') args.lists.set(name, [...(args.lists.get(name) ?? []), value]);
    else if (args.values.has(name)) throw new UsageError(`--${name} given twice`);
    else args.values.set(name, value);
  }
  return args;
}

/** The whole number of `--name` (at least `min`), or undefined when not given. */
export function wholeNumber(args: Args, name: string, min: number): number | undefined {
  const v = args.values.get(name);
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new UsageError(`--${name} must be a whole number >= ${min}`);
  return n;
}

/** The JSON value of `--name`, or undefined when not given; a UsageError naming the flag when it does not parse. */
export function jsonValue(args: Args, name: string): unknown {
  const v = args.values.get(name);
  if (v === undefined) return undefined;
  try {
    return JSON.parse(v) as unknown;
  } catch (e) {
    throw new UsageError(`--${name} must be JSON (${(e as Error).message}); quote a string as '"text"'`);
  }
}
