import { DataSource, DataSourceOptions } from 'typeorm';
import { DURABLE_EXECUTION_MIGRATIONS } from '../../migrations';
import { MIGRATION_LOCK_KEY } from '../durable-execution.constants';

/** Name of the table that records which of the module's migrations ran (separate from the app's). */
export const DURABLE_MIGRATIONS_TABLE = 'ai_migrations';

/**
 * Applies the module's migrations on the database `source` points at, under a session advisory lock,
 * so two pods starting together both succeed: the second waits, then finds nothing left to do.
 * Uses a short-lived DataSource of its own so the app's migration table is never touched.
 */
export async function runDurableMigrations(source: DataSource | DataSourceOptions): Promise<string[]> {
  const base = source instanceof DataSource ? source.options : source;
  const ds = new DataSource({
    ...(base as DataSourceOptions),
    name: undefined,
    entities: [],
    subscribers: [],
    synchronize: false,
    migrationsRun: false,
    migrations: DURABLE_EXECUTION_MIGRATIONS,
    migrationsTableName: DURABLE_MIGRATIONS_TABLE,
    poolSize: 2,
  } as DataSourceOptions);
  await ds.initialize();
  const lock = ds.createQueryRunner();
  try {
    await lock.connect();
    await lock.query('select pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    try {
      const done = await ds.runMigrations({ transaction: 'each' });
      return done.map((m) => m.name);
    } finally {
      await lock.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    }
  } finally {
    await lock.release();
    await ds.destroy();
  }
}

/** Reverts the module's migrations, newest first (all of them unless `steps` is given). */
export async function revertDurableMigrations(source: DataSource | DataSourceOptions, steps = Infinity) {
  const base = source instanceof DataSource ? source.options : source;
  const ds = new DataSource({
    ...(base as DataSourceOptions),
    entities: [],
    migrations: DURABLE_EXECUTION_MIGRATIONS,
    migrationsTableName: DURABLE_MIGRATIONS_TABLE,
    poolSize: 2,
  } as DataSourceOptions);
  await ds.initialize();
  try {
    for (let i = 0; i < steps; i++) {
      const executed = await ds.query(`select count(*)::int as n from ${DURABLE_MIGRATIONS_TABLE}`);
      if (!executed[0].n) break;
      await ds.undoLastMigration({ transaction: 'each' });
    }
  } finally {
    await ds.destroy();
  }
}
