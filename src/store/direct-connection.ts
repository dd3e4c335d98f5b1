import type { ClientConfig } from 'pg';
import type { DataSourceOptions } from 'typeorm';

/** What a connection string decides; dropped from a config before `directUrl` is put in its place. */
const ENDPOINT = ['connectionString', 'host', 'port', 'user', 'password', 'database'] as const;

function withoutEndpoint<T extends object>(o: T | undefined): Partial<T> {
  const out: Record<string, unknown> = { ...o };
  for (const key of ENDPOINT) delete out[key];
  return out as Partial<T>;
}

/**
 * The pg config of a connection that needs a session of its own (LISTEN), given the pool's: the pool's
 * settings (ssl, timeouts, application name) with `directUrl` as its endpoint, or the pool's own
 * settings when there is no `directUrl`. @internal
 */
export function directClientConfig(pool: ClientConfig, directUrl?: string): ClientConfig {
  return directUrl ? { ...withoutEndpoint(pool), connectionString: directUrl } : pool;
}

/**
 * The options the migration DataSource (two connections, one holding the session advisory lock) is
 * built from: the DataSource's own, with `directUrl` as the endpoint when given. @internal
 */
export function directMigrationSource(options: DataSourceOptions, directUrl?: string): DataSourceOptions {
  if (!directUrl) return options;
  const base = options as DataSourceOptions & { extra?: Record<string, unknown> };
  const {
    host: _h,
    port: _p,
    username: _u,
    password: _pw,
    database: _d,
    ...rest
  } = base as typeof base & {
    host?: unknown;
    port?: unknown;
    username?: unknown;
    password?: unknown;
    database?: unknown;
  };
  return { ...rest, url: directUrl, extra: withoutEndpoint(base.extra) } as DataSourceOptions;
}

/**
 * LISTEN configs by the pool options they replace. A WakeListener is built from `pool.options` (the
 * worker's wake listener is made in the run-state store); the DurableDatabase that owns the pool routes
 * it here to the direct connection, so no listener ever holds a pooled (PgBouncer) connection.
 */
const routes = new WeakMap<object, ClientConfig>();

/** Routes listeners built from `poolOptions` to `direct`. @internal */
export function routeListeners(poolOptions: object, direct: ClientConfig): void {
  if (direct !== poolOptions) routes.set(poolOptions, direct);
}

/** The config a LISTEN connection given `config` really uses. @internal */
export function listenConfigFor(config: ClientConfig): ClientConfig {
  return routes.get(config) ?? config;
}
