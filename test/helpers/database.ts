import { randomBytes } from 'node:crypto';
import { Client, ClientConfig } from 'pg';

/** The server the suite runs against (set by global-setup). */
export function serverUrl(): string {
  return process.env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test';
}

/** Same server, another database. */
export function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

/** A database of its own for one test file: created now, dropped by `drop()`. */
export interface TestDatabase {
  name: string;
  url: string;
  /** Runs one statement on the test database with a short-lived client. */
  query<T = any>(sql: string, params?: unknown[]): Promise<T[]>;
  drop(): Promise<void>;
}

async function admin<T>(fn: (c: Client) => Promise<T>): Promise<T> {
  const c = new Client({ connectionString: serverUrl() });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** One statement on a short-lived client. */
export async function queryOnce(config: ClientConfig, sql: string, params?: unknown[]): Promise<any[]> {
  const c = new Client(config);
  // A connection the server drops (a failover under a model case) fails the query; without a listener
  // the client's 'error' event would end the process instead.
  c.on('error', () => undefined);
  await c.connect();
  try {
    return (await c.query(sql, params)).rows;
  } finally {
    await c.end();
  }
}

export async function createTestDatabase(label = 'e2e'): Promise<TestDatabase> {
  const name = `dx_${label.replace(/[^a-z0-9]/gi, '_').toLowerCase()}_${randomBytes(4).toString('hex')}`;
  await admin((c) => c.query(`create database ${name}`));
  const url = withDatabase(serverUrl(), name);
  return {
    name,
    url,
    query: (sql, params) => queryOnce({ connectionString: url }, sql, params),
    async drop() {
      await admin((c) => c.query(`drop database if exists ${name} with (force)`));
    },
  };
}

/**
 * A schema of its own in a database already there (the model test: one per case, in a database per
 * harness process). Much cheaper than a database per case: `create database` copies a template through the
 * WAL and `drop database` forces a checkpoint, for every case. The module runs on it with `database.schema`
 * (its tables, NOTIFY channels and migration lock are the schema's own); `query` reads it unqualified
 * (`search_path`); every connection made with `url` carries the schema's name as its `application_name`,
 * so `drop()` also ends the connections of apps that did not close in time, as `drop database ... with
 * (force)` did.
 */
export interface TestSchema extends TestDatabase {
  schema: string;
}

export function createTestSchema(host: TestDatabase, label: string): TestSchema {
  const schema = `dx_${label.replace(/[^a-z0-9]/gi, '_').toLowerCase()}_${randomBytes(4).toString('hex')}`;
  const u = new URL(host.url);
  u.searchParams.set('application_name', schema);
  const url = u.toString();
  return {
    name: host.name,
    schema,
    url,
    query: (sql, params) =>
      queryOnce({ connectionString: url, options: `-c search_path=${schema}` }, sql, params),
    async drop() {
      await admin(async (c) => {
        await c.query(`select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1`, [
          schema,
        ]);
        await c.query(`drop schema if exists ${schema} cascade`);
      });
    },
  };
}
