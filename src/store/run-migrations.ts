import { DataSource, DataSourceOptions } from 'typeorm';
import { DURABLE_EXECUTION_MIGRATIONS } from '../../migrations';
import { MIGRATION_LOCK_KEY } from '../durable-execution.constants';
import { SchemaConflictError } from '../errors/schema-conflict.error';
import type { DurableDataSource } from '../options/durable-execution-options.interface';

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

/** Name of the table that records which of the module's migrations ran (separate from the app's). */
export const DURABLE_MIGRATIONS_TABLE = 'ai_migrations';

/**
 * Options of the short-lived DataSource that applies or reverts the module's migrations, built from the
 * app's. Whatever the app's DataSource does on `initialize()` is switched off: `dropSchema` would wipe the
 * app's tables, `synchronize`/`migrationsRun` would touch the app's schema or run the app's migrations,
 * a cache would open its own connection. Two connections (`extra.max` wins over `poolSize` in pg): one
 * holds the advisory lock while the other runs the migrations, so a pool of one would wait forever.
 */
function migrationDataSource(source: MigrationSource): DataSource {
  const base = (isDataSource(source) ? source.options : source) as DataSourceOptions & {
    extra?: Record<string, unknown>;
  };
  return new DataSource({
    ...base,
    name: undefined,
    entities: [],
    subscribers: [],
    synchronize: false,
    migrationsRun: false,
    dropSchema: false,
    cache: false,
    migrations: DURABLE_EXECUTION_MIGRATIONS,
    migrationsTableName: DURABLE_MIGRATIONS_TABLE,
    poolSize: 2,
    extra: { ...base.extra, max: 2 },
  } as DataSourceOptions);
}

/** Runs `fn` on a migration DataSource while holding the module's session advisory lock. */
async function underMigrationLock<T>(
  source: MigrationSource,
  fn: (ds: DataSource) => Promise<T>,
): Promise<T> {
  const ds = migrationDataSource(source);
  await ds.initialize();
  const lock = ds.createQueryRunner();
  try {
    await lock.connect();
    await lock.query('select pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    try {
      return await fn(ds);
    } finally {
      await lock.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    }
  } finally {
    await lock.release();
    await ds.destroy();
  }
}

/** Names the module's migrations are recorded under in `ai_migrations`. */
const MIGRATION_NAMES: string[] = DURABLE_EXECUTION_MIGRATIONS.map(
  (m) => (new m() as { name?: string }).name ?? m.name,
);

/**
 * True when every one of the module's migrations is recorded as applied, read through `ds` (two
 * statements on the app's own pool). Lets a boot skip the migration DataSource and its advisory lock
 * when the schema is up to date; anything else (no table, one missing) goes the locked way.
 */
export async function durableSchemaIsCurrent(ds: Pick<DurableDataSource, 'query'>): Promise<boolean> {
  const [{ present }] = await ds.query(`select to_regclass($1) is not null as present`, [
    DURABLE_MIGRATIONS_TABLE,
  ]);
  if (!present) return false;
  const [{ n }] = await ds.query(
    `select count(distinct name)::int as n from ${DURABLE_MIGRATIONS_TABLE} where name = any($1)`,
    [MIGRATION_NAMES],
  );
  return n === MIGRATION_NAMES.length;
}

/** The tables the first migration creates: their presence means the schema was applied by someone. */
const DURABLE_TABLES = ['ai_runs', 'ai_checkpoints', 'ai_commands', 'ai_events', 'ai_signals'];

/**
 * The module's tables that exist although `ai_migrations` has no record of the migration that creates
 * them (none when the schema is absent or was applied by the module): the app's own migrations applied
 * them. Read-only: creates nothing.
 */
export async function unrecordedDurableTables(ds: DataSource): Promise<string[]> {
  const rows: { name: string }[] = await ds.query(
    `select t as name from unnest($1::text[]) t where to_regclass(t) is not null`,
    [DURABLE_TABLES],
  );
  if (!rows.length) return [];
  const [{ present }] = await ds.query(`select to_regclass($1) is not null as present`, [
    DURABLE_MIGRATIONS_TABLE,
  ]);
  if (present) {
    const recorded = await ds.query(`select 1 from ${DURABLE_MIGRATIONS_TABLE} where name = $1 limit 1`, [
      MIGRATION_NAMES[0],
    ]);
    if (recorded.length) return [];
  }
  return rows.map((r) => r.name);
}

/**
 * Applies the module's migrations on the database `source` points at, under a session advisory lock,
 * so two pods starting together both succeed: the second waits, then finds nothing left to do.
 * Uses a short-lived DataSource of its own so the app's migration table is never touched.
 * Returns the names of the migrations applied by this call (none when the schema was up to date).
 * Throws `SchemaConflictError` (`DURABLE_SCHEMA_CONFLICT`), before creating anything, when the tables
 * exist but `ai_migrations` has no record of them (the app's migrations applied them).
 */
export async function runDurableMigrations(source: MigrationSource): Promise<string[]> {
  return underMigrationLock(source, async (ds) => {
    const unrecorded = await unrecordedDurableTables(ds);
    if (unrecorded.length) throw new SchemaConflictError(unrecorded, DURABLE_MIGRATIONS_TABLE);
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
 * the module's tables that exist with no record there (see `unrecordedDurableTables`). Read-only.
 */
export async function durableMigrationStatus(
  source: MigrationSource,
): Promise<{ migrations: DurableMigrationStatus[]; unrecordedTables: string[] }> {
  const ds = migrationDataSource(source);
  await ds.initialize();
  try {
    const [{ present }] = await ds.query(`select to_regclass($1) is not null as present`, [
      DURABLE_MIGRATIONS_TABLE,
    ]);
    const applied = new Set<string>(
      present
        ? (await ds.query(`select name from ${DURABLE_MIGRATIONS_TABLE}`)).map(
            (r: { name: string }) => r.name,
          )
        : [],
    );
    return {
      migrations: MIGRATION_NAMES.map((name) => ({ name, applied: applied.has(name) })),
      unrecordedTables: await unrecordedDurableTables(ds),
    };
  } finally {
    await ds.destroy();
  }
}

/**
 * Reverts the module's migrations, newest first (all of them unless `steps` is given), under the same
 * advisory lock as `runDurableMigrations`. A database that never had them is left as it is.
 * Returns the names of the migrations reverted, newest first.
 */
export async function revertDurableMigrations(source: MigrationSource, steps = Infinity): Promise<string[]> {
  return underMigrationLock(source, async (ds) => {
    const reverted: string[] = [];
    for (let i = 0; i < steps; i++) {
      const [{ exists }] = await ds.query(`select to_regclass($1) is not null as exists`, [
        DURABLE_MIGRATIONS_TABLE,
      ]);
      if (!exists) break;
      // The one TypeORM's undoLastMigration picks: the newest timestamp.
      const last = await ds.query(
        `select name from ${DURABLE_MIGRATIONS_TABLE} order by timestamp desc, id desc limit 1`,
      );
      if (!last.length) break;
      await ds.undoLastMigration({ transaction: 'each' });
      reverted.push(last[0].name);
    }
    return reverted;
  });
}
