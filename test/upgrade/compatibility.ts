import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from 'pg';
import type { MigrationInterface } from 'typeorm';
import { DURABLE_EXECUTION_MIGRATIONS } from '../../migrations';
import { storeStatements } from '../colocation/store-statements';
import { withDatabase } from '../helpers/database';
import { Catalog, readCatalog } from './catalog';
import { Described, describeStatement } from './describe';
import { applyObserved, heavyTables, MigrationEffect } from './migration-effects';
import { DECLARED_LOCKS, DeclaredLock } from './migration-locks';
import type { BuiltRelease } from './previous-release';
import { catalogProblems } from './schema-rules';
import { seedPreviousRelease } from './seed';

const ROOT = path.join(__dirname, '..', '..');

type MigrationClass = new () => MigrationInterface & { name?: string };

/**
 * The statements the previous release sends, read from its src/store as test/colocation reads this
 * one's (every `*_SQL` constant and every text handed to a query), built with its own default names. A
 * fragment that is no statement on its own fails to parse on both schemas and is left out by the check.
 */
export function releaseStatements(release: BuiltRelease): Map<string, string> {
  const src = path.join(release.root, 'src') + path.sep;
  const load = (id: string) =>
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    require(id.startsWith(src) ? path.join(release.root, 'dist', 'src', id.slice(src.length)) : id);
  const names = release.load('dist/src/store/durable-names').DEFAULT_NAMES;
  const s = storeStatements(load, { root: release.root, names });
  const ids = new Set([...s.constants, ...s.sent.keys()]);
  return new Map([...ids].map((id) => [id, s.texts.get(id)!]));
}

/** The previous release's schema with a few rows, and what its statements are there. */
export interface Baseline {
  /** A database to clone (`create database ... template`): the previous release migrated and seeded. */
  template: string;
  catalog: Catalog;
  statements: Map<string, string>;
  described: Map<string, Described>;
  release: BuiltRelease;
  /** The migrations of the previous release, by name. */
  released: string[];
}

