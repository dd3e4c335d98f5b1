import { fork } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { adminUrl, log, parseBenchArgs, rotate, runMeta } from './cli';
import { compileBundled } from './compile';
import { BenchDatabase, dropDatabase } from './database';
import { BOOT_KIND, type BootReport } from './boot-process';
import { median, spread, Spread } from './stats';

/**
 * `npm run bench:boot [-- --quick | --smoke] [-- --repeat N] [-- --out FILE]`
 * Boot like a plain Nest app (issue 47 part 4): process start → first claim of a worker process (a Nest
 * application context with `DurableExecutionModule` on the app's TypeORM DataSource, one workflow, a
 * run already due), against a bare Nest application context with the same DataSource and its first
 * query (bench/boot-process.ts). Each boot is a fresh OS process running compiled JavaScript (as a
 * deployed worker does; compiled once, like the workers part's), the modes alternating; the ratio is
 * taken per repeat, from neighbouring boots, and reported as its median (min-max).
 */

interface BootConfig {
  repeat: number;
  /** Also boot the worker with `migrationsRun: true` (no headline figure). */
  migrate: boolean;
}

const FULL: BootConfig = { repeat: 20, migrate: true };
/** `--quick`: the headline's pair (plain, worker) only. */
const QUICK: BootConfig = { repeat: 8, migrate: false };
/** `--smoke` (CI): proves the part runs, measures nothing worth reading. */
const SMOKE: BootConfig = { repeat: 2, migrate: true };

const USAGE = `usage: npm run bench:boot -- [--quick | --smoke] [--repeat N] [--out FILE]
  --smoke      2 boots of each (CI checks that the part still runs)
  --quick      8 boots of the plain app and the worker (default: 20 of each, and with migrationsRun)
  --repeat N   boots of each (N >= 2)
  --out FILE   where to write the JSON results (default bench/boot-results.json)
  DATABASE_URL admin connection (default postgres://root@127.0.0.1:5432/postgres)`;

/** The modes booted in each repeat: the plain app, the worker, the worker applying its migrations. */
const MODES = ['plain', 'worker', 'worker+migrate'] as const;
type Mode = (typeof MODES)[number];

/**
 * Compiles bench/boot-process.ts and the library to .tmp/bench-boot, emit only, and bundles the library
 * there as `npm run build` does, so the worker loads what an app loads from the package (compileBundled;
 * not under bench/, where pg would resolve to the peers' copy, a second pg beside TypeORM's).
 */
function compileChild(): string {
  return compileBundled('bench-boot', [join(__dirname, 'boot-process.ts')])[0];
}

interface Boot extends BootReport {
  /** Parent's clock: fork() → the child's ready message. */
  wallMs: number;
}

