import { ChildProcess, spawn } from 'node:child_process';
import { accessSync, chmodSync, constants, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from 'pg';

/**
 * PgBouncer for the tests and the benchmark: Debian's `pgbouncer` package (1.18 on bookworm: no
 * protocol-level prepared statements, those came in 1.21), started on a free port of its own with a
 * temporary config in front of one PostgreSQL server, for every database on it (`* = host= port=`).
 * Clients authenticate as the upstream URL's user (`auth_type = trust`, the user in `auth_file`); a
 * password in the URL is PgBouncer's own login to PostgreSQL.
 */
export interface PgBouncer {
  readonly port: number;
  /** `url` (a database on the upstream server) through this PgBouncer. */
  via(url: string): string;
  /** What PgBouncer wrote to stderr (its log), for a failing test's message. */
  log(): string;
  /** `SHOW <what>` on PgBouncer's admin console (`stats`, `pools`, `clients`, `servers`). */
  show(what: string): Promise<Record<string, any>[]>;
  stop(): Promise<void>;
}

export interface PgBouncerOptions {
  /** `pool_mode`. Default `'transaction'`. */
  poolMode?: 'transaction' | 'session' | 'statement';
  /** Server connections per (database, user): `default_pool_size`. Default 20. */
  poolSize?: number;
  /** `max_client_conn`. Default 2000. */
  maxClientConn?: number;
}

const CANDIDATES = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer', '/usr/local/bin/pgbouncer'];

/** The pgbouncer binary, or undefined when it is not installed (`apt-get install -y pgbouncer`). */
export function pgbouncerBinary(): string | undefined {
  for (const p of CANDIDATES) {
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // next
    }
  }
  return undefined;
}

/**
 * Whether the PgBouncer tests run here: always in CI (`CI` set) or with DURABLE_TEST_PGBOUNCER=required,
 * where a missing binary fails them; elsewhere they skip without it.
 */
export function pgbouncerTestsRun(): boolean {
  if (pgbouncerBinary()) return true;
  if (process.env.CI || process.env.DURABLE_TEST_PGBOUNCER === 'required')
    throw new Error('pgbouncer is not installed: apt-get install -y pgbouncer');
  console.warn('[test] pgbouncer is not installed: the PgBouncer tests skip (apt-get install -y pgbouncer)');
  return false;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

function via(url: string, port: number): string {
  const u = new URL(url);
  u.hostname = '127.0.0.1';
  u.port = String(port);
  return u.toString();
}

async function answers(url: string): Promise<boolean> {
  const c = new Client({ connectionString: url, connectionTimeoutMillis: 1000 });
  c.on('error', () => undefined);
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

/** Starts PgBouncer in front of the server of `upstreamUrl`; resolves once it answers a query there. */
export async function startPgBouncer(upstreamUrl: string, o: PgBouncerOptions = {}): Promise<PgBouncer> {
  const bin = pgbouncerBinary();
  if (!bin) throw new Error('pgbouncer is not installed: apt-get install -y pgbouncer');
  const up = new URL(upstreamUrl);
  const user = decodeURIComponent(up.username || process.env.USER || 'postgres');
  const password = decodeURIComponent(up.password);
  const dir = mkdtempSync(path.join(tmpdir(), 'dx-pgbouncer-'));
  chmodSync(dir, 0o755); // PgBouncer refuses to run as root: it runs as nobody (-u) and reads from here
  const server = [`host=${up.hostname}`, `port=${up.port || 5432}`, `user=${user}`];
  if (password) server.push(`password=${password}`);
  const quoted = (s: string) => `"${s.replace(/"/g, '""')}"`;
  writeFileSync(path.join(dir, 'users.txt'), `${quoted(user)} ""\n`, { mode: 0o644 });
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const ini = [
      '[databases]',
      `* = ${server.join(' ')}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `admin_users = ${user}`,
      `auth_file = ${path.join(dir, 'users.txt')}`,
      `pool_mode = ${o.poolMode ?? 'transaction'}`,
      `default_pool_size = ${o.poolSize ?? 20}`,
      `max_client_conn = ${o.maxClientConn ?? 2000}`,
      'max_db_connections = 0',
      'server_lifetime = 3600',
      'log_connections = 0',
      'log_disconnections = 0',
      'ignore_startup_parameters = extra_float_digits',
      '',
    ].join('\n');
    const file = path.join(dir, `pgbouncer-${port}.ini`);
    writeFileSync(file, ini, { mode: 0o644 });
    const args = process.getuid?.() === 0 ? ['-u', 'nobody', file] : [file];
    const child: ChildProcess = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    child.stderr!.on('data', (b: Buffer) => (log = (log + b.toString()).slice(-20_000)));
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    let up2 = false;
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline && child.exitCode === null) {
      if (await answers(via(upstreamUrl, port))) {
        up2 = true;
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    if (up2)
      return {
        port,
        via: (url) => via(url, port),
        log: () => log,
        async show(what) {
          const admin = new URL(via(upstreamUrl, port));
          admin.pathname = '/pgbouncer';
          const c = new Client({ connectionString: admin.toString() });
          await c.connect();
          try {
            return (await c.query(`show ${what.replace(/[^a-z_]/gi, '')}`)).rows;
          } finally {
            await c.end();
          }
        },
        async stop() {
          if (child.exitCode === null) child.kill('SIGTERM');
          await exited;
          rmSync(dir, { recursive: true, force: true });
        },
      };
    child.kill('SIGKILL');
    await exited;
    // Another process took the port between freePort and PgBouncer's bind: try another one.
    if (attempt >= 3) {
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`pgbouncer did not start:\n${log}`);
    }
  }
}