async function admin<T>(server: string, fn: (c: Client) => Promise<T>): Promise<T> {
  const c = new Client({ connectionString: server });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

async function on<T>(url: string, fn: (c: Client) => Promise<T>): Promise<T> {
  return admin(url, fn);
}

/** Builds the baseline in a new database `name` on `server` (dropped by `dropDatabase`). */
export async function prepareBaseline(
  server: string,
  name: string,
  release: BuiltRelease,
): Promise<Baseline> {
  await admin(server, (c) => c.query(`create database ${name}`));
  const url = withDatabase(server, name);
  await release.load('dist/src/store/run-migrations').runDurableMigrations({ type: 'postgres', url });
  const statements = releaseStatements(release);
  return on(url, async (c) => {
    await seedPreviousRelease(c, 200, 5);
    const described = new Map<string, Described>();
    for (const [id, text] of statements) described.set(id, await describeStatement(c, text));
    const released = release
      .load('dist/migrations/index')
      .DURABLE_EXECUTION_MIGRATIONS.map((M: MigrationClass) => new M().name as string);
    return { template: name, catalog: await readCatalog(c), statements, described, release, released };
  });
}

export async function dropDatabase(server: string, name: string): Promise<void> {
  await admin(server, (c) => c.query(`drop database if exists ${name} with (force)`));
}

/** What the check found: `problems` fail it; the rest is its record (docs/UPGRADING.md's lock table). */
export interface CompatibilityReport {
  problems: string[];
  /** The migrations since the previous release, each with what it did to the previous release's tables. */
  effects: MigrationEffect[];
  /** Statements of the previous release that prepare on its own schema (and were held to the new one). */
  checked: number;
  /** Statements that return more columns now (`select *`): a process holding them prepared gets 0A000. */
  widened: string[];
}

/**
 * The compatibility rule, checked (docs/UPGRADING.md): on a copy of the baseline, applies this release's
 * migrations that the previous release does not have, one at a time, then fails when
 * - a statement of the previous release that prepares on its schema no longer does (a table or column
 *   it reads or writes dropped or renamed, an ON CONFLICT target gone, ...) or returns a column it read
 *   with another type or not at all;
 * - the catalog no longer accepts what the previous release writes (test/upgrade/schema-rules.ts);
 * - a migration does work that grows with a previous-release table while holding a lock that stops its
 *   writers (a rewrite, an index built in the transaction, a constraint validated at once, a column made
 *   NOT NULL, a backfill) and is not declared in test/upgrade/migration-locks.ts and docs/UPGRADING.md,
 *   or is declared and does not;
 * - a migration of the previous release was edited or dropped since.
 */
export async function checkCompatibility(
  server: string,
  base: Baseline,
  opts: { extra?: MigrationClass[]; declared?: Record<string, DeclaredLock> } = {},
): Promise<CompatibilityReport> {
  const name = `${base.template}_c${Math.floor(Math.random() * 1e6)}`;
  await admin(server, (c) => c.query(`create database ${name} template ${base.template}`));
  const url = withDatabase(server, name);
  try {
    const mine = [...(DURABLE_EXECUTION_MIGRATIONS as MigrationClass[]), ...(opts.extra ?? [])];
    const fresh = mine.filter((M) => !base.released.includes(new M().name as string));
    const problems = releasedMigrationProblems(base, mine);
    const effects = await applyObserved(url, base.catalog, fresh);
    const report = await on(url, async (c) => {
      const widened: string[] = [];
      let checked = 0;
      for (const [id, text] of base.statements) {
        const was = base.described.get(id)!;
        if (!was.ok) continue;
        checked++;
        const now = await describeStatement(c, text);
        if (!now.ok) {
          problems.push(`${id}: fails to prepare now: ${now.code} ${now.message}`);
          continue;
        }
        for (const col of was.columns) {
          const is = now.columns.find((x) => x.name === col.name);
          if (!is) problems.push(`${id}: returns no column ${col.name} any more`);
          else if (is.type !== col.type)
            problems.push(`${id}: column ${col.name} is ${is.type}, was ${col.type}`);
        }
        if (now.columns.length > was.columns.length) widened.push(id);
      }
      problems.push(...(await catalogProblems(c, base.catalog, await readCatalog(c))));
      return { problems, effects, checked, widened };
    });
    report.problems.push(...lockProblems(effects, opts.declared ?? DECLARED_LOCKS));
    return report;
  } finally {
    await dropDatabase(server, name);
  }
}

function releasedMigrationProblems(base: Baseline, mine: MigrationClass[]): string[] {
  const names = mine.map((M) => new M().name as string);
  const problems = base.released
    .filter((n, i) => names[i] !== n)
    .map((n) => `released migration ${n} is no longer at its place in DURABLE_EXECUTION_MIGRATIONS`);
  const dir = path.join(base.release.root, 'migrations');
  for (const f of readdirSync(dir).filter((x) => /^\d+-.*\.ts$/.test(x))) {
    let now: string | undefined;
    try {
      now = readFileSync(path.join(ROOT, 'migrations', f), 'utf8');
    } catch {
      now = undefined;
    }
    if (now !== readFileSync(path.join(dir, f), 'utf8'))
      problems.push(
        `migrations/${f} differs from ${base.release.version}'s: a released migration is never edited`,
      );
  }
  return problems;
}

function lockProblems(effects: MigrationEffect[], declared: Record<string, DeclaredLock>): string[] {
  const problems: string[] = [];
  const docs = readFileSync(path.join(ROOT, 'docs', 'UPGRADING.md'), 'utf8');
  for (const e of effects) {
    const tables = heavyTables(e);
    const d = declared[e.name];
    const work = JSON.stringify({
      rewritten: e.rewritten,
      indexesBuilt: e.indexesBuilt,
      validated: e.validated,
      notNullSet: e.notNullSet,
      rowsWritten: e.rowsWritten,
      rowsReadLocked: e.rowsReadLocked,
    });
    if (tables.length && !d)
      problems.push(
        `${e.name} holds ${tables.map((t) => `${t} (${e.locks[t] ?? 'row locks'})`).join(', ')} for work that grows ` +
          `with the table (${work}): build indexes CONCURRENTLY (transaction = false), add constraints NOT VALID, ` +
          'or declare it in test/upgrade/migration-locks.ts with its measured time in docs/UPGRADING.md',
      );
    else if (d && d.tables.join() !== tables.join())
      problems.push(
        `${e.name} is declared to lock ${d.tables.join(', ') || 'nothing'} but locks ${tables.join(', ') || 'nothing'} (${work})`,
      );
    if (d && !docs.includes(e.name))
      problems.push(`${e.name} is declared heavy but docs/UPGRADING.md does not name it`);
  }
  for (const name of Object.keys(declared))
    if (!effects.some((e) => e.name === name))
      problems.push(`${name} is declared heavy but is no migration since the previous release`);
  return problems;
}
