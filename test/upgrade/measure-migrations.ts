/**
 * The lock and time of each migration since the previous release on a database of realistic size
 * (docs/UPGRADING.md, "Each migration's lock and cost"): the previous release's schema with `--runs`
 * runs and `--events` events per run (test/upgrade/seed.ts), then this release's migrations one at a
 * time, each in its transaction as `migrate` applies them, `--repeat` times (each on a copy of the seeded
 * database). Prints a Markdown table, min-max of the rounds. Not part of the test suite (minutes):
 *
 *   node -r ts-node/register/transpile-only test/upgrade/measure-migrations.ts --runs 100000 --events 10
 */
import { Client } from 'pg';
import { DURABLE_EXECUTION_MIGRATIONS } from '../../migrations';
import { serverUrl, withDatabase } from '../helpers/database';
import { readCatalog } from './catalog';
import { dropDatabase } from './compatibility';
import { applyObserved, BLOCKS_WRITERS, heavyTables, MigrationEffect } from './migration-effects';
import { previousRelease } from './previous-release';
import { seedPreviousRelease } from './seed';

function flag(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}

async function main(): Promise<void> {
  const runs = flag('runs', 100_000);
  const events = flag('events', 10);
  const repeat = flag('repeat', 3);
  const server = process.env.DATABASE_URL ?? serverUrl();
  const name = `dx_upgrade_measure_${process.pid}`;
  const release = previousRelease();
  const admin = new Client({ connectionString: server });
  await admin.connect();
  await admin.query(`create database ${name}`);
  const url = withDatabase(server, name);
  try {
    await release.load('dist/src/store/run-migrations').runDurableMigrations({ type: 'postgres', url });
    const c = new Client({ connectionString: url });
    await c.connect();
    const t = performance.now();
    await seedPreviousRelease(c, runs, events);
    const sizes = await c.query(
      `select relname, n_live_tup::int as n, pg_size_pretty(pg_total_relation_size(relid)) as size
         from pg_stat_user_tables order by relname`,
    );
    console.log(`seeded in ${Math.round(performance.now() - t)} ms`);
    for (const r of sizes.rows) console.log(`  ${r.relname}: ${r.n} rows, ${r.size}`);
    const catalog = await readCatalog(c);
    await c.end();
    const released = release
      .load('dist/migrations/index')
      .DURABLE_EXECUTION_MIGRATIONS.map((M: new () => { name: string }) => new M().name);
    const fresh = DURABLE_EXECUTION_MIGRATIONS.filter((M) => !released.includes(new M().name));
    const rounds: MigrationEffect[][] = [];
    for (let i = 0; i < repeat; i++) {
      // Each round on a copy of the seeded database (the copy keeps the tables' oids).
      await admin.query(`create database ${name}_r template ${name}`);
      try {
        rounds.push(await applyObserved(withDatabase(server, `${name}_r`), catalog, fresh));
      } finally {
        await dropDatabase(server, `${name}_r`);
      }
    }
    print(rounds);
  } finally {
    await admin.end();
    await dropDatabase(server, name);
  }
}

/** min-max over the rounds, in ms (or s from 1 s on). */
function range(values: number[]): string {
  const [lo, hi] = [Math.min(...values), Math.max(...values)];
  const f = (v: number) => (hi >= 1000 ? (v / 1000).toFixed(1) : String(Math.round(v)));
  const unit = hi >= 1000 ? 's' : 'ms';
  return f(lo) === f(hi) ? `${f(lo)} ${unit}` : `${f(lo)}-${f(hi)} ${unit}`;
}

function print(rounds: MigrationEffect[][]): void {
  console.log(
    `\n| migration | previous-release tables locked | work under the lock | time (${rounds.length} rounds) |`,
  );
  console.log('|---|---|---|---|');
  rounds[0].forEach((e, i) => {
    const blocking = Object.entries(e.locks).filter(([, m]) => BLOCKS_WRITERS.includes(m));
    const locks = blocking.map(([tb, m]) => `${tb} (${m.replace(/Lock$/, '')})`).join(', ') || 'none';
    const work = heavyTables(e).length
      ? [...e.rewritten.map((x) => `rewrite ${x}`), ...e.indexesBuilt.map((x) => `index ${x}`)]
          .concat(
            e.validated.map((x) => `validate ${x}`),
            e.notNullSet.map((x) => `not null ${x}`),
          )
          .concat(Object.entries(e.rowsWritten).map(([tb, n]) => `${n} rows of ${tb} written`))
          .concat(Object.entries(e.rowsReadLocked).map(([tb, n]) => `${n} rows of ${tb} read`))
          .join(', ')
      : blocking.length
        ? 'catalog only'
        : '';
    console.log(`| ${e.name} | ${locks} | ${work} | ${range(rounds.map((r) => r[i].ms))} |`);
  });
  const totals = rounds.map((r) => r.reduce((a, e) => a + e.ms, 0));
  console.log(`| all ${rounds[0].length} | | | ${range(totals)} |`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
