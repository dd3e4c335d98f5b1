import { cpus } from 'node:os';
/** Argument parsing and logging shared by the bench entry points (bench/*.ts). */

/** full: the published figures; quick: smaller; smoke: tiny, only proves that the part still runs (CI). */
export type BenchMode = 'full' | 'quick' | 'smoke';

/** What every bench entry point accepts: `--quick`, `--smoke`, `--repeat N` (N >= 2), `--out FILE`. */
export interface BenchArgs<C extends { repeat: number }> {
  config: C;
  out: string;
  /** True for `--quick` and `--smoke`. */
  quick: boolean;
  mode: BenchMode;
}

/**
 * Parses `--quick`, `--smoke`, `--repeat N`, `--out FILE` and `--help`; exits with the usage on
 * anything else. `full` / `quick` / `smoke` are the entry point's configurations; `--repeat`
 * overrides any one's count.
 */
export function parseBenchArgs<C extends { repeat: number }>(
  argv: string[],
  usage: string,
  configs: Record<BenchMode, C>,
  defaultOut: string,
): BenchArgs<C> {
  let mode: BenchMode = 'full';
  let repeat: number | undefined;
  let out = defaultOut;
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split('=', 2);
    const value = () => inline ?? argv[++i];
    if (flag === '--quick') mode = 'quick';
    else if (flag === '--smoke') mode = 'smoke';
    else if (flag === '--repeat') repeat = Number(value());
    else if (flag === '--out') out = value();
    else if (flag === '--help' || flag === '-h') {
      console.log(usage);
      process.exit(0);
    } else {
      console.error(`unknown argument ${argv[i]}\n${usage}`);
      process.exit(2);
    }
  }
  const config = { ...configs[mode] };
  if (repeat !== undefined) {
    if (!Number.isInteger(repeat) || repeat < 2) {
      console.error('--repeat must be an integer >= 2');
      process.exit(2);
    }
    config.repeat = repeat;
  }
  return { config, out, quick: mode !== 'full', mode };
}

/** Progress goes to stderr; stdout carries the table only. */
export const log = (msg: string): void => void process.stderr.write(`${msg}\n`);

/** `items` rotated left by `k` (block b of repeat r starts with a different workload each time). */
export function rotate<T>(items: T[], k: number): T[] {
  const s = k % items.length;
  return [...items.slice(s), ...items.slice(0, s)];
}

/** The admin connection every bench uses: `DATABASE_URL` or the local server. */
export const adminUrl = (): string => process.env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/postgres';

/** What every part's JSON `meta` starts with: when, how, how long, on what. */
export interface RunMeta {
  date: string;
  mode: BenchMode;
  durationSeconds: number;
  node: string;
  cpus: number;
  cpuModel?: string;
}

export function runMeta(started: number, mode: BenchMode): RunMeta {
  return {
    date: new Date().toISOString(),
    mode,
    durationSeconds: Math.round((Date.now() - started) / 1000),
    node: process.version,
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model,
  };
}
