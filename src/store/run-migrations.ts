import { DataSource, DataSourceOptions } from 'typeorm';
import type { DurableMigrationClass, DurableMigrationOptions } from '../../migrations';
import { SchemaConflictError } from '../errors/schema-conflict.error';
import type { DurableDataSource } from '../options/durable-execution-options.interface';
import { DEFAULT_NAMES, durableNames, DurableNames, ensureSchema } from './durable-names';

/**
 * A DataSource (ours, or one from the app's own copy of typeorm: told apart by shape, not `instanceof`)
 * or plain DataSource options.
 */
export type MigrationSource = DataSource | DurableDataSource | DataSourceOptions;

function isDataSource(source: MigrationSource): source is DurableDataSource {
  return (
    source instanceof DataSource || typeof (source as Partial<DurableDataSource>).initialize === 'function'
  );
}

/**
 * The module's migration classes for `schema`, loaded on first use: a process that applies none
 * (`database.migrationsRun: false`) never loads the 30-odd files (issue 47, boot like a plain Nest app).
 */
function migrationClasses(schema: string | undefined): DurableMigrationClass[] {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { durableExecutionMigrations } = require('../../migrations') as typeof import('../../migrations');
  return durableExecutionMigrations({ schema });
}

/**
 * Name of the table that records which of the module's migrations ran (separate from the app's), in the
 * module's schema (`database.schema`).
 */
export const DURABLE_MIGRATIONS_TABLE = 'ai_migrations';

/**
 * Options of the short-lived DataSource that applies or reverts the module's migrations, built from the
 * app's. Whatever the app's DataSource does on `initialize()` is switched off: `dropSchema` would wipe the
 * app's tables, `synchronize`/`migrationsRun` would touch the app's schema or run the app's migrations,
 * a cache would open its own connection; the app's `schema` (where its entities live) is not the
 * module's. Two connections (`extra.max` wins over `poolSize` in pg): one
 * holds the advisory lock while the other runs the migrations, so a pool of one would wait forever.
 */
function migrationDataSource(source: MigrationSource, names: DurableNames): DataSource {
  const base = (isDataSource(source) ? source.options : source) as DataSourceOptions & {
    extra?: Record<string, unknown>;
  };
  return new DataSource({
    ...base,
    // TypeORM puts its migrations table in `schema`: the module's own one, never the app's (an app
    // DataSource's `schema` would put ai_migrations there while the unqualified tables land on the
    // search_path, and the next boot would find tables without a record of them).
    schema: names.schema,
    name: undefined,
    entities: [],
    subscribers: [],
    synchronize: false,
    migrationsRun: false,
    dropSchema: false,
    cache: false,
    migrations: migrationClasses(names.schema),
    migrationsTableName: DURABLE_MIGRATIONS_TABLE,
    poolSize: 2,
    extra: { ...base.extra, max: 2 },
  } as DataSourceOptions);
}

/** Runs `fn` on a migration DataSource while holding the session advisory lock of the schema's migrations. */
async function underMigrationLock<T>(
  source: MigrationSource,
  names: DurableNames,
  fn: (ds: DataSource) => Promise<T>,
): Promise<T> {
  const ds = migrationDataSource(source, names);
  await ds.initialize();
  const lock = ds.createQueryRunner();
  try {
    await lock.connect();
    await lock.query('select pg_advisory_lock($1)', [names.lockKey]);
    try {
      return await fn(ds);
    } finally {
      await lock.query('select pg_advisory_unlock($1)', [names.lockKey]);
    }
  } finally {
    await lock.release();
    await ds.destroy();
  }
}

/** Names the module's migrations for the schema of `names` are recorded under. */
function migrationNames(names: DurableNames): string[] {
  return migrationClasses(names.schema).map((m) => new m().name);
}

/** Whether `ai_migrations` of the schema exists. */
async function hasMigrationsTable(
  ds: Pick<DurableDataSource, 'query'>,
  names: DurableNames,
): Promise<boolean> {
  const [{ present }] = await ds.query(`select to_regclass($1) is not null as present`, [names.migrations]);
  return present;
}

/**
 * True when every one of the module's migrations is recorded as applied, read through `ds` (two
 * statements on the app's own pool). Lets a boot skip the migration DataSource and its advisory lock
 * when the schema is up to date; anything else (no table, one missing) goes the locked way.
 */
export async function durableSchemaIsCurrent(
  ds: Pick<DurableDataSource, 'query'>,
  names: DurableNames = DEFAULT_NAMES,
): Promise<boolean> {
  if (!(await hasMigrationsTable(ds, names))) return false;
  const expected = migrationNames(names);
  const [{ n }] = await ds.query(
    `select count(distinct name)::int as n from ${names.migrations} where name = any($1)`,
    [expected],
  );
  return n === expected.length;
}

