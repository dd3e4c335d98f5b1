import { Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import type { ClientConfig, Pool, PoolClient, QueryResultRow } from 'pg';
import { DataSource, DataSourceOptions } from 'typeorm';
import { DURABLE_EXECUTION_OPTIONS } from '../durable-execution.constants';
import { InvalidOptionsError } from '../errors/invalid-options.error';
import type {
  DurableDataSource,
  ResolvedDurableOptions,
} from '../options/durable-execution-options.interface';
import { durableSchemaIsCurrent, runDurableMigrations } from './run-migrations';
import { missingDurableSchema } from './schema-check';
import { SchemaNotReadyError } from '../errors/schema-not-ready.error';
import { DurableBootState } from '../util/boot-state';

/** PostgreSQL's answers to a connection that no retry can change (SQLSTATE → what it means). */
const NEVER_CONNECTS: Record<string, string> = {
  '3D000': 'the database does not exist (create it, or fix the database name)',
  '28P01': 'the password was refused',
  '28000': 'the role may not connect (unknown role, or no pg_hba.conf entry for it)',
  '42501': 'the role lacks the privilege to connect',
};
import { DurableUsageError } from '../errors/durable-usage.error';
import { durableNames, DurableNames, SqlText } from './durable-names';
import { directClientConfig, directMigrationSource, routeListeners } from './direct-connection';
import { outsideCalls } from './pg-wire-hook';

type DataSourceToken = string | symbol | (abstract new (...args: never[]) => unknown);

/**
 * The injection tokens a DataSource named `name` may be registered under, in order: @nestjs/typeorm's own
 * `getDataSourceToken(name)` when it is installed (required lazily: it is an optional peer), which is right
 * even when the app's typeorm is another copy than ours; then @nestjs/typeorm's rule applied to our typeorm
 * (the `DataSource` class for 'default', `<name>DataSource` otherwise).
 */
function dataSourceTokens(name: string): DataSourceToken[] {
  const tokens: DataSourceToken[] = [];
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const nestTypeorm = require('@nestjs/typeorm') as {
      getDataSourceToken?: (name?: string) => DataSourceToken;
    };
    const token = nestTypeorm.getDataSourceToken?.(name);
    if (token !== undefined) tokens.push(token);
  } catch {
    // @nestjs/typeorm is not installed: only the rule below applies.
  }
  const own = name === 'default' ? DataSource : `${name}DataSource`;
  if (!tokens.includes(own)) tokens.push(own);
  return tokens;
}

function describeToken(token: DataSourceToken): string {
  if (typeof token === 'function') return `the ${token.name || 'anonymous'} class`;
  return typeof token === 'symbol' ? token.toString() : `'${token}'`;
}

/**
 * The module's handle on PostgreSQL: the pg pool under a TypeORM DataSource, either created here from
 * `database.url` (and destroyed on shutdown) or borrowed from the app (never destroyed here).
 * Hot-path statements go straight to the pool as named prepared statements: parsed once per
 * connection, one round trip per call (unnamed with `database.preparedStatements: false`, for a pooler
 * in transaction mode). What needs a session of its own (LISTEN, the migration lock) uses
 * `database.directUrl` when given.
 * @internal
 */
