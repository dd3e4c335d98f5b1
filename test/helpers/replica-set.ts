import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { appendFileSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createServer } from 'node:net';
import { Client } from 'pg';
import { startTcpSwitch, TcpSwitch } from './tcp-switch';

/**
 * A PostgreSQL primary and one streaming standby owned by a test (PostgreSQL's own binaries, ports and a
 * folder of their own; never the shared server): for the replication check now and failover tests.
 */
export interface ReplicaSet {
  primaryUrl: string;
  standbyUrl: string;
  /** The standby's `application_name`, as `pg_stat_replication` and `synchronous_standby_names` name it. */
  standbyName: string;
  /** One statement on the primary (as its superuser). */
  primary<T = any>(sql: string): Promise<T[]>;
  /** One statement on the standby. */
  standby<T = any>(sql: string): Promise<T[]>;
  primaryPort: number;
  standbyPort: number;
  /** The link the standby streams WAL through: `pause()` and `cut()` it to make the standby fall behind. */
  replication: TcpSwitch;
  /** Stops the primary at once (`pg_ctl stop -m immediate`: no shutdown checkpoint, as a crash). */
  stopPrimary(): Promise<void>;
  /** Promotes the standby (`pg_ctl promote`) and waits until it accepts writes. */
  promote(): Promise<void>;
  /** Stops both servers and removes their folder. */
  dispose(): Promise<void>;
}

const BIN = (() => {
  const root = '/usr/lib/postgresql';
  const version = existsSync(root) ? readdirSync(root).sort().pop() : undefined;
  if (!version) throw new Error(`no PostgreSQL binaries under ${root}`);
  return path.join(root, version, 'bin');
})();

/** Runs a PostgreSQL binary as the postgres OS user when this process is root (initdb refuses root). */
function pgBin(cmd: string, args: string[]): void {
  execFileSync(...asPostgres(cmd, args), { stdio: 'pipe', timeout: 60_000 });
}

/** `pgBin` without blocking the event loop (workers in this process go on meanwhile). */
async function pgBinAsync(cmd: string, args: string[]): Promise<void> {
  await promisify(execFile)(...asPostgres(cmd, args), { timeout: 60_000 });
}

function asPostgres(cmd: string, args: string[]): [string, string[]] {
  const file = path.join(BIN, cmd);
  return process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', file, ...args]] : [file, args];
}

/** A TCP port nobody listens on now. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

async function query<T>(url: string, sql: string): Promise<T[]> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(sql)).rows as T[];
  } finally {
    await c.end();
  }
}

/** Starts a primary (fsync off: a test's data is thrown away) and a standby streaming from it. */
export async function startReplicaSet(): Promise<ReplicaSet> {
  const dir = mkdtempSync(path.join(tmpdir(), 'durable-replica-'));
  const owner = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
  if (process.getuid?.() === 0) chownSync(dir, owner, owner);
  const primaryDir = path.join(dir, 'primary');
  const standbyDir = path.join(dir, 'standby');
  const [primaryPort, standbyPort] = [await freePort(), await freePort()];
  const standbyName = 'standby1';
  const started: string[] = [];
  let replication: TcpSwitch | undefined;
  const stopAll = () => {
    void replication?.close();
    for (const d of started.reverse()) {
      try {
        pgBin('pg_ctl', ['-D', d, '-m', 'immediate', '-w', 'stop']);
      } catch {
        /* already stopped */
      }
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    pgBin('initdb', ['-D', primaryDir, '-U', 'postgres', '-A', 'trust', '--no-sync']);
    const conf = (d: string, port: number) =>
      appendFileSync(
        path.join(d, 'postgresql.conf'),
        `\nport = ${port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '${dir}'\n` +
          `fsync = off\nwal_keep_size = '64MB'\n`,
      );
    conf(primaryDir, primaryPort);
    pgBin('pg_ctl', ['-D', primaryDir, '-l', path.join(dir, 'primary.log'), '-w', 'start']);
    started.push(primaryDir);
    const conninfo = `host=127.0.0.1 port=${primaryPort} user=postgres application_name=${standbyName}`;
    pgBin('pg_basebackup', ['-d', conninfo, '-D', standbyDir, '-R', '-X', 'stream']);
    replication = await startTcpSwitch(primaryPort);
    const viaLink = conninfo.replace(`port=${primaryPort}`, `port=${replication.port}`);
    appendFileSync(path.join(standbyDir, 'postgresql.auto.conf'), `\nprimary_conninfo = '${viaLink}'\n`);
    conf(standbyDir, standbyPort);
    pgBin('pg_ctl', ['-D', standbyDir, '-l', path.join(dir, 'standby.log'), '-w', 'start']);
    started.push(standbyDir);
    const primaryUrl = `postgres://postgres@127.0.0.1:${primaryPort}/postgres`;
    const standbyUrl = `postgres://postgres@127.0.0.1:${standbyPort}/postgres`;
    for (let i = 0; ; i++) {
      const rows = await query(primaryUrl, `select 1 from pg_stat_replication where state = 'streaming'`);
      if (rows.length) break;
      if (i > 100) throw new Error('the standby did not start streaming in 10 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    return {
      primaryUrl,
      standbyUrl,
      standbyName,
      primary: (sql) => query(primaryUrl, sql),
      standby: (sql) => query(standbyUrl, sql),
      primaryPort,
      standbyPort,
      replication,
      stopPrimary: () => pgBinAsync('pg_ctl', ['-D', primaryDir, '-m', 'immediate', '-w', 'stop']),
      promote: () => pgBinAsync('pg_ctl', ['-D', standbyDir, '-w', 'promote']),
      dispose: async () => stopAll(),
    };
  } catch (err) {
    stopAll();
    throw err;
  }
}
