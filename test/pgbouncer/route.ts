import type { DatabaseOptions } from '../../src/options/durable-execution-options.interface';

/**
 * The env variable that routes the test apps through PgBouncer: the port of a running PgBouncer in
 * transaction mode (test/e2e/pgbouncer-suite.e2e-spec.ts starts one and sets it; the worker processes
 * the tests fork inherit it).
 */
export const PGBOUNCER_ENV = 'DURABLE_TEST_PGBOUNCER';

/**
 * `database` as a test app's module gets it: unchanged, or, while DURABLE_TEST_PGBOUNCER holds a port,
 * its pool through that PgBouncer with unnamed statements, its LISTEN connections and migration lock
 * on the direct URL: the configuration docs/OPERATIONS.md ("PgBouncer and many pods") recommends.
 * Options the test gives itself (`directUrl`, `preparedStatements`) win.
 */
export function throughPgBouncer<T extends DatabaseOptions>(database: T): T {
  const port = Number(process.env[PGBOUNCER_ENV]);
  if (!Number.isInteger(port) || port <= 0 || !database.url || database.directUrl) return database;
  const pooled = new URL(database.url);
  pooled.hostname = '127.0.0.1';
  pooled.port = String(port);
  return { preparedStatements: false, ...database, url: pooled.toString(), directUrl: database.url };
}
