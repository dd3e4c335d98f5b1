import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { runDurableMigrations } from '../src/migrations';

/** Same server as `url`, another database. */
export function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

async function withClient<T>(url: string, fn: (c: Client) => Promise<T>): Promise<T> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end().catch(() => undefined);
  }
}

/**
 * The app table of the durable-transaction workloads (created by `BenchDatabase.create`), and the one
 * INSERT both sides send into it, a named prepared statement: in a `@DurableTransaction` body and in a
 * plain BEGIN / COMMIT.
 */
export const TX_TABLE_SQL = `create table bench_tx_items (
  id bigserial primary key, n int not null, note text not null, created_at timestamptz not null default now())`;
export const TX_INSERT = {
  name: 'bench_tx_insert',
  text: `insert into bench_tx_items (n, note) values ($1, $2)`,
};

/** What the WAL says about one window: transactions of the bench database only. */
export interface WalWindow {
  /** COMMIT records of transactions that wrote to the bench database. */
  commits: number;
  /** WAL records of those transactions (commit records included). */
  records: number;
  /** Bytes of those records, full-page images included. */
  bytes: number;
  /** Bytes of full-page images among them. */
  fpiBytes: number;
  /** Heap UPDATE records that could not be HOT (every index of the table gets a new entry). */
  heapUpdates: number;
  /** HOT heap updates (no index entries). */
  hotUpdates: number;
  /** B-tree leaf inserts (index maintenance). */
  indexInserts: number;
}

/**
 * The database the bench owns: `dx_bench_<random>` on the server of the admin URL, with the module's
 * schema applied by `runDurableMigrations`. `ctl` is a control connection for fixtures and checks
 * (never used inside a timed section). When the server has the `pg_walinspect` extension (PostgreSQL
 * 15+ contrib, superuser), commits and WAL volume of a window are read from the WAL itself, filtered
 * to this database, so other activity on the server does not count.
 */
export class BenchDatabase {
  private constructor(
    readonly adminUrl: string,
    readonly name: string,
    readonly url: string,
    readonly ctl: Client,
    readonly oid: number,
    readonly canCheckpoint: boolean,
    readonly walInspect: boolean,
    readonly serverVersion: string,
  ) {}

  static async create(adminUrl: string): Promise<BenchDatabase> {
    const name = `dx_bench_${randomBytes(4).toString('hex')}`;
    await withClient(adminUrl, (c) => c.query(`create database ${name}`));
    const url = withDatabase(adminUrl, name);
    try {
      await runDurableMigrations({ type: 'postgres', url });
      const ctl = new Client({ connectionString: url, application_name: 'dx-bench-ctl' });
      await ctl.connect();
      await ctl.query(TX_TABLE_SQL);
      const { rows } = await ctl.query(
        `select version() as v,
                (select oid from pg_database where datname = current_database())::int as oid,
                (select rolsuper from pg_roles where rolname = current_user)
                or pg_has_role(current_user, 'pg_checkpoint', 'member') as cp`,
      );
      const walInspect = await ctl
        .query('create extension if not exists pg_walinspect')
        .then(() => true)
        .catch(() => false);
      return new BenchDatabase(adminUrl, name, url, ctl, rows[0].oid, !!rows[0].cp, walInspect, rows[0].v);
    } catch (err) {
      await dropDatabase(adminUrl, name);
      throw err;
    }
  }

  /**
   * Empties every table of the schema (so each workload starts from the same state: autovacuum may be
   * off, and dead rows of earlier workloads would otherwise tax later ones), then CHECKPOINTs so that
   * every timed section starts with the same full-page-write state.
   */
  async reset(): Promise<void> {
    await this.ctl.query(
      `truncate ai_events, ai_checkpoints, ai_commands, ai_signals, ai_run_stream, ai_runs, bench_tx_items restart identity cascade`,
    );
    if (this.canCheckpoint) await this.ctl.query('checkpoint');
  }

  /** Inserts `n` runs in status `running`, owned by `workerId` at epoch 1 (raw workloads). */
  async insertRunning(
    n: number,
    kind: string,
    workerId: string,
  ): Promise<Array<{ id: string; epoch: number }>> {
    const { rows } = await this.ctl.query(
      `insert into ai_runs (kind, input, status, worker_id, epoch, lease_expires_at, attempts)
       select $1, '{}'::jsonb, 'running', $2, 1, now() + interval '1 hour', 1 from generate_series(1, $3)
       returning id, epoch`,
      [kind, workerId, n],
    );
    await this.ctl.query('analyze ai_runs');
    return rows.map((r) => ({ id: r.id, epoch: Number(r.epoch) }));
  }

  /** Inserts `n` pending runs of `kind` with input `{ steps }` (claimed by the raw loop or the engine). */
  async insertPending(n: number, kind: string, steps: number): Promise<void> {
    await this.ctl.query(
      `insert into ai_runs (kind, input) select $1, jsonb_build_object('steps', $2::int) from generate_series(1, $3)`,
      [kind, steps, n],
    );
    await this.ctl.query('analyze ai_runs');
  }

  /** Run counts by status. */
  async statusCounts(): Promise<Record<string, number>> {
    const { rows } = await this.ctl.query(`select status, count(*)::int as n from ai_runs group by status`);
    return Object.fromEntries(rows.map((r) => [r.status, r.n]));
  }

  /** The WAL position every commit so far is flushed up to (start or end of a window). */
  async walPosition(): Promise<string | null> {
    if (!this.walInspect) return null;
    return (await this.ctl.query('select pg_current_wal_flush_lsn()::text as lsn')).rows[0].lsn;
  }

  /**
   * Commits and WAL volume of this database between two walPosition() readings: records touching its
   * relations (page pruning included) plus the commit records of the transactions that wrote them.
   */
  async walWindow(from: string | null, to: string | null): Promise<WalWindow | null> {
    if (!this.walInspect || !from || !to || from === to) return null;
    const { rows } = await this.ctl.query(
      `with r as (select *, block_ref ~ ('rel [0-9]+/' || $3::text || '/') as here
                    from pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)),
            xids as (select distinct xid from r where here and xid <> '0'),
            ours as (select * from r where here or xid in (select xid from xids))
       select count(*) filter (where resource_manager = 'Transaction' and record_type like 'COMMIT%')::int as commits,
              count(*)::int as records,
              coalesce(sum(record_length), 0)::bigint as bytes,
              coalesce(sum(fpi_length), 0)::bigint as fpi,
              count(*) filter (where resource_manager = 'Heap' and record_type like 'UPDATE%')::int as upd,
              count(*) filter (where resource_manager = 'Heap' and record_type like 'HOT_UPDATE%')::int as hot,
              count(*) filter (where resource_manager = 'Btree' and record_type like 'INSERT_%')::int as idx
         from ours`,
      [from, to, this.oid],
    );
    const w = rows[0];
    return {
      commits: w.commits,
      records: w.records,
      bytes: Number(w.bytes),
      fpiBytes: Number(w.fpi),
      heapUpdates: w.upd,
      hotUpdates: w.hot,
      indexInserts: w.idx,
    };
  }

  async close(): Promise<void> {
    await this.ctl.end().catch(() => undefined);
    await dropDatabase(this.adminUrl, this.name);
  }
}

export async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  await withClient(adminUrl, (c) => c.query(`drop database if exists ${name} with (force)`));
}