@Injectable()
export class DurableDatabase implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('DurableExecution');
  private ds?: DurableDataSource;
  private owned = false;
  /** The texts of the statements built for this schema, once each. */
  private readonly texts = new Map<SqlText, string>();
  /** The tables, channels and statement names of the configured `database.schema`. */
  readonly names: DurableNames;
  /** Whether statements given a name are sent as named prepared statements. */
  private readonly named: boolean;

  constructor(
    @Inject(DURABLE_EXECUTION_OPTIONS) private readonly options: ResolvedDurableOptions,
    private readonly moduleRef: ModuleRef,
    private readonly boot: DurableBootState,
  ) {
    this.names = durableNames(options.database.schema);
    this.named = options.database.preparedStatements !== false;
  }

  /**
   * Resolves or creates the DataSource and applies migrations. Runs before any worker starts. If any of
   * it fails, a DataSource created here is destroyed before the error propagates: Nest runs no shutdown
   * hook after a failed init, and its pool would otherwise keep connections and the process alive.
   */
  async onModuleInit(): Promise<void> {
    const db = this.options.database;
    // The module's other init hooks started with this one: a registration error fails the boot first.
    await new Promise((r) => setImmediate(r));
    if (this.boot.failed) return;
    try {
      if (db.url) {
        this.owned = true;
        this.ds = new DataSource({ type: 'postgres', url: db.url, poolSize: db.poolSize, entities: [] });
      } else if (db.dataSource) {
        this.ds = db.dataSource;
      } else {
        this.ds = this.appDataSource(db.dataSourceName!);
      }
      if (this.ds.options.type !== 'postgres') {
        throw new InvalidOptionsError([
          `database: the DataSource must be a PostgreSQL one (options.type 'postgres'); got '${String(this.ds.options.type)}'`,
        ]);
      }
      if (!this.ds.isInitialized) await this.connectWithRetry(this.ds);
      this.pool.on('error', (err) => this.logger.warn(`idle PostgreSQL connection failed: ${err.message}`));
      routeListeners(this.pool.options, this.listenConfig);
      // Up to date (every boot but the first after an upgrade): no migration DataSource, no lock.
      if (db.migrationsRun && !(await durableSchemaIsCurrent(this.ds, this.names))) {
        // The lock is a session's: on the direct connection when there is one (a pooler may not keep it).
        const source = db.directUrl
          ? directMigrationSource(this.ds.options as DataSourceOptions, db.directUrl)
          : this.ds;
        const applied = await runDurableMigrations(source, { schema: this.names.schema });
        if (applied.length)
          this.logger.log(
            `applied ${applied.length} migration(s) to schema ${this.names.schema ?? 'public'}: ${applied.join(', ')}`,
          );
      } else if (!db.migrationsRun) {
        // Someone else applies them: fail the boot now if nobody did, not at the first request.
        const missing = await missingDurableSchema(this.ds, this.names);
        if (missing.length) throw new SchemaNotReadyError(this.names.schema ?? 'public', missing);
      }
    } catch (err) {
      if (this.owned && this.ds?.isInitialized) await this.ds.destroy().catch(() => undefined);
      throw err;
    }
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.owned && this.ds?.isInitialized) await this.ds.destroy();
  }

  /** The app's `@nestjs/typeorm` DataSource registered under `name`, with a clear error when there is none. */
  appDataSource(name: string): DurableDataSource {
    const tokens = dataSourceTokens(name);
    for (const token of tokens) {
      try {
        return this.moduleRef.get<DurableDataSource>(token as string, { strict: false });
      } catch {
        // not registered under this token: try the next one
      }
    }
    const forRoot = name === 'default' ? '{ ... }' : `{ name: '${name}', ... }`;
    throw new InvalidOptionsError([
      `database.dataSourceName: no TypeORM DataSource named '${name}' is registered (looked up under ${tokens
        .map(describeToken)
        .join(
          ' and ',
        )}); import TypeOrmModule.forRoot(${forRoot}) in the app, or give database.url or database.dataSource. If the app does register it, two copies of typeorm may be installed (check with \`npm ls typeorm\`): dedupe them, or pass the instance as database.dataSource in forRootAsync`,
    ]);
  }

  get dataSource(): DurableDataSource {
    if (!this.ds) throw new DurableUsageError('DurableDatabase used before module init');
    return this.ds;
  }

  get pool(): Pool {
    // TypeORM's PostgresDriver keeps its pg.Pool as `master`.
    return (this.dataSource.driver as unknown as { master: Pool }).master;
  }

  /**
   * The pg config of a LISTEN connection: `database.directUrl` with the pool's other settings, or the
   * pool's own config. Never a pooled connection: a pooler in transaction mode would drop the LISTEN.
   */
  get listenConfig(): ClientConfig {
    return directClientConfig(this.pool.options, this.options.database.directUrl);
  }

  /**
   * One statement, one round trip. `sql` is its text, or the function that writes it for a schema (built
   * once, for `database.schema`). `name` makes it a prepared statement reused per connection; it is
   * scoped to the schema too, since pg refuses one name for two texts on a connection, and two modules
   * on two schemas may share a pool. With `database.preparedStatements: false` the name is dropped:
   * the statement is sent unnamed (parsed on every call), which any pooler passes on.
   */
  async query<R extends QueryResultRow = QueryResultRow>(
    sql: string | SqlText,
    values: unknown[] = [],
    name?: string,
  ): Promise<{ rows: R[]; rowCount: number }> {
    const text = typeof sql === 'string' ? sql : this.textOf(sql);
    const prepared = name && this.named ? this.names.statement(name) : undefined; // undefined: unnamed
    // Outside any call: a user's call gate never checks (or refuses) the engine's own statements.
    const res = await outsideCalls(() => this.pool.query<R>({ name: prepared, text, values }));
    return { rows: res.rows, rowCount: res.rowCount ?? 0 };
  }

  /** One statement on a connection the caller holds (a durable transaction's), named as `query` does. */
  async queryOn<R extends QueryResultRow = QueryResultRow>(
    client: PoolClient,
    sql: SqlText,
    values: unknown[],
    name: string,
  ): Promise<R[]> {
    const text = this.textOf(sql);
    const prepared = this.named ? this.names.statement(name) : undefined;
    // Outside any call's gate, as `query`: a body's check never refuses the engine's own statement.
    const res = await outsideCalls(() => client.query<R>({ name: prepared, text, values }));
    return res.rows;
  }

  private textOf(sql: SqlText): string {
    let text = this.texts.get(sql);
    if (text === undefined) this.texts.set(sql, (text = sql(this.names)));
    return text;
  }

  /** Runs `fn` inside one transaction on one connection; rolls back on any error. */
  async transaction<T>(fn: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query('begin');
      const out = await fn(client);
      await client.query('commit');
      return out;
    } catch (err) {
      await client.query('rollback').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  private async connectWithRetry(ds: DurableDataSource, attempts = 5): Promise<void> {
    for (let i = 1; ; i++) {
      try {
        await ds.initialize();
        return;
      } catch (err) {
        // An answer that will be the same on every try (no such database, a wrong password, an unknown
        // role) fails the boot at once, with PostgreSQL's reason; only an unreachable server is retried.
        const never = NEVER_CONNECTS[(err as { code?: string }).code ?? ''];
        if (never) throw new InvalidOptionsError([`database: ${never}: ${(err as Error).message}`]);
        if (i >= attempts) throw err;
        this.logger.warn(`PostgreSQL not reachable (attempt ${i}/${attempts}): ${(err as Error).message}`);
        await new Promise((r) => setTimeout(r, 300 * 2 ** i));
      }
    }
  }
}