async function boot(script: string, mode: Mode, url: string): Promise<Boot> {
  const t0 = performance.now();
  const child = fork(script, [mode === 'plain' ? 'plain' : 'worker'], {
    execArgv: [],
    env: { ...process.env, BOOT_URL: url, BOOT_MIGRATIONS_RUN: mode === 'worker+migrate' ? '1' : '0' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  try {
    return await new Promise<Boot>((resolve, reject) => {
      child.once('message', (m: BootReport) => resolve({ ...m, wallMs: performance.now() - t0 }));
      child.once('exit', (code) =>
        reject(new Error(`boot process (${mode}) exited with ${code} before ready`)),
      );
    });
  } finally {
    clearTimeout(timer);
    await new Promise<void>((r) => (child.exitCode !== null ? r() : child.once('exit', () => r())));
  }
}

/** What one boot spent in each phase, on its own clock and in CPU (ms): see `BootReport.marks`. */
const PHASES = ['require Nest, TypeORM', 'require the library', 'create the context', 'first claim / query'];

function phasesOf(b: Boot): Array<{ wallMs: number; cpuMs: number }> {
  const { nest, library } = b.marks;
  const from = library ?? nest;
  // The worker's first claim may come before createApplicationContext resolves (it starts in
  // onApplicationBootstrap): then the context phase ends at ready and the last one is empty.
  const context = b.marks.context ?? { atMs: b.sinceStartMs, cpuMs: b.cpuMs };
  return [
    nest,
    library ? { atMs: library.atMs - nest.atMs, cpuMs: library.cpuMs - nest.cpuMs } : { atMs: 0, cpuMs: 0 },
    { atMs: context.atMs - from.atMs, cpuMs: context.cpuMs - from.cpuMs },
    { atMs: b.sinceStartMs - context.atMs, cpuMs: b.cpuMs - context.cpuMs },
  ].map((x) => ({ wallMs: x.atMs, cpuMs: x.cpuMs }));
}

function phaseSpreads(boots: Boot[]): Array<{ phase: string; wallMs: Spread; cpuMs: Spread }> {
  return PHASES.map((phase, i) => ({
    phase,
    wallMs: spread(boots.map((b) => phasesOf(b)[i].wallMs)),
    cpuMs: spread(boots.map((b) => phasesOf(b)[i].cpuMs)),
  }));
}

interface Figures {
  wallMs: Spread;
  sinceStartMs: Spread;
  cpuMs: Spread;
  modules: Spread;
  phases: ReturnType<typeof phaseSpreads>;
}

const LABEL: Record<Mode, string> = {
  plain: 'plain Nest context, first query',
  worker: 'worker, first claim',
  'worker+migrate': 'worker, migrationsRun: true',
};

function printTable(
  summary: { meta: { loadAverage: Spread }; figures: Record<Mode, Figures>; ratios: Record<string, Spread> },
  mode: string,
  repeat: number,
  modes: Mode[],
): void {
  const f = (s: Spread, d = 0) =>
    Number.isFinite(s.median) ? `${s.median.toFixed(d)} (${s.min.toFixed(d)}-${s.max.toFixed(d)})` : '-';
  const iqr = (s: Spread) =>
    `${s.median.toFixed(2)} (IQR ${s.q1.toFixed(2)}-${s.q3.toFixed(2)}, ${s.min.toFixed(2)}-${s.max.toFixed(2)})`;
  const { figures, ratios } = summary;
  const col = (x: string) => x.padEnd(17);
  console.log(
    `\nBoot to first claim (${mode}, ${repeat} boots of each, alternating; median (min-max); ` +
      `load ${f(summary.meta.loadAverage, 1)})\n` +
      `${'mode'.padEnd(44)} ${col('wall ms')} ${col('own clock ms')} ${col('CPU ms')} modules\n` +
      modes
        .map((m) => {
          const x = figures[m];
          const head = `${LABEL[m].padEnd(44)} ${col(f(x.wallMs))} ${col(f(x.sinceStartMs))} ${col(f(x.cpuMs))} ${median(x.modules.samples)}`;
          const rows = x.phases
            .filter((p) => p.wallMs.max > 0)
            .map((p) => `${`  ${p.phase}`.padEnd(44)} ${col('')} ${col(f(p.wallMs))} ${col(f(p.cpuMs))}`);
          return [head, ...rows].join('\n');
        })
        .join('\n') +
      `\nworker ready / plain, per repeat (wall)      ${iqr(ratios.readyOverPlain)}\n` +
      `worker CPU / plain, per repeat               ${iqr(ratios.cpuOverPlain)}\n` +
      `worker with migrationsRun / plain (wall)     ${f(ratios.readyWithMigrationsRunOverPlain, 2)}`,
  );
}

async function main(): Promise<void> {
  const {
    config: cfg,
    out,
    mode,
  } = parseBenchArgs(
    process.argv.slice(2),
    USAGE,
    { full: FULL, quick: QUICK, smoke: SMOKE },
    join(__dirname, 'boot-results.json'),
  );
  const started = Date.now();
  const admin = adminUrl();
  const db = await BenchDatabase.create(admin);
  try {
    const script = compileChild();
    const boots: Record<Mode, Boot[]> = { plain: [], worker: [], 'worker+migrate': [] };
    const ratio: number[] = [];
    const cpuRatio: number[] = [];
    const migrateRatio: number[] = [];
    const load: number[] = [];
    const modes = MODES.filter((m) => cfg.migrate || m !== 'worker+migrate');
    for (let r = 0; r < cfg.repeat; r++) {
      load.push(loadavg()[0]);
      const got = {} as Record<Mode, Boot>;
      for (const m of rotate([...modes], r)) {
        if (m !== 'plain')
          await db.ctl.query(`insert into ai_runs (kind, input) values ($1, '{}'::jsonb)`, [BOOT_KIND]);
        got[m] = await boot(script, m, db.url);
        boots[m].push(got[m]);
      }
      ratio.push(got.worker.wallMs / got.plain.wallMs);
      cpuRatio.push(got.worker.cpuMs / got.plain.cpuMs);
      if (got['worker+migrate']) migrateRatio.push(got['worker+migrate'].wallMs / got.plain.wallMs);
      log(
        `  [${r + 1}/${cfg.repeat}] plain ${got.plain.wallMs.toFixed(0)} ms, worker ${got.worker.wallMs.toFixed(0)} ms ` +
          `(${ratio[r].toFixed(2)} x)` +
          (got['worker+migrate'] ? `, with migrationsRun ${got['worker+migrate'].wallMs.toFixed(0)} ms` : ''),
      );
    }
    const of = (m: Mode, k: keyof Boot) => spread(boots[m].map((b) => b[k] as number));
    const figures = Object.fromEntries(
      MODES.map((m) => [
        m,
        {
          wallMs: of(m, 'wallMs'),
          sinceStartMs: of(m, 'sinceStartMs'),
          cpuMs: of(m, 'cpuMs'),
          modules: of(m, 'modules'),
          phases: phaseSpreads(boots[m]),
        },
      ]),
    ) as Record<Mode, Figures>;
    const summary = {
      meta: { ...runMeta(started, mode), repeats: cfg.repeat, loadAverage: spread(load) },
      figures,
      ratios: {
        readyOverPlain: spread(ratio),
        cpuOverPlain: spread(cpuRatio),
        readyWithMigrationsRunOverPlain: spread(migrateRatio),
      },
    };
    printTable(summary, mode, cfg.repeat, modes);
    writeFileSync(out, JSON.stringify(summary, null, 2));
    log(`results written to ${out} (${Math.round((Date.now() - started) / 1000)} s)`);
  } finally {
    await db.ctl.end().catch(() => undefined);
    await dropDatabase(admin, db.name);
  }
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