/** The tables the first migration creates: their presence means the schema was applied by someone. */
export const DURABLE_TABLES = [
  'ai_runs',
  'ai_checkpoints',
  'ai_commands',
  'ai_events',
  'ai_signals',
] as const;

/**
 * The module's tables that exist although `ai_migrations` has no record of the migration that creates
 * them (none when the schema is absent or was applied by the module): the app's own migrations applied
 * them. Read-only: creates nothing.
 */
export async function unrecordedDurableTables(
  ds: DataSource,
  names: DurableNames = DEFAULT_NAMES,
): Promise<string[]> {
  const rows: { name: string }[] = await ds.query(
    `select t.name from unnest($1::text[], $2::text[]) as t(name, qualified) where to_regclass(t.qualified) is not null`,
    [DURABLE_TABLES.map((t) => names.label(t)), DURABLE_TABLES.map((t) => `${names.prefix}${t}`)],
  );
  if (!rows.length) return [];
  if (await hasMigrationsTable(ds, names)) {
    const recorded = await ds.query(`select 1 from ${names.migrations} where name = $1 limit 1`, [
      migrationNames(names)[0],
    ]);
    if (recorded.length) return [];
  }
  return rows.map((r) => r.name);
}

/**
 * Applies the module's migrations on the database `source` points at, under a session advisory lock,
 * so two pods starting together both succeed: the second waits, then finds nothing left to do.
 * Uses a short-lived DataSource of its own so the app's migration table is never touched.
 * `options.schema` (the module's `database.schema`) puts the tables and `ai_migrations` in that schema,
 * created when missing, under a lock of that schema's own.
 * Returns the names of the migrations applied by this call (none when the schema was up to date).
 * Throws `SchemaConflictError` (`DURABLE_SCHEMA_CONFLICT`), before creating anything, when the tables
 * exist but `ai_migrations` has no record of them (the app's migrations applied them).
 */
export async function runDurableMigrations(
  source: MigrationSource,
  options: DurableMigrationOptions = {},
): Promise<string[]> {
  const names = durableNames(options.schema);
  return underMigrationLock(source, names, async (ds) => {
    const unrecorded = await unrecordedDurableTables(ds, names);
    if (unrecorded.length) throw new SchemaConflictError(unrecorded, names.label(DURABLE_MIGRATIONS_TABLE));
    // TypeORM creates its migrations table (ours) in the schema before the first migration runs.
    if (names.schema !== undefined) await ensureSchema(ds, names.schema);
    const done = await ds.runMigrations({ transaction: 'each' });
    return done.map((m) => m.name);
  });
}

/** One of the module's migrations and whether `ai_migrations` records it as applied. */
export interface DurableMigrationStatus {
  name: string;
  applied: boolean;
}

/**
 * Each of the module's migrations, oldest first, applied or pending according to `ai_migrations`, and
 * the module's tables that exist with no record there (see `unrecordedDurableTables`), in
 * `options.schema`. Read-only.
 */
export async function durableMigrationStatus(
  source: MigrationSource,
  options: DurableMigrationOptions = {},
): Promise<{ migrations: DurableMigrationStatus[]; unrecordedTables: string[] }> {
  const names = durableNames(options.schema);
  const ds = migrationDataSource(source, names);
  await ds.initialize();
  try {
    const applied = new Set<string>(
      (await hasMigrationsTable(ds, names))
        ? (await ds.query(`select name from ${names.migrations}`)).map((r: { name: string }) => r.name)
        : [],
    );
    return {
      migrations: migrationNames(names).map((name) => ({ name, applied: applied.has(name) })),
      unrecordedTables: await unrecordedDurableTables(ds, names),
    };
  } finally {
    await ds.destroy();
  }
}

/**
 * Reverts the module's migrations, newest first (all of them unless `steps` is given), under the same
 * advisory lock as `runDurableMigrations`, in `options.schema`. A database that never had them is left
 * as it is; a schema of their own stays, with its `ai_migrations`. Returns the names of the migrations reverted, newest first.
 */
export async function revertDurableMigrations(
  source: MigrationSource,
  steps = Infinity,
  options: DurableMigrationOptions = {},
): Promise<string[]> {
  const names = durableNames(options.schema);
  return underMigrationLock(source, names, async (ds) => {
    const reverted: string[] = [];
    for (let i = 0; i < steps; i++) {
      if (!(await hasMigrationsTable(ds, names))) break;
      // The one TypeORM's undoLastMigration picks: the newest timestamp.
      const last = await ds.query(
        `select name from ${names.migrations} order by timestamp desc, id desc limit 1`,
      );
      if (!last.length) break;
      await ds.undoLastMigration({ transaction: 'each' });
      reverted.push(last[0].name);
    }
    return reverted;
  });
}
